package main

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260102030405-abcdef123456"}}
	for _, c := range []struct {
		ldflags string
		info    *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"1.2.3", info, true, "1.2.3"},
		{"", info, true, "v0.0.0-20260102030405-abcdef123456"},
		{"", &debug.BuildInfo{}, true, "(devel)"},
		{"", nil, false, "(devel)"},
	} {
		if got := buildVersion(c.ldflags, c.info, c.ok); got != c.want {
			t.Errorf("buildVersion(%q, %v) = %q, want %q", c.ldflags, c.info, got, c.want)
		}
	}
}

// A plain go build (no -ldflags) reports a version, not an empty one.
func TestPlainBuildHasVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "vllm_prober")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if !strings.Contains(first, "version ") || strings.Contains(first, "version  (") {
		t.Errorf("--version of a plain build: %q", first)
	}
	t.Logf("plain build: %s", first)
}
