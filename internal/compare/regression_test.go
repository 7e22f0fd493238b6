package compare

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober"
)

// fakeProbes and fakeServer are stand-ins with fixed values.
type fakeProbes struct {
	mu     sync.Mutex
	means  map[string]prober.Means // "target/module"
	models map[string]string
	since  time.Time
}

func (f *fakeProbes) Window(target, module string) ProbeWindow {
	return fakeWindow{f, target + "/" + module}
}

type fakeWindow struct {
	f   *fakeProbes
	key string
}

// Means returns the pair's fixed means whatever since: every probe has
// a TPOT, one gap and, when Load is set, a load.
func (w fakeWindow) Means(since time.Time) prober.Means {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.f.since = since
	if m, ok := w.f.means[w.key]; ok {
		m.NTPOT, m.NITL = m.N, m.N
		if m.Load > 0 {
			m.NLoad = m.N
		}
		return m
	}
	return prober.Means{TTFT: math.NaN(), TPOT: math.NaN(), ITL: math.NaN(), E2E: math.NaN()}
}

func (f *fakeProbes) Model(target string) string { return f.models[target] }

// MeanTTFT is the target's first pair's fixed mean TTFT, asked since since.
func (f *fakeProbes) MeanTTFT(target string, since time.Time) (float64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.since = since
	for key, m := range f.means {
		if strings.HasPrefix(key, target+"/") {
			return m.TTFT, m.N
		}
	}
	return 0, 0
}

type fakeServer struct {
	running, waiting float64
	loadOK           bool
	stream           float64 // output tokens per second of one request
	streamOK         bool
	views            map[string]collector.View
}

func (f *fakeServer) Load(string) (float64, float64, bool) { return f.running, f.waiting, f.loadOK }
func (f *fakeServer) View(target string) (collector.View, bool) {
	v, ok := f.views[target]
	return v, ok
}
func (f *fakeServer) StreamOutputTokensPerSecond(string) (float64, bool) {
	return f.stream, f.streamOK
}

func loadConfig(t testing.TB, text string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(text), "testdata")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const cfgText = `
global: {probe_interval: 10s, rate_window: 1m}
modules:
  m1: {prober: completions, prompt: hi}
  m2: {prober: chat, messages: [{role: user, content: hi}]}
baselines:
  - {name: llama, file: llama.yaml}
  - {name: a, file: two.yaml}
targets:
  - {name: t1, url: "http://127.0.0.1:1", model: configured, baseline: llama, labels: {preset: h100}}
  - {name: t2, url: "http://127.0.0.1:2", labels: {zone: eu}}
`

// The baseline curve has points at concurrency 1 and 5; the live load is
// running 1 + waiting 1 + the probe = 3, half way: every expected value is the
// mean of the two points (values chosen to be exact in binary).
const wantExposition = `
# HELP vllm_baseline_latency_seconds Latency statistic of the baseline at one load point.
# TYPE vllm_baseline_latency_seconds gauge
vllm_baseline_latency_seconds{baseline="a",load="2",load_type="request_rate",metric="e2e",stat="mean"} 2
vllm_baseline_latency_seconds{baseline="a",load="2",load_type="request_rate",metric="ttft",stat="mean"} 0.2
vllm_baseline_latency_seconds{baseline="llama",load="1",load_type="concurrency",metric="e2e",stat="mean"} 1
vllm_baseline_latency_seconds{baseline="llama",load="1",load_type="concurrency",metric="itl",stat="mean"} 0.015625
vllm_baseline_latency_seconds{baseline="llama",load="1",load_type="concurrency",metric="tpot",stat="mean"} 0.015625
vllm_baseline_latency_seconds{baseline="llama",load="1",load_type="concurrency",metric="tpot",stat="median"} 0.0078125
vllm_baseline_latency_seconds{baseline="llama",load="1",load_type="concurrency",metric="tpot",stat="p99"} 0.03125
vllm_baseline_latency_seconds{baseline="llama",load="1",load_type="concurrency",metric="ttft",stat="mean"} 0.125
vllm_baseline_latency_seconds{baseline="llama",load="1",load_type="concurrency",metric="ttft",stat="median"} 0.0625
vllm_baseline_latency_seconds{baseline="llama",load="1",load_type="concurrency",metric="ttft",stat="p99"} 0.5
vllm_baseline_latency_seconds{baseline="llama",load="5",load_type="concurrency",metric="e2e",stat="mean"} 2
vllm_baseline_latency_seconds{baseline="llama",load="5",load_type="concurrency",metric="itl",stat="mean"} 0.03125
vllm_baseline_latency_seconds{baseline="llama",load="5",load_type="concurrency",metric="tpot",stat="mean"} 0.03125
vllm_baseline_latency_seconds{baseline="llama",load="5",load_type="concurrency",metric="ttft",stat="mean"} 0.375
# HELP vllm_baseline_output_throughput_tokens_per_second Output token throughput of the baseline at one load point.
# TYPE vllm_baseline_output_throughput_tokens_per_second gauge
vllm_baseline_output_throughput_tokens_per_second{baseline="a",load="2",load_type="request_rate"} 90
vllm_baseline_output_throughput_tokens_per_second{baseline="llama",load="1",load_type="concurrency"} 128
vllm_baseline_output_throughput_tokens_per_second{baseline="llama",load="5",load_type="concurrency"} 384
# HELP vllm_baseline_request_throughput_requests_per_second Request throughput of the baseline at one load point.
# TYPE vllm_baseline_request_throughput_requests_per_second gauge
vllm_baseline_request_throughput_requests_per_second{baseline="a",load="2",load_type="request_rate"} 1.5
vllm_baseline_request_throughput_requests_per_second{baseline="llama",load="1",load_type="concurrency"} 2
vllm_baseline_request_throughput_requests_per_second{baseline="llama",load="5",load_type="concurrency"} 4
# HELP vllm_baseline_saturation_output_tokens_per_second Output token throughput at which the baseline saturates (its largest).
# TYPE vllm_baseline_saturation_output_tokens_per_second gauge
vllm_baseline_saturation_output_tokens_per_second{baseline="a"} 90
vllm_baseline_saturation_output_tokens_per_second{baseline="llama"} 384
# HELP vllm_probe_expected_time_per_output_token_seconds Mean time per output token the baseline predicts at the live load (running + waiting + 1).
# TYPE vllm_probe_expected_time_per_output_token_seconds gauge
vllm_probe_expected_time_per_output_token_seconds{baseline="llama",model="served",module="m1",preset="h100",target="t1",zone=""} 0.0234375
vllm_probe_expected_time_per_output_token_seconds{baseline="llama",model="served",module="m2",preset="h100",target="t1",zone=""} 0.0234375
# HELP vllm_probe_expected_time_to_first_token_seconds Mean time to first token the baseline predicts at the live load (running + waiting + 1).
# TYPE vllm_probe_expected_time_to_first_token_seconds gauge
vllm_probe_expected_time_to_first_token_seconds{baseline="llama",model="served",module="m1",preset="h100",target="t1",zone=""} 0.25
vllm_probe_expected_time_to_first_token_seconds{baseline="llama",model="served",module="m2",preset="h100",target="t1",zone=""} 0.25
# HELP vllm_probe_regression_ratio Live probe latency / the baseline's expectation at the live load (E2E scaled to the probes' output length), or for output_throughput the expected / live output tokens per second of one request; above 1 is worse than the baseline.
# TYPE vllm_probe_regression_ratio gauge
vllm_probe_regression_ratio{baseline="llama",metric="e2e",model="served",module="m1",preset="h100",target="t1",zone=""} 0.75
vllm_probe_regression_ratio{baseline="llama",metric="itl",model="served",module="m1",preset="h100",target="t1",zone=""} 2
vllm_probe_regression_ratio{baseline="llama",metric="output_throughput",model="served",module="m1",preset="h100",target="t1",zone=""} 0.5
vllm_probe_regression_ratio{baseline="llama",metric="output_throughput",model="served",module="m2",preset="h100",target="t1",zone=""} 0.5
vllm_probe_regression_ratio{baseline="llama",metric="tpot",model="served",module="m1",preset="h100",target="t1",zone=""} 1
vllm_probe_regression_ratio{baseline="llama",metric="ttft",model="served",module="m1",preset="h100",target="t1",zone=""} 2
# HELP vllm_server_expected_generation_tokens_per_second Output token throughput the baseline predicts at the live load (running + waiting + 1).
# TYPE vllm_server_expected_generation_tokens_per_second gauge
vllm_server_expected_generation_tokens_per_second{baseline="llama",model="served",preset="h100",target="t1",zone=""} 256
`

func TestCollectorExportsContractSeries(t *testing.T) {
	probes := &fakeProbes{
		means: map[string]prober.Means{
			// TTFT twice, TPOT as, ITL twice the expected values, E2E 0.75 of
			// the baseline's TTFT + TPOT × (33 − 1) = 1 s; m2 has no probe yet.
			"t1/m1": {TTFT: 0.5, TPOT: 0.0234375, ITL: 0.046875, E2E: 0.75, OutputTokens: 33, N: 3},
			"t1/m2": {TTFT: math.NaN(), TPOT: math.NaN(), ITL: math.NaN(), E2E: math.NaN()},
		},
		models: map[string]string{"t1": "served"},
	}
	// Expected per request: 256 tok/s at a load of 3 = 256/3 tok/s; live twice that.
	server := &fakeServer{running: 1, waiting: 1, loadOK: true, stream: 2 * (256.0 / 3), streamOK: true}
	reg := prometheus.NewRegistry()
	c := New(Options{Registerer: reg, Probes: probes, Server: server})
	now := time.Unix(1700000000, 0)
	c.now = func() time.Time { return now }
	if err := c.Apply(loadConfig(t, cfgText)); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantExposition)); err != nil {
		t.Error(err)
	}
	// The probe window defaults to max(rate_window, 3 probe intervals).
	if want := now.Add(-time.Minute); !probes.since.Equal(want) {
		t.Errorf("probes asked since %v, want %v", probes.since, want)
	}
	fixed := New(Options{Probes: probes, Server: server, Window: 5 * time.Second})
	fixed.now = c.now
	if err := fixed.Apply(loadConfig(t, cfgText)); err != nil {
		t.Fatal(err)
	}
	testutil.CollectAndCount(fixed)
	if want := now.Add(-5 * time.Second); !probes.since.Equal(want) {
		t.Errorf("with Options.Window probes asked since %v, want %v", probes.since, want)
	}
	if v, ok := c.state.saturation("t1"); !ok || v != 384 {
		t.Errorf("saturation(t1) = %v, %v; want 384", v, ok)
	}
	if _, ok := c.state.saturation("t2"); ok {
		t.Error("t2 has no baseline but a saturation throughput")
	}

	// Without a load from the collector there is nothing to compare at.
	server.loadOK = false
	n, err := testutil.GatherAndCount(reg, "vllm_probe_regression_ratio", "vllm_server_expected_generation_tokens_per_second")
	if err != nil || n != 0 {
		t.Errorf("without load: %d per-target series (%v), want none", n, err)
	}
	// The model falls back to the configured one.
	server.loadOK = true
	probes.models = nil
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vllm_server_expected_generation_tokens_per_second Output token throughput the baseline predicts at the live load (running + waiting + 1).
# TYPE vllm_server_expected_generation_tokens_per_second gauge
vllm_server_expected_generation_tokens_per_second{baseline="llama",model="configured",preset="h100",target="t1",zone=""} 256
`), "vllm_server_expected_generation_tokens_per_second"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestApplyErrorsKeepThePreviousConfig(t *testing.T) {
	c := New(Options{})
	if err := c.Apply(loadConfig(t, cfgText)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		baselines, want string
	}{
		{"[{name: x, file: missing.yaml}]", `baseline "x": reading baseline input: open ` + filepath.Join("testdata", "missing.yaml") + `: no such file or directory`},
		{"[{name: x, file: two.yaml}]", `baseline "x": ` + filepath.Join("testdata", "two.yaml") + ` holds 2 baselines ([a b]) and none is named "x"`},
		{"[{name: x, file: cfg_not_baseline.yaml}]", `baseline "x": ` + filepath.Join("testdata", "cfg_not_baseline.yaml") + `: decoding baseline YAML: yaml: unmarshal errors:` + "\n" + `  line 1: field global not found`},
	} {
		cfg := loadConfig(t, strings.Replace(`
modules: {m: {prober: completions, prompt: hi}}
baselines: BASELINES
targets: [{name: t1, url: "http://127.0.0.1:1", baseline: x}]
`, "BASELINES", tc.baselines, 1))
		err := c.Apply(cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Apply: %v\nwant %s", err, tc.want)
		}
		if v, ok := c.state.saturation("t1"); !ok || v != 384 {
			t.Errorf("after a failed Apply the old baseline is gone: %v %v", v, ok)
		}
	}
	// The only baseline of a file is used whatever its name; "b" picks its namesake.
	cfg := loadConfig(t, `
modules: {m: {prober: completions, prompt: hi}}
baselines: [{name: b, file: two.yaml}, {name: other, file: llama.yaml}]
targets: [{name: t1, url: "http://127.0.0.1:1", baseline: b}, {name: t2, url: "http://127.0.0.1:2", baseline: other}]
`)
	if err := c.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.state.saturation("t1"); v != 170 {
		t.Errorf("t1 saturation %v, want b's 170", v)
	}
	if v, _ := c.state.saturation("t2"); v != 384 {
		t.Errorf("t2 saturation %v, want llama's 384", v)
	}
}

type fakeStats map[string]prober.PairStats

func (f fakeStats) Stats(target, module string) (prober.PairStats, bool) {
	s, ok := f[target+"/"+module]
	return s, ok
}
func (f fakeStats) Model(string) string                       { return "m" }
func (f fakeStats) MeanTTFT(string, time.Time) (float64, int) { return 0, 0 }

// TestFromProberMeans checks the adapter; the means themselves are the
// prober's (prober/stats_test.go).
func TestFromProberMeans(t *testing.T) {
	src := FromProber(fakeStats{"t/m": {Target: "t", Module: "m"}})
	for _, mod := range []string{"m", "other"} {
		if none := src.Window("t", mod).Means(time.Time{}); none.N != 0 || !math.IsNaN(none.TTFT) || !math.IsNaN(none.Load) {
			t.Errorf("%s without probes: %+v", mod, none)
		}
	}
	if src.Model("t") != "m" {
		t.Error("Model not passed through")
	}
}

// TestSetTargetsReadsNoFile: discovery refreshes (SetTargets) use the
// baselines ApplyConfig loaded; the files are read once per configuration.
func TestSetTargetsReadsNoFile(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "llama.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "llama.yaml"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]byte(`
modules: {m: {prober: completions, prompt: hi}}
baselines: [{name: llama, file: llama.yaml}]
targets: [{name: t1, url: "http://127.0.0.1:1", baseline: llama}]
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Options{})
	if err := c.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "llama.yaml")); err != nil {
		t.Fatal(err)
	}
	refreshed := *cfg
	refreshed.Targets = append(slices.Clone(cfg.Targets), config.Target{Name: "t2", URL: "http://127.0.0.1:2", Baseline: "llama", Modules: []string{"m"}})
	if err := c.SetTargets(&refreshed); err != nil {
		t.Fatalf("SetTargets read the baseline file again: %v", err)
	}
	if v, ok := c.state.saturation("t2"); !ok || v != 384 {
		t.Errorf("discovered t2: saturation %v %v", v, ok)
	}
	refreshed.Targets = append(refreshed.Targets, config.Target{Name: "t3", URL: "http://127.0.0.1:3", Baseline: "nope"})
	if err := c.SetTargets(&refreshed); err == nil {
		t.Error("a target of an unknown baseline was accepted")
	}
	if _, ok := c.state.saturation("t2"); !ok {
		t.Error("a failed SetTargets dropped the previous targets")
	}
}
