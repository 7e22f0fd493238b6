package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// TestPintOnline runs pint (github.com/cloudflare/pint) online, as a user's
// `pint ci` would, on the committed rule files against Prometheus servers that
// scrape a normal deployment: one vllm_prober probing a vllm_sim target with
// no baseline and no answer check (so vllm_probe_regression_ratio and
// vllm_probe_answer_checks_total do not exist). The servers are Prometheus 2.42
// storing the probe histograms classic, and, when `make e2e` built it,
// Prometheus 3.x storing them native only. pint must report no problem: the
// rules whose series may legitimately be absent say so with reasoned
// `pint disable promql/series(...)` comments. `make e2e` sets E2E_PINT_DIR.
func TestPintOnline(t *testing.T) {
	pintDir := os.Getenv("E2E_PINT_DIR")
	if pintDir == "" {
		testtool.Skip(t, "pint (E2E_PINT_DIR)", "make e2e builds it once with scripts/e2e-tools.sh pint")
	}
	p2, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("Prometheus 2.x (Debian's prometheus package) is not on PATH: %v", err)
	}
	ctx := t.Context()
	dir := t.TempDir()
	proberBin, simBin := binaries(t)

	simAddr := freeAddr(t)
	sim := startProcess(t, "vllm_sim", simBin, "--web.listen-address="+simAddr, "--model="+simModel, "--ttft=20ms", "--itl=5ms")
	if err := waitReady(ctx, sim, "http://"+simAddr+"/health", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	proberCfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(proberCfg, []byte(fmt.Sprintf(`global:
  probe_interval: 1s
  scrape_interval: 1s
  scrape_timeout: 900ms
  native_histogram_bucket_factor: 1.1
modules:
  completion:
    prober: completions
    prompt: %q
    max_tokens: 4
targets:
  - name: sim
    url: http://%s
    model: %s
    modules: [completion]
`, probePrompt, simAddr, simModel)), 0o644); err != nil {
		t.Fatal(err)
	}
	proberAddr := freeAddr(t)
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+proberCfg, "--web.listen-address="+proberAddr)
	if err := waitReady(ctx, prober, "http://"+proberAddr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	rules, err := filepath.Glob("../alerts/*.yml")
	if err != nil || len(rules) == 0 {
		t.Fatalf("no rule files in ../alerts: %v", err)
	}
	spec, err := mixin.LoadSpec(sloFile)
	if err != nil {
		t.Fatal(err)
	}
	type server struct {
		name, bin string
		mode      mixin.HistogramMode
		major     int
	}
	servers := []server{{"prometheus-2-classic", p2, mixin.HistogramClassic, 2}}
	if d := prometheus3Dir(); d != "" {
		servers = append(servers, server{"prometheus-3-native", filepath.Join(d, "prometheus"), mixin.HistogramNative, 3})
	}
	var hcl strings.Builder
	for _, s := range servers {
		sdir := filepath.Join(dir, s.name)
		cfg, err := mixin.PrometheusConfigMode(spec, []string{proberAddr}, interval, nil, s.mode, s.major)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfgFile := filepath.Join(sdir, "prometheus.yml")
		if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		// The seasonal rules read the same hour three weeks ago: they need a
		// retention of at least 3w1h (docs/runbook.md), which pint checks.
		args := append([]string{"--config.file=" + cfgFile, "--storage.tsdb.path=" + filepath.Join(sdir, "data"), "--web.listen-address=" + addr,
			"--storage.tsdb.retention.time=22d"},
			mixin.PrometheusFlags(s.mode, s.major)...)
		proc := startProcess(t, s.name, s.bin, args...)
		if err := waitReady(ctx, proc, "http://"+addr+"/-/ready", 60*time.Second); err != nil {
			t.Fatal(err)
		}
		c := &mixin.Client{BaseURL: "http://" + addr, HTTP: httpClient}
		// Wait until the probe histograms and the server series are in.
		if err := waitFor(ctx, 60*time.Second, 500*time.Millisecond, s.name+" probe series", func(ctx context.Context) (bool, error) {
			n, err := c.Query(ctx, `vllm_probe_attempts_total > 0 and on () count(vllm_server_up) > 0`)
			return n > 0, err
		}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&hcl, "prometheus %q {\n  uri     = %q\n  timeout = \"30s\"\n}\n", s.name, "http://"+addr)
	}
	// Known and accepted, each for its reason:
	//   - vllm_probe_failures_total and vllm_probe_skipped_total appear with a
	//     reason's first occurrence, so a healthy stack has none yet, and
	//     vllm_server_sleep_level only where an engine reports sleep mode; the
	//     rules read their absence as none (VLLMEngineHung, VLLMProbesFailing
	//     and VLLMProbeBudgetExhausted do not fire, VLLMEndpointDown is not
	//     muted). vllm_probe_health_up{vantage!=""} exists only with vantages.
	//   - rule/dependency: the hourly seasonal group reads the SLI group's
	//     ratios; one evaluation of lag is nothing at hour resolution.
	hcl.WriteString(`check "promql/series" {
  ignoreMetrics = ["vllm_probe_failures_total", "vllm_probe_skipped_total", "vllm_server_sleep_level", "vllm_probe_health_up"]
}
checks {
  disabled = ["rule/dependency"]
}
`)
	cfg := filepath.Join(dir, "pint.hcl")
	if err := os.WriteFile(cfg, []byte(hcl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--no-color", "--config=" + cfg, "lint"}, rules...)
	cmd := exec.CommandContext(ctx, filepath.Join(pintDir, "pint"), args...)
	out, err := cmd.CombinedOutput()
	var problems []string
	accepted := false // the line before was a warning ignoreMetrics made of a bug
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Warning: query on nonexistent series (promql/series)") {
			accepted = true // pint keeps a bug for any metric outside ignoreMetrics
			continue
		}
		if strings.HasPrefix(l, "  ---> ") && accepted {
			accepted = false
			continue
		}
		if strings.HasPrefix(l, "Bug:") || strings.HasPrefix(l, "Warning:") || strings.HasPrefix(l, "Fatal:") || strings.HasPrefix(l, "  ---> ") {
			problems = append(problems, l)
		}
	}
	if err != nil || len(problems) > 0 {
		t.Errorf("pint lint online on %v against %d Prometheus servers: %v\n%s\n\nfull output:\n%s", rules, len(servers), err, strings.Join(problems, "\n"), out)
	}
	t.Logf("pint online against %d servers: %d rule files clean", len(servers), len(rules))
}
