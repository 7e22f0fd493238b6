package prober

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/prober/probe"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fakeVLLM serves /health, /v1/models and both streaming endpoints.
type fakeVLLM struct {
	model  string
	tokens int
	mode   atomic.Value // "ok" (default), "hang", "dead", "echo_auth"

	requests atomic.Int64
	release  chan struct{}
	mu       sync.Mutex
	bodies   []string
}

func newFake(t *testing.T, model string) (*fakeVLLM, *httptest.Server) {
	f := &fakeVLLM{model: model, tokens: 5, release: make(chan struct{})}
	f.mode.Store("ok")
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(f.release) }) // runs first: frees hung handlers
	return f, ts
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mode := f.mode.Load().(string)
	switch r.URL.Path {
	case "/health":
		if mode == "dead" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return
	case "/v1/models":
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"},{"id":"other"}]}`, f.model)
		return
	}
	f.requests.Add(1)
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(b))
	f.mu.Unlock()
	switch mode {
	case "hang":
		select {
		case <-r.Context().Done():
		case <-f.release:
		}
		return
	case "dead":
		w.WriteHeader(http.StatusInternalServerError)
		return
	case "echo_auth":
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"invalid key %s","type":"AuthenticationError","code":401}}`, r.Header.Get("Authorization"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range f.tokens {
		fmt.Fprintf(w, `data: {"choices":[{"index":0,"text":"t%d","delta":{"content":"t%d"}}]}`+"\n\n", i, i)
	}
	fmt.Fprintf(w, `data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":%d}}`+"\n\ndata: [DONE]\n\n", f.tokens)
}

func loadConfig(t *testing.T, yml string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(yml), "")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// running starts m.Run and returns a stop function that cancels it and waits.
func running(t *testing.T, m *Manager) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		m.Run(ctx)
		close(done)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return within 10s of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// TestManagerOneProbeGolden runs one full scheduled probe through real HTTP and
// compares the whole exposition with a golden file. Timings are pinned after the
// real measurement, as only they vary between runs.
func TestManagerOneProbeGolden(t *testing.T) {
	_, ts := newFake(t, "fake-model")
	cfg := loadConfig(t, `
global:
  probe_interval: 1h
  buckets: [0.01, 0.05, 0.1, 0.5]
  token_latency_buckets: [0.01, 0.0125, 0.015, 0.0175, 0.02]
modules:
  short:
    prober: completions
    prompt: "Hello"
    max_tokens: 5
targets:
  - name: fake
    url: `+ts.URL+`
    model: fake-model
    labels: {preset: H100X1}
`)
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, log.NewNopLogger()))
	m.now = func() time.Time { return time.Unix(1700000000, 0) }
	m.offset = func(pairKey, time.Duration) time.Duration { return 0 }
	m.run = func(ctx context.Context, spec *probe.Spec, c *http.Client, call probe.Call) probe.Result {
		res := spec.Run(ctx, c, call)
		if !res.Success {
			t.Errorf("probe failed: %s: %s", res.Reason, res.Err)
		}
		res.TTFT = 62500 * time.Microsecond
		res.TTFA = res.TTFT // completions: the first text is the answer
		res.ITLs = []time.Duration{15625 * time.Microsecond, 15625 * time.Microsecond, 15625 * time.Microsecond, 15625 * time.Microsecond}
		res.E2E = 125 * time.Millisecond
		res.TPOT = 15625 * time.Microsecond
		return res
	}
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	stop := running(t, m)
	waitFor(t, "one probe and one check", func() bool {
		st := m.Status()
		return st[0].Checked && st[0].Modules[0].Last != nil
	})
	stop()

	golden := "testdata/one_probe.prom"
	if *update {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(reg, f); err != nil {
		t.Error(err)
	}
}

func TestManagerNativeHistograms(t *testing.T) {
	_, ts := newFake(t, "fake-model")
	cfg := loadConfig(t, `
global:
  probe_interval: 1h
  native_histogram_bucket_factor: 1.1
modules:
  short: {prober: chat, messages: [{role: user, content: hi}], max_tokens: 5}
targets:
  - {name: fake, url: `+ts.URL+`}
`)
	reg := prometheus.NewRegistry()
	m := NewManager(testOptions(reg, nil))
	m.offset = func(pairKey, time.Duration) time.Duration { return 0 }
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	stop := running(t, m)
	waitFor(t, "a probe", func() bool { st := m.Status(); return st[0].Modules[0].Last != nil })
	stop()
	if last := m.Status()[0].Modules[0].Last; !last.Success {
		t.Fatalf("probe failed: %s %s", last.Reason, last.Err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metricTTFT {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.Schema == nil || len(h.GetPositiveSpan()) == 0 || len(h.GetBucket()) != len(config.DefaultBuckets) {
			t.Errorf("TTFT histogram lacks native or classic buckets: schema %v spans %d classic %d", h.Schema, len(h.GetPositiveSpan()), len(h.GetBucket()))
		}
		if got := labelValue(mf.GetMetric()[0], "model"); got != "fake-model" {
			t.Errorf("model label %q, want the first id of /v1/models", got)
		}
		return
	}
	t.Fatal("no TTFT histogram")
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestManagerNoPileUp: a target that hangs gets one probe in flight and every
// later tick is skipped as in_flight; cancelling Run aborts the hung probe and
// leaves no goroutine behind. Config refuses a timeout longer than the probe
// interval, but a probe's teardown can still run past its next tick: the
// guard must hold, so the test sets the long timeout past validation.
func TestManagerNoPileUp(t *testing.T) {
	f, ts := newFake(t, "m")
	f.mode.Store("hang")
	cfg := loadConfig(t, `
global:
  probe_interval: 40ms
  stall_timeout: 1m
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: slow, url: `+ts.URL+`, model: m}
`)
	cfg.Targets[0].ProbeTimeout = model.Duration(time.Minute)
	baseline := runtime.NumGoroutine()
	reg := prometheus.NewRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	stop := running(t, m)
	lv := []string{"slow", "short", "m"}
	mt := m.testMetrics()
	waitFor(t, "5 in_flight skips", func() bool {
		return counter(t, mt.skipped.WithLabelValues(append(lv, SkipInFlight)...)) >= 5
	})
	if got := counter(t, mt.attempts.WithLabelValues(lv...)); got != 1 {
		t.Errorf("attempts = %v, want 1 while the first probe hangs", got)
	}
	if got := f.requests.Load(); got != 1 {
		t.Errorf("the target received %d requests, want 1", got)
	}
	stop()
	// The hung probe was cancelled by shutdown: not a verdict on the target.
	if got := counter(t, mt.failures.WithLabelValues(append(lv, string(probe.ReasonTimeout))...)); got != 0 {
		t.Errorf("shutdown counted as a timeout failure")
	}
	ts.CloseClientConnections()
	waitFor(t, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= baseline })
}

// TestManagerTimeoutAndStall: a hung target fails as timeout when the probe
// timeout passes; the next probe starts afterwards.
func TestManagerTimeout(t *testing.T) {
	f, ts := newFake(t, "m")
	f.mode.Store("hang")
	cfg := loadConfig(t, `
global:
  probe_interval: 200ms
  probe_timeout: 150ms
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: slow, url: `+ts.URL+`, model: m}
`)
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	lv := []string{"slow", "short", "m"}
	mt := m.testMetrics()
	waitFor(t, "two timeouts", func() bool {
		return counter(t, mt.failures.WithLabelValues(append(lv, string(probe.ReasonTimeout))...)) >= 2
	})
	if got := counter(t, mt.success.WithLabelValues(lv...)); got != 0 {
		t.Errorf("success = %v", got)
	}
	last := m.Status()[0].Modules[0].Last
	if last.Reason != probe.ReasonTimeout || last.Err != "probe timed out before response headers" {
		t.Errorf("last = %s %q", last.Reason, last.Err)
	}
}

func TestManagerBudget(t *testing.T) {
	f, ts := newFake(t, "m")
	// Cost before the first probe: estimate(len("hi")/3+1+8 = 9) + 5 = 14; spent
	// after it: 7 prompt + 5 output = 12; next cost: 7+8+5 = 20; 12+20 > 30.
	cfg := loadConfig(t, `
global:
  probe_interval: 100ms
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: t, url: `+ts.URL+`, model: m, token_budget_per_hour: 30}
`)
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	lv := []string{"t", "short", "m"}
	mt := m.testMetrics()
	waitFor(t, "3 budget skips", func() bool {
		return counter(t, mt.skipped.WithLabelValues(append(lv, SkipBudget)...)) >= 3
	})
	if got := counter(t, mt.attempts.WithLabelValues(lv...)); got != 1 {
		t.Errorf("attempts = %v, want 1", got)
	}
	if got := f.requests.Load(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
	if p, o := counter(t, mt.tokens.WithLabelValues(append(lv, "prompt")...)), counter(t, mt.tokens.WithLabelValues(append(lv, "output")...)); p != 7 || o != 5 {
		t.Errorf("tokens prompt %v output %v, want 7 and 5", p, o)
	}
	// /probe has its own pool: max(30/10, cost 20) = 20 tokens, one probe.
	if _, _, err := m.ProbeNow(context.Background(), "t", "short"); err != nil {
		t.Errorf("first ProbeNow err = %v, want it run from the on-demand pool", err)
	}
	if _, _, err := m.ProbeNow(context.Background(), "t", "short"); !errors.Is(err, ErrOnDemandBudgetExceeded) || !errors.Is(err, ErrBudgetExceeded) {
		t.Errorf("second ProbeNow err = %v, want ErrOnDemandBudgetExceeded", err)
	}
	// An hour later the budget is free again.
	m.mu.Lock()
	m.now = func() time.Time { return time.Now().Add(time.Hour + time.Minute) }
	m.mu.Unlock()
	waitFor(t, "a second attempt", func() bool { return counter(t, mt.attempts.WithLabelValues(lv...)) >= 2 })
}

// TestManagerConcurrencyCap: with max_concurrent_probes 1, a hung probe of one
// target (in flight up to its 2s interval, its timeout) makes the other
// target's ticks skip as concurrency, and neither is queued.
func TestManagerConcurrencyCap(t *testing.T) {
	hung, tsHung := newFake(t, "m")
	hung.mode.Store("hang")
	_, tsFast := newFake(t, "m")
	cfg := loadConfig(t, `
global:
  max_concurrent_probes: 1
modules:
  a: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: hung, url: `+tsHung.URL+`, model: m, probe_interval: 2s}
  - {name: fast, url: `+tsFast.URL+`, model: m, probe_interval: 40ms}
`)
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	mt := m.testMetrics()
	waitFor(t, "the hung target's probe", func() bool { return hung.requests.Load() >= 1 })
	before := counter(t, mt.attempts.WithLabelValues("fast", "a", "m"))
	waitFor(t, "3 concurrency skips", func() bool {
		return counter(t, mt.skipped.WithLabelValues("fast", "a", "m", SkipConcurrency)) >= 3
	})
	if got := counter(t, mt.attempts.WithLabelValues("fast", "a", "m")); got != before {
		t.Errorf("fast attempts %v -> %v while the hung probe held the only slot", before, got)
	}
	if got := hung.requests.Load(); got != 1 {
		t.Errorf("hung target requests = %d, want 1", got)
	}
}

func TestManagerApply(t *testing.T) {
	_, tsA := newFake(t, "ma")
	_, tsB := newFake(t, "mb")
	cfgYAML := func(targets string) string {
		return `
global: {probe_interval: 40ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
` + targets
	}
	tA := "  - {name: a, url: " + tsA.URL + "}\n"
	tB := "  - {name: b, url: " + tsB.URL + ", labels: {zone: z1}}\n"
	reg := prometheus.NewRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(loadConfig(t, cfgYAML(tA))); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	histLen := func(target string) int {
		for _, s := range m.Status() {
			if s.Name == target {
				return len(s.Modules[0].History)
			}
		}
		return -1
	}
	waitFor(t, "2 probes of a", func() bool { return histLen("a") >= 2 })
	if got := m.Model("a"); got != "ma" {
		t.Errorf("Model(a) = %q, want ma (first id of /v1/models)", got)
	}

	// A render before the reload: the label pairs a's series keep between
	// renders must follow the label names the reload brings.
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}

	// Add b with a static label: the vectors are recreated with the zone label,
	// a keeps its history.
	before := histLen("a")
	if err := m.Apply(loadConfig(t, cfgYAML(tA+tB))); err != nil {
		t.Fatal(err)
	}
	if got := histLen("a"); got < before {
		t.Errorf("a's history shrank from %d to %d on reload", before, got)
	}
	waitFor(t, "a probe of b", func() bool { return histLen("b") >= 1 })
	if got := m.Model("b"); got != "mb" {
		t.Errorf("Model(b) = %q", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vllm_probe_success 1 if the last probe of the target and module succeeded, else 0.
# TYPE vllm_probe_success gauge
vllm_probe_success{model="ma",module="short",target="a",zone=""} 1
vllm_probe_success{model="mb",module="short",target="b",zone="z1"} 1
`), metricSuccess); err != nil {
		t.Error(err)
	}
	if secs, n := m.MeanTTFT("b", time.Now().Add(-time.Minute)); n < 1 || secs <= 0 {
		t.Errorf("MeanTTFT(b) = %v over %d probes", secs, n)
	}

	// Remove a: its series go, its probes stop.
	if err := m.Apply(loadConfig(t, cfgYAML(tB))); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			if labelValue(mm, "target") == "a" {
				t.Errorf("%s still has a series of removed target a", mf.GetName())
			}
		}
	}
	if st := m.Status(); len(st) != 1 || st[0].Name != "b" {
		t.Errorf("Status after removing a: %+v", st)
	}
	if m.Model("a") != "" {
		t.Error("Model(a) still known after removal")
	}
}

func TestManagerHealthAndModels(t *testing.T) {
	f, ts := newFake(t, "served")
	mt := checkedManager(t, `
global: {probe_interval: 30ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: ok, url: `+ts.URL+`, model: served}
  - {name: wrong, url: `+ts.URL+`, model: absent}
`)
	if h, mu := counter(t, mt.healthUp.WithLabelValues("ok", "served")), counter(t, mt.modelsUp.WithLabelValues("ok", "served")); h != 1 || mu != 1 {
		t.Errorf("ok: health_up %v models_up %v", h, mu)
	}
	if mu := counter(t, mt.modelsUp.WithLabelValues("wrong", "absent")); mu != 0 {
		t.Errorf("wrong: models_up %v, want 0 (model not listed)", mu)
	}
	f.mode.Store("dead")
	waitFor(t, "health_up 0", func() bool { return counter(t, mt.healthUp.WithLabelValues("ok", "served")) == 0 })
}

// checkedManager runs a Manager on the configuration yaml until every
// target has had its health and models check.
func checkedManager(t *testing.T, yaml string) testMetrics {
	t.Helper()
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(loadConfig(t, yaml)); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	waitFor(t, "checks", func() bool {
		for _, st := range m.Status() {
			if !st.Checked {
				return false
			}
		}
		return true
	})
	return m.testMetrics()
}

// TestSecretNeverLeaks probes the simulator with an API key from
// http_client_config, and a server that echoes the key back in its error.
func TestSecretNeverLeaks(t *testing.T) {
	const key = "sk-Very-Secret-Key-123"
	_, sim, _ := startSim(t, func(c *simulator.Config) { c.APIKey = key; c.TTFT, c.ITL = time.Millisecond, time.Millisecond })
	echo, echoTS := newFake(t, "m")
	echo.mode.Store("echo_auth")
	cfg := loadConfig(t, `
global: {probe_interval: 30ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 3}
targets:
  - name: sim
    url: `+sim.URL+`
    http_client_config: {authorization: {credentials: `+key+`}}
  - name: echo
    url: `+echoTS.URL+`
    model: m
    http_client_config: {authorization: {credentials: `+key+`}}
  - name: nokey
    url: `+sim.URL+`
    model: sim-model
`)
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := log.LoggerFunc(func(kv ...any) error {
		logMu.Lock()
		defer logMu.Unlock()
		return log.NewLogfmtLogger(&logs).Log(kv...)
	})
	m := NewManager(testOptions(reg, logger))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	stop := running(t, m)
	waitFor(t, "a result per target", func() bool {
		for _, s := range m.Status() {
			if s.Modules[0].Last == nil {
				return false
			}
		}
		return true
	})
	res, preg, err := m.ProbeNow(context.Background(), "echo", "short")
	if err != nil {
		t.Fatal(err)
	}
	stop()
	st := m.Status()
	if l := st[0].Modules[0].Last; !l.Success {
		t.Errorf("sim with key: %s %s", l.Reason, l.Err)
	}
	if l := st[1].Modules[0].Last; l.Reason != probe.ReasonUnauthorized || l.Err != "HTTP 401 AuthenticationError: invalid key <secret>" {
		t.Errorf("echo: %s %q", l.Reason, l.Err)
	}
	if l := st[2].Modules[0].Last; l.Reason != probe.ReasonUnauthorized {
		t.Errorf("nokey: %s %s", l.Reason, l.Err)
	}
	var text bytes.Buffer
	for _, g := range []prometheus.Gatherer{reg, preg} {
		mfs, err := g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			_, _ = expfmt.MetricFamilyToText(&text, mf)
		}
	}
	logMu.Lock()
	logged := logs.String()
	logMu.Unlock()
	for what, s := range map[string]string{
		"Status":   fmt.Sprintf("%+v", st),
		"ProbeNow": fmt.Sprintf("%+v", *res),
		"metrics":  text.String(),
		"logs":     logged,
	} {
		if strings.Contains(s, key) || strings.Contains(s, "Very-Secret") {
			t.Errorf("%s leaks the key", what)
		}
	}
}

func TestProbeNow(t *testing.T) {
	_, ts := newFake(t, "m")
	cfg := loadConfig(t, `
global: {probe_interval: 1h}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
  other: {prober: chat, messages: [{role: user, content: hi}], max_tokens: 5}
targets:
  - {name: t, url: `+ts.URL+`, modules: [short]}
`)
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if _, _, err := m.ProbeNow(context.Background(), "t", "short"); err == nil {
		t.Error("ProbeNow before Apply succeeded")
	}
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.ProbeNow(context.Background(), "nope", "short"); err == nil || err.Error() != `unknown target "nope"` {
		t.Errorf("unknown target: %v", err)
	}
	if _, _, err := m.ProbeNow(context.Background(), "t", "nope"); err == nil || err.Error() != `unknown module "nope"` {
		t.Errorf("unknown module: %v", err)
	}
	// Any module of the file may be probed on demand, like blackbox's /probe.
	res, reg, err := m.ProbeNow(context.Background(), "t", "other")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || m.Model("t") != "m" {
		t.Fatalf("probe: %s %s (model %q)", res.Reason, res.Err, m.Model("t"))
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vllm_probe_success 1 if the last probe of the target and module succeeded, else 0.
# TYPE vllm_probe_success gauge
vllm_probe_success 1
# HELP vllm_probe_tokens_total Tokens spent by probes, as reported by the server's usage (output tokens counted from events when it sent none).
# TYPE vllm_probe_tokens_total counter
vllm_probe_tokens_total{kind="output"} 5
vllm_probe_tokens_total{kind="prompt"} 7
`), metricSuccess, metricTokens); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, metricTTFT); n != 1 {
		t.Errorf("%d TTFT series", n)
	}
	if st := m.Status(); st[0].Modules[0].Last != nil {
		t.Error("ProbeNow result went into the scheduled history")
	}
}

func TestHistory(t *testing.T) {
	h := history{limit: 3}
	start := time.Unix(1000, 0)
	for i := range 10 {
		h.add(uint64(i+1), &probe.Result{Start: start.Add(time.Duration(i) * time.Second), Success: i != 1})
	}
	got := h.list()
	var secs []int64
	for _, r := range got {
		secs = append(secs, r.Start.Unix()-1000)
	}
	if fmt.Sprint(secs) != "[9 8 7 1]" {
		t.Errorf("history = %v, want the last 3 and the old failure, newest first", secs)
	}
}

// The history keeps headers packed; list and last give them back whole.
func TestHistoryHeaders(t *testing.T) {
	req := http.Header{"Authorization": {"<secret>"}, "X-Request-Id": {"vllm-prober-a-m-1"}, "Accept": {"text/event-stream"}}
	resp := http.Header{"Set-Cookie": {"a=1", "b=2"}, "X-Empty": {""}, "X-Odd": {"v: with colon"}, "X-Bad": {"nul\x00and\nnewline"}}
	h := history{limit: 2}
	in := &probe.Result{Start: time.Unix(1, 0), Success: true, RequestHeader: req, ResponseHeader: resp}
	h.add(1, in)
	h.add(2, &probe.Result{Start: time.Unix(2, 0), Success: false}) // no headers at all
	if in.RequestHeader == nil {
		t.Error("add changed the caller's result")
	}
	got := h.list()
	if len(got) != 2 {
		t.Fatalf("history holds %d results, want 2", len(got))
	}
	wantResp := http.Header{"Set-Cookie": {"a=1", "b=2"}, "X-Empty": {""}, "X-Odd": {"v: with colon"}, "X-Bad": {"nul\uFFFDand\uFFFDnewline"}}
	if old := got[1]; !reflect.DeepEqual(old.RequestHeader, req) || !reflect.DeepEqual(old.ResponseHeader, wantResp) {
		t.Errorf("headers after the history:\nrequest  %v\nresponse %v", old.RequestHeader, old.ResponseHeader)
	}
	if got[0].RequestHeader != nil || got[0].ResponseHeader != nil {
		t.Errorf("a result without headers came back with %v %v", got[0].RequestHeader, got[0].ResponseHeader)
	}
	last, ok := h.last()
	if !ok || last.Start != time.Unix(2, 0) || last.RequestHeader != nil {
		t.Errorf("last = %+v, %v", last, ok)
	}
}

func TestScrubResult(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/token"
	if err := os.WriteFile(file, []byte("file-secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, `
modules:
  short: {prober: completions, prompt: hi}
targets:
  - name: a
    url: http://127.0.0.1:1
    http_client_config: {authorization: {credentials_file: `+file+`}}
  - name: b
    url: http://127.0.0.1:1
    http_client_config: {basic_auth: {username: u, password: inline-password}}
`)
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	r := &probe.Result{Err: "HTTP 401: key file-secret-value rejected", ResponseHeader: http.Header{"X-Echo": {"inline-password"}}}
	r.Scrub(m.red)
	if r.Err != "HTTP 401: key <secret> rejected" || r.ResponseHeader.Get("X-Echo") != "<secret>" {
		t.Errorf("scrubbed: %q %v", r.Err, r.ResponseHeader)
	}
}

func BenchmarkPackHeaders(b *testing.B) {
	req := http.Header{"Authorization": {"<secret>"}, "X-Request-Id": {"vllm-prober-a-m-1"}, "Accept": {"text/event-stream"}, "Content-Type": {"application/json"}}
	resp := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}, "Cache-Control": {"no-cache"}, "Date": {"Mon, 23 Nov 2026 12:00:00 GMT"}, "X-Request-Id": {"vllm-prober-a-m-1"}}
	b.ReportAllocs()
	for b.Loop() {
		packHeaders(req, resp)
	}
}

// TestModelMatchesOllamaLatestTag: Ollama lists a model created as "tiny"
// as "tiny:latest" and answers requests for "tiny"; a target configured
// with "tiny" reads the model as up. Another tag is another model.
func TestModelMatchesOllamaLatestTag(t *testing.T) {
	_, ts := newFake(t, "tiny:latest")
	mt := checkedManager(t, `
global: {probe_interval: 1h}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: untagged, url: `+ts.URL+`, model: tiny}
  - {name: tagged, url: `+ts.URL+`, model: "tiny:latest"}
  - {name: other, url: `+ts.URL+`, model: "tiny:q4"}
`)
	for _, c := range []struct {
		target, model string
		want          float64
	}{{"untagged", "tiny", 1}, {"tagged", "tiny:latest", 1}, {"other", "tiny:q4", 0}} {
		if mu := counter(t, mt.modelsUp.WithLabelValues(c.target, c.model)); mu != c.want {
			t.Errorf("%s (model %q, listed tiny:latest): models_up %v, want %v", c.target, c.model, mu, c.want)
		}
	}
}

// TestOllamaHealthPath: Ollama serves no /health (404) but answers GET /
// with 200 "Ollama is running" (ollama/ollama server/routes.go). Without a
// health_path its health reads down while every probe succeeds, so that
// VLLMEndpointDown would fire for ever and VLLMEngineHung could never;
// with health_path: / it reads up, and down once the server stops
// answering.
func TestOllamaHealthPath(t *testing.T) {
	f, _ := newFake(t, "tiny:latest")
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/health":
			http.NotFound(w, r)
		case r.URL.Path == "/" && f.mode.Load() != "dead":
			_, _ = w.Write([]byte("Ollama is running"))
		case r.URL.Path == "/":
			w.WriteHeader(http.StatusBadGateway)
		default:
			f.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(ollama.Close)
	mt := checkedManager(t, `
global: {probe_interval: 30ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: default, url: `+ollama.URL+`, model: tiny}
  - {name: ollama, url: `+ollama.URL+`, model: tiny, health_path: /}
`)
	if h := counter(t, mt.healthUp.WithLabelValues("default", "tiny")); h != 0 {
		t.Errorf("without health_path: health_up %v, want 0 (/health is a 404)", h)
	}
	if h, mu := counter(t, mt.healthUp.WithLabelValues("ollama", "tiny")), counter(t, mt.modelsUp.WithLabelValues("ollama", "tiny")); h != 1 || mu != 1 {
		t.Errorf("health_path /: health_up %v models_up %v, want 1 and 1", h, mu)
	}
	f.mode.Store("dead")
	waitFor(t, "health_up 0", func() bool { return counter(t, mt.healthUp.WithLabelValues("ollama", "tiny")) == 0 })
}
