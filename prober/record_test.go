package prober

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/prober/probe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The last success and the start of a run of failures survive the history's
// eviction (stats.go; TestPairStateOutlivesEviction); records are found by id while kept; the model resolution phase is
// named; the duration gauge covers failures.
func TestPairStateAcrossEviction(t *testing.T) {
	f, ts := newFake(t, "m1")
	cfg := loadConfig(t, `
modules:
  short: {prober: completions, prompt: "Hello", max_tokens: 5}
targets:
  - {name: fake, url: `+ts.URL+`, model: m1, modules: [short], probe_interval: 1h}
`)
	reg := prometheus.NewPedanticRegistry()
	opts := testOptions(reg, nil)
	opts.HistoryLimit = 2
	m := NewManager(opts)
	clock := time.Unix(1700000000, 0)
	m.now = func() time.Time { return clock }
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	p := m.pairs[pairKey{target: "fake", module: "short"}]
	run := func() *probe.Result {
		res := m.probe(context.Background(), m.snapshot(p), func() {})
		m.mu.Lock()
		m.record(p, res)
		m.mu.Unlock()
		clock = clock.Add(time.Minute)
		return res
	}
	okRes := run()
	if last, _ := p.hist.last(); last.ID != 1 || !okRes.Success {
		t.Fatalf("first probe: id %d success %v (%s)", last.ID, okRes.Success, okRes.Err)
	}
	successAt := clock.Add(-time.Minute)
	f.mode.Store("dead")
	run()
	for range 5 {
		run()
	}
	s, _ := m.Stats("fake", "short")
	if !s.LastSuccess.Equal(successAt) || !s.FailingSince.Equal(successAt.Add(time.Minute)) {
		t.Errorf("last success %v (want %v), failing since %v (want the end of the first failure %v)", s.LastSuccess, successAt, s.FailingSince, successAt.Add(time.Minute))
	}
	if lastFailure := clock.Add(-time.Minute); !s.LastFailure.Equal(lastFailure) {
		t.Errorf("last failure %v, want the end of the 7th probe %v", s.LastFailure, lastFailure)
	}
	if s.LastReason != string(probe.ReasonHTTP5xx) || s.LastFailureID != 7 || s.LastID != 7 || s.LastStatusCode != 500 || s.LastErr == "" {
		t.Errorf("summary %+v", s)
	}
	if s.Probes != 2 || s.Successes != 0 || s.HourProbes != 7 || s.HourSuccesses != 1 {
		t.Errorf("counts: history %d/%d, hour %d/%d", s.Successes, s.Probes, s.HourSuccesses, s.HourProbes)
	}
	if _, ok := m.Record("fake", "short", "", 1); ok {
		t.Error("record 1 still found after eviction")
	}
	r, ok := m.Record("fake", "short", "", 7)
	if !ok || r.Reason != probe.ReasonHTTP5xx || r.ID != 7 || r.Phase != probe.PhaseResponse {
		t.Errorf("record 7: %v %+v", ok, r)
	}
	want := float64(successAt.UnixNano()) / 1e9
	if got := testutil.ToFloat64(m.testMetrics().lastSuccess.WithLabelValues("fake", "short", "m1")); got != want {
		t.Errorf("%s = %v, want %v", metricLastSuccess, got, want)
	}
	f.mode.Store("ok")
	run()
	if s, _ := m.Stats("fake", "short"); !s.FailingSince.IsZero() || s.LastReason != "" || s.LastErr != "" || s.LastFailureID != 7 || s.LastFailure.IsZero() {
		t.Errorf("after a success: failing since %v, last reason %q, error %q, last failure %d at %v (want kept)", s.FailingSince, s.LastReason, s.LastErr, s.LastFailureID, s.LastFailure)
	}
	// Beyond an hour the minute counts drop out.
	clock = clock.Add(2 * time.Hour)
	if s, _ := m.Stats("fake", "short"); s.HourProbes != 0 {
		t.Errorf("hour probes after 2h idle = %d", s.HourProbes)
	}
}

func TestModelResolutionPhase(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"Unauthorized"}`)
	}))
	defer ts.Close()
	cfg := loadConfig(t, `
modules:
  short: {prober: completions, prompt: "Hello", max_tokens: 5}
targets:
  - {name: fake, url: `+ts.URL+`, modules: [short]}
`)
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	res := m.probe(context.Background(), m.snapshot(m.pairs[pairKey{target: "fake", module: "short"}]), func() {})
	if res.Phase != probe.PhaseModels || res.Request != "GET /v1/models" || res.Reason != probe.ReasonUnauthorized || !strings.Contains(res.ErrorBody, "Unauthorized") {
		t.Errorf("phase %q request %q reason %s body %q", res.Phase, res.Request, res.Reason, res.ErrorBody)
	}
}
