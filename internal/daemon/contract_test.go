package daemon

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/internal/bench"
	"github.com/vllm-prober/vllm_prober/internal/genaiotel/otlptest"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// benchBaseline benchmarks the simulator at srvURL into a baseline file called
// name in dir, as `vllm_prober bench` does, and returns the file's path.
func benchBaseline(t testing.TB, srvURL, dir, name string) string {
	t.Helper()
	// The goodput objectives of TestMetricNamesMatchDocs's module "checked":
	// the baseline's attainment is then compared (vllm_probe_expected_goodput_ratio).
	goodput, err := config.ParseGoodput("ttft:2000 tpot:100")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bench.Run(context.Background(), bench.Options{URL: srvURL, Requests: 3, Concurrencies: []int{1, 2},
		MaxTokens: 8, IgnoreEOS: true, Name: name, PollInterval: 100 * time.Millisecond, Goodput: &goodput})
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	files, err := bench.WriteAll(dir, rep)
	if err != nil {
		t.Fatalf("writing the bench results: %v", err)
	}
	return filepath.Join(dir, files.Baseline)
}

// documentedNames are the metric names in the tables of docs/metrics.md,
// recording rules excepted.
func documentedNames(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `(vllm_[a-z0-9_]+)` \\|")
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## Recording rules") {
			break
		}
		if m := row.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if len(names) < 40 {
		t.Fatalf("docs/metrics.md lists only %d vllm_ names: the table format changed?", len(names))
	}
	return names
}

// exportedNames are the vllm_ metric families reg exports now.
func exportedNames(t *testing.T, reg prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	var names []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "vllm_") {
			names = append(names, mf.GetName())
		}
	}
	sort.Strings(names)
	return names
}

func diff(a, b []string) (onlyA []string) {
	for _, n := range a {
		if !slices.Contains(b, n) {
			onlyA = append(onlyA, n)
		}
	}
	return onlyA
}

// notFromSim are vLLM series vllm_sim does not serve (the MFU counters of
// --enable-mfu-metrics, --kv-cache-metrics' residency, admission control's
// rejection counter): collector TestVLLM2026Series reads them from a 2026
// vLLM's /metrics.
var notFromSim = []string{
	"vllm_server_flops_per_gpu_per_second", "vllm_server_memory_bytes_per_gpu_per_second", "vllm_server_mfu_ratio",
	"vllm_server_kv_block_lifetime_seconds", "vllm_server_admission_rejections_per_second",
}

// The metric names in the code are the documented ones, exactly: a daemon with
// a baseline, a static v1 simulator target, a gateway in front of it and a
// legacy simulator target found by file_sd exports every name of docs/metrics.md's tables and no other
// vllm_ name once probes, scrapes and regression have run. Renaming a metric
// in code or docs alone fails here.
func TestMetricNamesMatchDocs(t *testing.T) {
	// vllm_server_spec_decode_regression_ratio needs a baseline imported
	// from vllm bench serve runs with speculative decoding, which a baseline
	// benched here has not (internal/compare's TestSpecDecodeRegression
	// tests it).
	// vllm_server_kv_transfer_seconds needs KV transfers in the rate window,
	// which only a prefill/decode pair makes (TestDisaggregatedTransferSlow
	// tests it); sim has a KV connector, so its failure rate is exported.
	documented := slices.DeleteFunc(documentedNames(t), func(n string) bool {
		return n == "vllm_server_spec_decode_regression_ratio" || n == "vllm_server_kv_transfer_seconds" || slices.Contains(notFromSim, n)
	})
	sim := startPlainSim(t, func(c *simulator.Config) {
		c.TTFT, c.ITL = 10*time.Millisecond, 2*time.Millisecond
		c.SpecDecodeTokens, c.SpecAcceptRate = 2, 0.5
		c.ReasoningTokens = 2 // the chat module's answers come after reasoning
		c.KVTransfer = simulator.KVTransferConfig{Connector: simulator.KVConnectorNixl, Role: simulator.KVRoleBoth}
	})
	// vllm_server_cpu_kv_cache_usage_ratio and state="swapped" exist on legacy servers only.
	legacy := startPlainSim(t, func(c *simulator.Config) { c.MetricsNames = simulator.MetricsLegacy })
	// A gateway in front of sim, with the EPP's /metrics of a flow-control
	// run and llm-d's disaggregation decisions: the vllm_gateway_* names,
	// its own and the joins'.
	gw := eppGateway(t, sim, "# TYPE llm_d_epp_disagg_decision_total counter\n"+
		`llm_d_epp_disagg_decision_total{decision_type="decode-only",model_name="m",plugin_name="p",plugin_type="disagg-profile-handler"} 3`+"\n")
	dir := t.TempDir()
	baselineFile := benchBaseline(t, sim.URL, dir, "simbase")
	if err := os.Mkdir(filepath.Join(dir, "targets"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(dir, "targets", "legacy.json"), targetGroups(hostPort(t, legacy), "legacy"))

	// The OTLP push's own counter exists when the push is on.
	otlp := httptest.NewServer(&otlptest.Receiver{})
	defer otlp.Close()

	f := &fixture{t: t, path: filepath.Join(dir, "vllm_prober.yml")}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 200ms, scrape_interval: 300ms, scrape_timeout: 250ms, rate_window: 1500ms, burst: {token_budget_per_hour: 100000}, otlp: {endpoint: %s/v1/metrics}}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 8}
  checked: {prober: completions, prompt: "Say hello.", max_tokens: 8, expect: {regex: "\\w"}, slos: {ttft: 2s, tpot: 100ms}}
  embed: {prober: embeddings, prompt: "Say hello."}
  think: {prober: chat, messages: [{role: user, content: "Say hello."}], max_tokens: 8}
baselines: [{name: simbase, file: %s}]
targets:
  - {name: sim, url: %q, baseline: simbase, max_num_seqs: 16, price_per_hour: 2.5, labels: {preset: test}}
  - {name: gw, url: %q, metrics_path: /gateway/metrics, gateway: {members: [sim]}}
file_sd_configs:
  - files: [targets/*.json]
target_defaults:
  max_num_seqs: 16
`, otlp.URL, baselineFile, sim.URL, gw.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 10})
	// The burst series exist once a pair had a burst.
	if code, body := f.post("/burst?target=sim&module=short&probes=1", "", nil); code != http.StatusAccepted {
		t.Fatalf("POST /burst: %d %s", code, body)
	}

	// A failure or skip reason's series appears with its first occurrence
	// (prober TestReasonsAppearAtZeroFirst), which a healthy run may not have.
	lazy := []string{"vllm_probe_failures_total", "vllm_probe_skipped_total"}
	reg := f.d.Registry()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = exportedNames(t, reg)
		for _, n := range lazy {
			if !slices.Contains(got, n) {
				got = append(got, n)
			}
		}
		slices.Sort(got)
		if slices.Equal(got, documented) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if missing, extra := diff(documented, got), diff(got, documented); len(missing)+len(extra) > 0 {
		t.Errorf("exported vllm_ metric names differ from docs/metrics.md's tables\n"+
			"documented but not exported (after 30s of probes and scrapes): %v\n"+
			"exported but not documented: %v", missing, extra)
	}
	checkLabelsReserved(t, reg, "preset", "fleet")
	checkExpositionCached(t, f)
	// The cache splits the series of targets gathered together by their
	// target label: every component's series of a target carry its name.
	if cache, _ := f.d.Exposition(); cache != nil {
		if err := cache.CheckTargetLabels(); err != nil {
			t.Error(err)
		}
	}
	f.stop()
}

// checkLabelsReserved walks every series reg exports that carries a target's
// labels (a target label) and fails for a label name of it that
// config.ReservedLabels does not hold (static, the configured target labels,
// excepted): a target label of that name would collide with the series' own,
// so each must be refused at load and dropped from discovered targets. A
// label a new series gains without being reserved fails here. The vantage
// label, which the daemon adds to every series, must be reserved too.
func checkLabelsReserved(t *testing.T, reg prometheus.Gatherer, static ...string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	missing := map[string][]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if !slices.ContainsFunc(m.GetLabel(), func(lp *dto.LabelPair) bool { return lp.GetName() == "target" }) {
				continue
			}
			for _, lp := range m.GetLabel() {
				n := lp.GetName()
				if !slices.Contains(config.ReservedLabels, n) && !slices.Contains(static, n) && !slices.Contains(missing[n], mf.GetName()) {
					missing[n] = append(missing[n], mf.GetName())
				}
			}
		}
	}
	if !slices.Contains(config.ReservedLabels, VantageLabel) {
		missing[VantageLabel] = []string{"every series, with a vantage"}
	}
	for _, n := range slices.Sorted(maps.Keys(missing)) {
		t.Errorf("label %q of %v is not in config.ReservedLabels: a target label of that name would collide with it", n, missing[n])
	}
}

// A target with a baseline: the baseline's points are exported as read from
// the file, the regression ratios and expected values appear once probes and
// scrapes ran, and the collector's throughput headroom uses the baseline's
// saturation. A baseline file that no longer loads fails the reload and keeps
// the running configuration.
func TestBaselineRegression(t *testing.T) {
	sim := startPlainSim(t, func(c *simulator.Config) {
		c.TTFT, c.ITL = 10*time.Millisecond, 2*time.Millisecond
	})
	dir := t.TempDir()
	baselineFile := benchBaseline(t, sim.URL, dir, "simbase")
	bf, err := baseline.ReadFile(context.Background(), baselineFile)
	if err != nil {
		t.Fatal(err)
	}
	saturation := bf.Baselines[0].SaturationOutputThroughput()

	f := &fixture{t: t, path: filepath.Join(dir, "vllm_prober.yml")}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 200ms, scrape_interval: 300ms, scrape_timeout: 250ms, rate_window: 1500ms, burst: {token_budget_per_hour: 100000}}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 8}
baselines: [{name: simbase, file: %s}]
targets:
  - {name: sim, url: %q, baseline: simbase}
`, filepath.Base(baselineFile), sim.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 10})
	reg := f.d.Registry()

	if v, ok := sample(t, reg, "vllm_baseline_saturation_output_tokens_per_second", map[string]string{"baseline": "simbase"}); !ok || v != saturation || v <= 0 {
		t.Errorf("vllm_baseline_saturation_output_tokens_per_second = %v (%v), want the file's %v", v, ok, saturation)
	}
	for i, p := range bf.Baselines[0].Points {
		kind, load := p.LoadKey()
		lv := map[string]string{"baseline": "simbase", "load_type": kind, "load": baseline.Load(load).String()}
		if v, ok := sample(t, reg, "vllm_baseline_output_throughput_tokens_per_second", lv); !ok || v != *p.OutputThroughput {
			t.Errorf("point %d %v: output throughput = %v (%v), want the file's %v", i, lv, v, ok, *p.OutputThroughput)
		}
		lv["metric"], lv["stat"] = "tpot", "mean"
		if v, ok := sample(t, reg, "vllm_baseline_latency_seconds", lv); !ok || v != *p.TPOT.Mean {
			t.Errorf("point %d %v: TPOT mean = %v (%v), want the file's %v", i, lv, v, ok, *p.TPOT.Mean)
		}
	}

	waitFor(t, 30*time.Second, "regression ratios, expected values and the throughput headroom", func() bool {
		for _, s := range []struct {
			name   string
			labels map[string]string
		}{
			{"vllm_probe_regression_ratio", map[string]string{"target": "sim", "module": "short", "baseline": "simbase", "metric": "tpot"}},
			{"vllm_probe_regression_ratio", map[string]string{"target": "sim", "module": "short", "baseline": "simbase", "metric": "output_throughput"}},
			{"vllm_probe_expected_time_per_output_token_seconds", map[string]string{"target": "sim", "module": "short"}},
			{"vllm_server_expected_generation_tokens_per_second", map[string]string{"target": "sim"}},
			{"vllm_server_headroom_ratio", map[string]string{"target": "sim", "resource": "throughput"}},
		} {
			if _, ok := sample(t, reg, s.name, s.labels); !ok {
				return false
			}
		}
		return true
	})
	if v, _ := sample(t, reg, "vllm_probe_regression_ratio", map[string]string{"target": "sim", "metric": "tpot"}); !(v > 0) {
		t.Errorf("TPOT regression ratio = %v, want a positive ratio", v)
	}
	// The probes' completions and the scrapes' arrivals compute the joins,
	// with nothing gathering /metrics meanwhile (compare.Options.Pushed).
	before := f.d.cmp.Computations()
	waitFor(t, 10*time.Second, "joins computed by probes and scrapes alone", func() bool {
		return f.d.cmp.Computations() > before
	})

	// A broken baseline file: the reload fails and nothing changes.
	running := f.d.Running()
	writeConfig(t, baselineFile, "version: 1\nbaselines: [{name: simbase, points: [")
	err = f.d.Reload()
	wantPrefix := fmt.Sprintf("error applying config file %q: baselines: baseline \"simbase\": ", f.path)
	if err == nil || !strings.HasPrefix(err.Error(), wantPrefix) {
		t.Errorf("Reload with a broken baseline file = %v, want an error starting %q", err, wantPrefix)
	}
	if f.d.Running() != running {
		t.Error("a failed reload replaced the running configuration")
	}
	if v, _ := sample(t, reg, "vllm_prober_config_last_reload_successful", nil); v != 0 {
		t.Errorf("vllm_prober_config_last_reload_successful = %v after a failed reload, want 0", v)
	}
	if v, ok := sample(t, reg, "vllm_baseline_saturation_output_tokens_per_second", map[string]string{"baseline": "simbase"}); !ok || v != saturation {
		t.Errorf("after the failed reload the saturation is %v (%v), want the old %v", v, ok, saturation)
	}
	f.stop()
}

// The demo's baseline (examples/baselines, benchmarked from a default
// vllm_sim) loads and exports its points.
func TestDemoBaselineLoads(t *testing.T) {
	file, err := filepath.Abs("../../examples/baselines/vllm-sim-default.yml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, path, fmt.Sprintf(`
modules: {m: {prober: completions, prompt: hi}}
baselines: [{name: vllm-sim-default, file: %s}]
targets: [{name: vllm-sim, url: "http://127.0.0.1:8000", baseline: vllm-sim-default}]
`, file))
	reg := prometheus.NewRegistry()
	if _, err := New(Options{ConfigFile: path, Registry: reg}, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := sample(t, reg, "vllm_baseline_saturation_output_tokens_per_second", map[string]string{"baseline": "vllm-sim-default"}); !ok || v < 1000 {
		t.Errorf("demo baseline saturation = %v (%v), want a default vllm_sim's (above 1000 tokens/s)", v, ok)
	}
	for _, load := range []string{"1", "4", "16", "32"} {
		lv := map[string]string{"baseline": "vllm-sim-default", "load_type": "concurrency", "load": load, "metric": "tpot", "stat": "mean"}
		// vllm_sim's defaults: itl 10ms, +2 % per additional running request.
		if v, ok := sample(t, reg, "vllm_baseline_latency_seconds", lv); !ok || v < 0.009 || v > 0.02 {
			t.Errorf("demo baseline TPOT at concurrency %s = %v (%v), want vllm_sim's 10 ms to 17 ms", load, v, ok)
		}
	}
}
