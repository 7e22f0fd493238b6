package discovery

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/vllm-prober/vllm_prober/config"
)

// TestFileSDPickedUpWithoutRestart drives one Manager through file creation,
// in-place and atomic rewrites, a broken file, a rename and a removal. The
// refresh interval is an hour, so every change must come from the watch.
func TestFileSDPickedUpWithoutRestart(t *testing.T) {
	d := dir(t)
	a, b := filepath.Join(d, "a.json"), filepath.Join(d, "b.yml")
	writeAtomic(t, a, `[{"targets": ["a1:8000", "a2:8000"], "labels": {"pool": "a"}}]`)
	cfg := loadConfig(t, fmt.Sprintf("file_sd_configs: [{files: [%q, %q], refresh_interval: 1h}]",
		filepath.Join(d, "*.json"), filepath.Join(d, "*.yml")))
	logs := &logBuffer{}
	m := run(t, cfg, nil, logs.logger())

	ts := waitTargets(t, m, "the initial file", hasNames("a1:8000", "a2:8000"))
	if ts[0].Labels["pool"] != "a" || ts[0].URL != "http://a1:8000" {
		t.Errorf("target = %+v", ts[0])
	}

	// A new file matching the second pattern.
	if err := os.WriteFile(b, []byte("- targets: [b1:8000]\n  labels: {pool: b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitTargets(t, m, "a new file", hasNames("a1:8000", "a2:8000", "b1:8000"))

	// An in-place rewrite.
	if err := os.WriteFile(a, []byte(`[{"targets": ["a1:8000", "a3:8000"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitTargets(t, m, "an in-place rewrite", hasNames("a1:8000", "a3:8000", "b1:8000"))

	// A broken file keeps its last good targets, and says which file it is.
	writeAtomic(t, a, `[{"targets": ["a1:8000", `)
	logs.waitLog(t, "level=error", `msg="Error reading file"`, "config=file_sd_configs[0]", "path="+a, "unexpected end of JSON input")
	if got := m.targets(); !hasNames("a1:8000", "a3:8000", "b1:8000")(got) {
		t.Errorf("after breaking a.json: targets %v, want the last good ones", names(got))
	}
	// Other files still flow while a.json is broken.
	writeAtomic(t, b, "- targets: [b1:8000, b2:8000]\n")
	waitTargets(t, m, "b.yml changing while a.json is broken", hasNames("a1:8000", "a3:8000", "b1:8000", "b2:8000"))
	// Fixing it applies the new content.
	writeAtomic(t, a, `[{"targets": ["a4:8000"]}]`)
	waitTargets(t, m, "the repaired file", hasNames("a4:8000", "b1:8000", "b2:8000"))

	// Renamed out of the patterns: its targets go.
	if err := os.Rename(b, b+".disabled"); err != nil {
		t.Fatal(err)
	}
	waitTargets(t, m, "the renamed file's targets to go", hasNames("a4:8000"))
	// Removed: its targets go, too.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	waitTargets(t, m, "the removed file's targets to go", hasNames())

	m.stop()
	goleak.VerifyNone(t) // the watcher (fsnotify) and the provider's loop are gone
}

// TestFileSDStartup: a file broken from the start contributes nothing and is
// named in the log; the other files and the static targets are published.
func TestFileSDStartup(t *testing.T) {
	d := dir(t)
	writeAtomic(t, filepath.Join(d, "good.yaml"), "- targets: [g:1]\n")
	writeAtomic(t, filepath.Join(d, "bad.yaml"), "- targets: [x:1]\n  bogus: true\n")
	writeAtomic(t, filepath.Join(d, "null.json"), `[null]`)
	cfg := loadConfig(t, fmt.Sprintf("file_sd_configs: [{files: [%q, %q]}]", filepath.Join(d, "*.yaml"), filepath.Join(d, "*.json")))
	static := config.DefaultTarget
	static.Name, static.URL = "static", "http://127.0.0.1:8000"
	logs := &logBuffer{}
	m := run(t, cfg, []config.Target{static}, logs.logger())
	waitTargets(t, m, "the good file and the static target", hasNames("g:1", "static"))
	for file, msg := range map[string]string{
		"bad.yaml":  "field bogus not found",
		"null.json": "nil target group item found",
	} {
		line := logs.waitLog(t, `msg="Error reading file"`, "path="+filepath.Join(d, file))
		if !strings.Contains(line, msg) {
			t.Errorf("log line %q does not say %q", line, msg)
		}
	}
}

// TestFileSDConfigMapSwap updates targets the way the kubelet updates a mounted
// ConfigMap: the file is a symlink through "..data", and an update renames a
// new "..data" symlink into place. No event names the target file itself.
func TestFileSDConfigMapSwap(t *testing.T) {
	d := dir(t)
	version := func(n int, content string) {
		t.Helper()
		v := filepath.Join(d, fmt.Sprintf("..v%d", n))
		if err := os.Mkdir(v, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(v, "targets.json"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(d, "..data_tmp")
		if err := os.Symlink(filepath.Base(v), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(d, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version(1, `[{"targets": ["v1:8000"]}]`)
	if err := os.Symlink(filepath.Join("..data", "targets.json"), filepath.Join(d, "targets.json")); err != nil {
		t.Fatal(err)
	}
	m := run(t, loadConfig(t, fmt.Sprintf("file_sd_configs: [{files: [%q], refresh_interval: 1h}]", filepath.Join(d, "*.json"))), nil, nil)
	waitTargets(t, m, "the first ConfigMap version", hasNames("v1:8000"))
	version(2, `[{"targets": ["v2:8000"]}]`)
	waitTargets(t, m, "the swapped ConfigMap version", hasNames("v2:8000"))
}
