package collector

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/safemetric"
)

// TestCollisionNeverPanics: a target label that collides with a label of the
// collector's own series (engine, of vllm_server_info and
// vllm_server_engine_recognized), which the configuration and discovery
// refuse but a future series could still meet, costs those series only: the
// collection does not panic (it did, inside the vantage's wrapping
// registerer, taking the process down), the other series of every target are
// there, and the error is counted.
func TestCollisionNeverPanics(t *testing.T) {
	a, b := newFakeVLLM(t), newFakeVLLM(t)
	for _, srv := range []*fakeVLLM{a, b} {
		srv.set(state{Running: 1, Prompt: 10, Gen: 10, Stop: 1, TTFT01: 1, TTFT05: 1, TTFTInf: 1, TTFTSum: 0.05})
	}
	reg := prometheus.NewRegistry()
	errs, err := safemetric.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(prometheus.WrapRegistererWith(prometheus.Labels{"vantage": "eu"}, reg), nil)
	opts.Errors = errs
	m := NewManager(opts)
	cfg := configFor(t, a.URL, "10s", 4)
	cfg.Targets[1].URL, cfg.Targets[1].ScrapeMetrics = b.URL, true
	cfg.Targets[0].Labels["engine"] = "x" // past the configuration's check
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		m.target(name).scrapeOnce(context.Background())
	}
	mfs, err := reg.Gather()
	if err != nil && !strings.Contains(err.Error(), "engine") {
		t.Errorf("gather: %v", err)
	}
	up := 0
	for _, mf := range mfs {
		if mf.GetName() == "vllm_server_up" {
			up = len(mf.GetMetric())
		}
	}
	// The counter is collected beside the collector, maybe before it
	// counted: read it once the collection is over.
	errors := 0.0
	if mfs, _ := reg.Gather(); mfs != nil {
		for _, mf := range mfs {
			if mf.GetName() == "vllm_prober_collect_errors_total" {
				errors = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
	}
	if up != 2 {
		t.Errorf("vllm_server_up has %d series, want both targets'", up)
	}
	if n := errors; n == 0 {
		t.Error("vllm_prober_collect_errors_total = 0, want the collisions counted")
	}
}
