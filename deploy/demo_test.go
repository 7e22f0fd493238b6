package deploy

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemo runs what `make demo` runs, as a newcomer would: the Makefile's
// binaries and scripts/demo.sh with examples/demo.yml, copied into a scratch
// root (the demo's fixed ports 8000 and 10040 are replaced by free ones in a
// copy of the configuration). Within the demo's lifetime the prober's /metrics
// must show successful probes of both modules and regression ratios against
// the shipped baseline, and the script must print where to look and exit 0.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs the demo for about 30s")
	}
	root := t.TempDir()
	build := exec.Command("make", "-C", repoRoot, "--no-print-directory", "build", "BIN_DIR="+filepath.Join(root, "bin"))
	build.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	installCopy(t, filepath.Join(repoRoot, "scripts", "demo.sh"), filepath.Join(root, "scripts", "demo.sh"))
	if err := os.Chmod(filepath.Join(root, "scripts", "demo.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	installCopy(t, filepath.Join(repoRoot, "examples"), filepath.Join(root, "examples"))

	simAddr, sglangAddr, proberAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	demo, err := os.ReadFile(filepath.Join(root, "examples", "demo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(demo), "url: http://127.0.0.1:8000\n") {
		t.Fatal("examples/demo.yml no longer probes http://127.0.0.1:8000, where make demo starts vllm_sim")
	}
	if !strings.Contains(string(demo), "url: http://127.0.0.1:8001\n") {
		t.Fatal("examples/demo.yml no longer scrapes http://127.0.0.1:8001, where make demo starts vllm_sim --engine=sglang")
	}
	cfg := strings.ReplaceAll(string(demo), "http://127.0.0.1:8000", "http://"+simAddr)
	cfg = strings.ReplaceAll(cfg, "http://127.0.0.1:8001", "http://"+sglangAddr)
	if err := os.WriteFile(filepath.Join(root, "examples", "demo-test.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "demo.sh"))
	cmd.Env = append(os.Environ(), "SIM_ADDR="+simAddr, "SGLANG_ADDR="+sglangAddr, "PROBER_ADDR="+proberAddr,
		"CONFIG=examples/demo-test.yml", "DEMO_DURATION=30")
	out, exited := startCommand(t, cmd)
	defer func() {
		cancel()
		<-exited
	}()

	wants := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^vllm_probe_success\{[^}]*module="short_completion"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^vllm_probe_success\{[^}]*module="short_chat"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^vllm_probe_regression_ratio\{baseline="vllm-sim-default",metric="tpot"[^}]*\} [0-9.e+-]+$`),
		// The second simulator speaks SGLang: read by the SGLang profile, and probed.
		regexp.MustCompile(`(?m)^vllm_server_info\{[^}]*engine="sglang"[^}]*target="sglang-sim"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^vllm_probe_success\{[^}]*target="sglang-sim"[^}]*\} 1$`),
	}
	var body string
	seen := false
	for deadline := time.Now().Add(25 * time.Second); time.Now().Before(deadline) && !seen; time.Sleep(500 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the demo exited early: %v\n%s", err, out.String())
		default:
		}
		if body, err = get(ctx, "http://"+proberAddr+"/metrics"); err != nil {
			continue
		}
		seen = true
		for _, w := range wants {
			seen = seen && w.MatchString(body)
		}
	}
	if !seen {
		t.Fatalf("the demo's /metrics never showed successful probes of both modules and a regression ratio; last body:\n%.3000s\ndemo output:\n%s", body, out.String())
	}
	if err := <-exited; err != nil {
		exited <- err
		t.Fatalf("the demo ended with %v\n%s", err, out.String())
	}
	exited <- nil
	for _, w := range []string{"http://" + proberAddr + "/ ", "http://" + proberAddr + "/metrics", "http://" + simAddr + "/v1/models", "Press Ctrl-C to stop both."} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("the demo did not print %q:\n%s", w, out.String())
		}
	}
}

// freeAddr returns a 127.0.0.1 address nothing listens on at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
