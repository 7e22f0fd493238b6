package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binaries returns the paths of vllm_prober and vllm_sim: those of
// $VLLM_PROBER_BIN_DIR when set (e.g. bin/ after `make build`), else freshly
// built into a temporary directory with a known version.
func binaries(t *testing.T) (prober, sim string, version string) {
	t.Helper()
	if dir := os.Getenv("VLLM_PROBER_BIN_DIR"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(abs, "vllm_prober"), filepath.Join(abs, "vllm_sim"), ""
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the binaries with, and VLLM_PROBER_BIN_DIR is not set")
	}
	dir := t.TempDir()
	version = "0.0.0-e2e"
	for _, name := range []string{"vllm_prober", "vllm_sim"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name),
			"-ldflags", "-X github.com/prometheus/common/version.Version="+version, "../"+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	return filepath.Join(dir, "vllm_prober"), filepath.Join(dir, "vllm_sim"), version
}

// lockedBuffer is an io.Writer for a child's output, readable while it runs.
type lockedBuffer struct{ syncBuffer }

func startProcess(t *testing.T, path string, args ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	out := &lockedBuffer{}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, out
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

// TestEndToEnd runs the compiled vllm_prober against the compiled vllm_sim, which
// requires an API key given to the prober in a credentials file: probes succeed,
// a bad reload keeps the old config, SIGHUP applies a good one, SIGTERM exits 0,
// and the key appears nowhere.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	proberBin, simBin, version := binaries(t)
	const key = "sk-e2e-key-5c1d7a9e"
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	simAddr, proberAddr := freeAddr(t), freeAddr(t)
	_, simOut := startProcess(t, simBin, "--web.listen-address="+simAddr, "--api-key="+key, "--ttft=5ms", "--itl=1ms")
	eventually(t, 10*time.Second, "vllm_sim to listen", func() bool {
		_, _, err := httpGet("http://" + simAddr + "/health")
		return err == nil
	})

	config := func(modules string) string {
		return fmt.Sprintf(`
global: {probe_interval: 300ms, scrape_interval: 1s, scrape_timeout: 500ms, rate_window: 3s}
modules:
  short_completion: {prober: completions, prompt: "Say hello.", max_tokens: 4}
  short_chat: {prober: chat, messages: [{role: user, content: "Name three prime numbers."}], max_tokens: 4}
targets:
  - name: sim
    url: http://%s
    modules: %s
    labels: {preset: e2e}
    http_client_config:
      authorization: {credentials_file: api-key}
`, simAddr, modules)
	}
	cfgPath := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(cfgPath, []byte(config("[short_completion]")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOGC", "") // the prober runs at its own default
	prober, out := startProcess(t, proberBin, "--config.file="+cfgPath, "--web.listen-address="+proberAddr, "--log.level=debug")
	base := "http://" + proberAddr

	var metrics string
	eventually(t, 20*time.Second, "a successful probe on /metrics", func() bool {
		_, metrics, _ = httpGet(base + "/metrics")
		return strings.Contains(metrics, `vllm_probe_success{model="meta-llama/Llama-3.1-8B-Instruct",module="short_completion",preset="e2e",target="sim"} 1`)
	})
	for _, want := range []string{
		`vllm_probe_health_up{model="meta-llama/Llama-3.1-8B-Instruct",preset="e2e",target="sim"} 1`,
		"vllm_prober_config_last_reload_successful 1",
		`vllm_prober_build_info{branch="",goarch=`,
		"go_gc_gogc_percent 75", // daemon.DefaultGOGC
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if version != "" && !strings.Contains(metrics, `version="`+version+`"`) {
		t.Errorf("vllm_prober_build_info does not carry the ldflags version %q", version)
	}
	if code, page, _ := httpGet(base + "/"); code != http.StatusOK || !strings.Contains(page, `<tr class="healthy"><td class="st">healthy<td>`) {
		t.Errorf("landing page = %d without a healthy summary row", code)
	}
	if code, page, _ := httpGet(base + "/target?name=sim"); code != http.StatusOK || !strings.Contains(page, `<span class="ok">success</span>`) {
		t.Errorf("target page = %d without a successful probe", code)
	}

	// A bad file: 500, the old config keeps running.
	if err := os.WriteFile(cfgPath, []byte(config("[short_completion, nope]")), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `failed to reload config: error parsing config file "` + cfgPath + `": target "sim": unknown module "nope"` + "\n"
	if resp.StatusCode != http.StatusInternalServerError || string(body) != want {
		t.Errorf("POST /-/reload = %d %q, want 500 %q", resp.StatusCode, body, want)
	}
	if _, m, _ := httpGet(base + "/metrics"); !strings.Contains(m, "vllm_prober_config_last_reload_successful 0") {
		t.Error("reload gauge is not 0 after a bad reload")
	}

	// SIGHUP applies a good file: the chat module starts.
	if err := os.WriteFile(cfgPath, []byte(config("[short_completion, short_chat]")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prober.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the chat module to be probed after SIGHUP", func() bool {
		_, metrics, _ = httpGet(base + "/metrics")
		return strings.Contains(metrics, `vllm_probe_success{model="meta-llama/Llama-3.1-8B-Instruct",module="short_chat",preset="e2e",target="sim"} 1`)
	})
	if !strings.Contains(metrics, "vllm_prober_config_last_reload_successful 1") {
		t.Error("reload gauge is not 1 after SIGHUP")
	}
	_, debug, _ := httpGet(base + "/probe?target=sim&module=short_chat&debug=true")
	if !strings.Contains(debug, "Result: success") {
		t.Errorf("/probe debug:\n%s", debug)
	}
	_, cfgPage, _ := httpGet(base + "/config")

	// SIGTERM: a clean exit.
	if err := prober.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- prober.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("vllm_prober exited with %v after SIGTERM; log:\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("vllm_prober did not exit within 20s of SIGTERM")
	}

	logs := out.String()
	for _, w := range []string{`msg="Received SIGHUP, reloading config"`, `msg="Error reloading config"`, `msg="Shutting down"`, "level=debug"} {
		if !strings.Contains(logs, w) {
			t.Errorf("log lacks %s", w)
		}
	}
	for _, where := range []struct{ name, text string }{
		{"the log", logs}, {"/metrics", metrics}, {"/probe debug", debug}, {"/config", cfgPage},
	} {
		if strings.Contains(where.text, key) {
			t.Errorf("%s leaks the API key", where.name)
		}
	}
	if bytes.Contains([]byte(simOut.String()), []byte("panic")) {
		t.Errorf("vllm_sim panicked:\n%s", simOut.String())
	}
}
