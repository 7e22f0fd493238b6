package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/shard"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/testutil"
)

// syncBuffer collects output written by several goroutines.
type syncBuffer struct{ testutil.LogBuffer }

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb syncBuffer
	code = runArgs(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestConfigCheck(t *testing.T) {
	code, _, stderr := runCLI(t, "--config.check", "--config.file=../../examples/demo.yml")
	if code != 0 || !strings.Contains(stderr, `msg="Config file is ok, exiting" file=../../examples/demo.yml`) {
		t.Errorf("--config.check on examples/demo.yml = %d, stderr:\n%s", code, stderr)
	}

	code, _, stderr = runCLI(t, "--config.check", "--config.file=../../config/testdata/invalid-prober.yml")
	want := "vllm_prober --config.check: ../../config/testdata/invalid-prober.yml: module \"grpc_probe\": prober \"grpc\" is not valid (completions, chat, embeddings or responses)\n"
	if code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("--config.check on a bad file = %d, want 1 and %s; stderr:\n%s", code, want, stderr)
	}

	// An invalid answer check is named by its key's path.
	code, _, stderr = runCLI(t, "--config.check", "--config.file=../../config/testdata/invalid-expect-regex.yml")
	if want := "modules.math.expect.regex: error parsing regexp: missing closing ): `4(`"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("--config.check on a bad expect regex = %d, want 1 and %s; stderr:\n%s", code, want, stderr)
	}
	code, _, stderr = runCLI(t, "--config.check", "--config.file=../../config/testdata/invalid-expect-schema.yml")
	if want := "modules.json.expect.json_schema: invalid schema: "; code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "at '/properties/count/minimum': got string, want number") {
		t.Errorf("--config.check on a bad expect schema = %d, want 1 and %s; stderr:\n%s", code, want, stderr)
	}

	code, _, stderr = runCLI(t, "--config.check", "--config.file=does-not-exist.yml")
	if code != 1 || !strings.Contains(stderr, "vllm_prober --config.check: does-not-exist.yml: open does-not-exist.yml: no such file or directory\n") {
		t.Errorf("--config.check on a missing file = %d, stderr:\n%s", code, stderr)
	}

	// The web config file is checked too.
	webCfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(webCfg, []byte("tls_server_config:\n  cert_file: missing.crt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "--config.check", "--config.file=../../examples/demo.yml", "--web.config.file="+webCfg)
	if code != 1 || !strings.Contains(stderr, "\nvllm_prober --config.check: "+webCfg+": missing one of key or key_file\n") {
		t.Errorf("--config.check with a bad web config = %d, stderr:\n%s", code, stderr)
	}
}

func TestFlags(t *testing.T) {
	code, stdout, _ := runCLI(t, "--help")
	if code != 0 {
		t.Errorf("--help = %d", code)
	}
	for _, want := range []string{
		`--config.file="vllm_prober.yml"`, "--[no-]config.check", "--web.listen-address=:10040", "--web.config.file",
		`--web.telemetry-path="/metrics"`, "--history.limit=20", "--log.level=info", "--log.format=logfmt",
		"--shard.count=1", "--shard.index=SHARD.INDEX",
		"run*", "baseline import", "rules generate", "bench",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q:\n%s", want, stdout)
		}
	}

	code, stdout, _ = runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "vllm_prober, version ") {
		t.Errorf("--version = %d %q", code, stdout)
	}

	for _, args := range [][]string{
		{"--no-such-flag"},
		{"--log.level=verbose"},
		{"--log.format=xml"},
		{"--history.limit=many"},
		{"no-such-command"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.HasPrefix(stderr, "vllm_prober: error: ") || !strings.HasSuffix(stderr, ", try --help\n") {
			t.Errorf("%v = %d %q, want 2 and a usage error", args, code, stderr)
		}
	}
}

func TestSubcommandDispatch(t *testing.T) {
	out := t.TempDir()
	code, _, stderr := runCLI(t, "rules", "generate", "--slo.file=../../mixin/slo.yml", "--out="+out)
	if code != 0 {
		t.Fatalf("rules generate = %d, stderr:\n%s", code, stderr)
	}
	files, err := filepath.Glob(filepath.Join(out, "*.yml"))
	if err != nil || len(files) == 0 {
		t.Errorf("rules generate wrote nothing to %s (%v)", out, err)
	}
	code, _, _ = runCLI(t, "rules", "generate", "--slo.file=does-not-exist.yml", "--out="+out)
	if code != 1 {
		t.Errorf("rules generate with a missing SLO file = %d, want 1", code)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// The default command runs the daemon: it serves on --web.listen-address, probes
// an in-process vllm_sim, logs JSON at debug level without the API key, and exits
// 0 when its context is cancelled.
func TestRunDaemon(t *testing.T) {
	const key = "sk-main-test-key-93bd"
	simCfg := simulator.DefaultConfig()
	simCfg.APIKey = key
	simCfg.TTFT = 5 * time.Millisecond
	simCfg.ITL = time.Millisecond
	sim, err := simulator.New(simCfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim.Handler())
	defer func() { simSrv.Close(); _ = sim.Close() }()

	cfgPath := filepath.Join(t.TempDir(), "vllm_prober.yml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
global: {probe_interval: 200ms, scrape_interval: 1s, scrape_timeout: 500ms, rate_window: 2s}
modules:
  short_completion: {prober: completions, prompt: hi, max_tokens: 4}
targets:
  - name: sim
    url: %s
    http_client_config: {authorization: {credentials: %s}}
`, simSrv.URL, key)), 0o600); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- runArgs(ctx, []string{"--config.file=" + cfgPath, "--web.listen-address=" + addr,
			"--log.level=debug", "--log.format=json", "--web.telemetry-path=/m"}, &stdout, &stderr)
	}()

	var metrics string
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(metrics, `vllm_probe_success{model="meta-llama/Llama-3.1-8B-Instruct",module="short_completion",target="sim"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("no successful probe on /m within 15s; metrics:\n%s\nlog:\n%s", metrics, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
		resp, err := http.Get("http://" + addr + "/m")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metrics = string(b)
	}
	resp, err := http.Get("http://" + addr + "/probe?target=sim&debug=true")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Result: success") {
		t.Errorf("/probe debug = %d:\n%s", resp.StatusCode, body)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("run exited %d, want 0; log:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}

	logs := stderr.String()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	var sawDebug, sawWeb bool
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("--log.format=json wrote a non-JSON line %q: %v", l, err)
			continue
		}
		if m["level"] == "debug" {
			sawDebug = true
		}
		if m["component"] == "web" && m["msg"] == "Listening on" {
			sawWeb = true
			if _, ok := m["time"]; ok {
				t.Errorf("the exporter-toolkit bridge logs a second timestamp: %s", l)
			}
		}
		if _, ok := m["ts"]; !ok {
			t.Errorf("log line without ts: %s", l)
		}
	}
	if !sawDebug || !sawWeb {
		t.Errorf("log lacks debug lines (%v) or exporter-toolkit's through the bridge (%v):\n%s", sawDebug, sawWeb, logs)
	}
	for _, where := range []struct{ name, text string }{{"the log", logs}, {"/m", metrics}, {"/probe debug", string(body)}} {
		if strings.Contains(where.text, key) {
			t.Errorf("%s leaks the API key", where.name)
		}
	}
}

// shardMetrics runs the daemon with args on a two-target configuration until
// /metrics answers, and returns the vllm_prober_shard_info and
// vllm_prober_targets lines.
func shardMetrics(t *testing.T, args ...string) string {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "vllm_prober.yml")
	if err := os.WriteFile(cfgPath, []byte(`
modules:
  m: {prober: completions, prompt: hi}
targets:
  - {name: a, url: "http://127.0.0.1:9"}
  - {name: b, url: "http://127.0.0.1:9"}
  - {name: c, url: "http://127.0.0.1:9"}
  - {name: d, url: "http://127.0.0.1:9"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runArgs(ctx, append([]string{"--config.file=" + cfgPath, "--web.listen-address=" + addr}, args...), &stdout, &stderr)
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("run %v exited %d; log:\n%s", args, code, stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("run did not return after its context was cancelled")
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "vllm_prober_shard_info{") || strings.HasPrefix(l, "vllm_prober_targets{") {
					lines = append(lines, l)
				}
			}
			return strings.Join(lines, "\n")
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics did not answer within 15s: %v; log:\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --shard.count and --shard.index reach the daemon; the index defaults from
// SHARD_INDEX; bad values are command-line errors.
func TestShardFlags(t *testing.T) {
	// The share of targets a, b, c, d that shard index of count owns.
	share := func(count, index int) int {
		n := 0
		for _, name := range []string{"a", "b", "c", "d"} {
			if count == 1 || shard.Of(name, count) == index {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name, env    string
		args         []string
		count, index int
	}{
		{"default", "", nil, 1, 0},
		{"flags", "", []string{"--shard.count=2", "--shard.index=1"}, 2, 1},
		{"index from SHARD_INDEX", "1", []string{"--shard.count=2"}, 2, 1},
		{"flag wins over SHARD_INDEX", "1", []string{"--shard.count=2", "--shard.index=0"}, 2, 0},
		{"one shard ignores SHARD_INDEX", "1", nil, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SHARD_INDEX", tc.env)
			got := shardMetrics(t, tc.args...)
			want := fmt.Sprintf("vllm_prober_shard_info{count=\"%d\",index=\"%d\"} 1\n", tc.count, tc.index) +
				"vllm_prober_targets{source=\"discovered\"} 0\n" +
				fmt.Sprintf("vllm_prober_targets{source=\"static\"} %d", share(tc.count, tc.index))
			if got != want {
				t.Errorf("/metrics has\n%s\nwant\n%s", got, want)
			}
		})
	}

	t.Setenv("SHARD_INDEX", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard.count=0"}, "--shard.count must be at least 1, got 0"},
		{[]string{"--shard.count=3", "--shard.index=3"}, "shard index 3 is out of range for shard count 3 (want 0 to 2)"},
		{[]string{"--shard.count=3", "--shard.index=$(SHARD_INDEX)"}, `--shard.index "$(SHARD_INDEX)" is not a non-negative integer`},
	} {
		code, _, stderr := runCLI(t, append([]string{"--config.file=../../examples/demo.yml"}, tc.args...)...)
		if want := "vllm_prober: error: " + tc.want + ", try --help\n"; code != 2 || stderr != want {
			t.Errorf("%v = %d %q, want 2 %q", tc.args, code, stderr, want)
		}
	}
	t.Setenv("SHARD_INDEX", "two")
	code, _, stderr := runCLI(t, "--config.file=../../examples/demo.yml", "--shard.count=3")
	if want := "vllm_prober: error: --shard.index: SHARD_INDEX=\"two\" is not a non-negative integer, try --help\n"; code != 2 || stderr != want {
		t.Errorf("SHARD_INDEX=two = %d %q, want 2 %q", code, stderr, want)
	}
}
