package compare

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/prober"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// collectOnce returns the per-target series of one collection, written, by
// their label pairs' text.
func collectOnce(t testing.TB, c *Collector) map[string]*dto.Metric {
	t.Helper()
	ch := make(chan prometheus.Metric, 1024)
	c.Collect(ch)
	close(ch)
	out := map[string]*dto.Metric{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		var key strings.Builder
		key.WriteString(m.Desc().String())
		for _, l := range d.GetLabel() {
			fmt.Fprintf(&key, ",%s=%s", l.GetName(), l.GetValue())
		}
		out[key.String()] = &d
	}
	return out
}

// TestSeriesLabelsBuiltOnce: the labels of the regression series are built
// once per target (and model), not at every scrape; a change of the resolved
// model, or SetTargets, builds them again.
func TestSeriesLabelsBuiltOnce(t *testing.T) {
	probes := &fakeProbes{
		means:  map[string]prober.Means{"t1/m1": {TTFT: 0.5, TPOT: 0.0234375, ITL: 0.046875, E2E: 0.75, OutputTokens: 33, N: 3}},
		models: map[string]string{"t1": "served"},
	}
	server := &fakeServer{running: 1, waiting: 1, loadOK: true, stream: 100, streamOK: true}
	c := New(Options{Probes: probes, Server: server})
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	cfg := loadConfig(t, cfgText)
	if err := c.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	first, second := collectOnce(t, c), collectOnce(t, c)
	if len(first) == 0 || len(first) != len(second) {
		t.Fatalf("%d then %d series", len(first), len(second))
	}
	perTarget := 0
	for k, m := range first {
		m2, ok := second[k]
		if !ok {
			t.Fatalf("series %s gone at the second scrape", k)
		}
		if m.Label[0] != m2.Label[0] {
			t.Errorf("%s: label pairs built again at the second scrape", k)
		}
		if strings.Contains(k, "target=t1") {
			perTarget++
		}
	}
	if perTarget < 8 {
		t.Fatalf("%d series of t1, want the 8 of m1 and m2 at least", perTarget)
	}
	// Another resolved model: new series, with the new label value.
	probes.mu.Lock()
	probes.models = map[string]string{"t1": "renamed"}
	probes.mu.Unlock()
	for k := range collectOnce(t, c) {
		if strings.Contains(k, "target=t1") && !strings.Contains(k, "model=renamed") {
			t.Errorf("after the model changed: %s", k)
		}
	}
	// SetTargets starts afresh.
	probes.mu.Lock()
	probes.models = map[string]string{"t1": "served"}
	probes.mu.Unlock()
	if err := c.SetTargets(cfg); err != nil {
		t.Fatal(err)
	}
	for k, m := range collectOnce(t, c) {
		if strings.Contains(k, "target=t1") && m.Label[0] == first[k].Label[0] {
			t.Errorf("%s: labels of the previous targets kept after SetTargets", k)
		}
	}
}

// BenchmarkCollect is one collection of the regression series of 1,000
// baselined targets of one module: allocs/op ÷ 1,000 is what a scrape costs
// per target.
func BenchmarkCollect(b *testing.B) {
	const n = 1000
	var cfg strings.Builder
	cfg.WriteString("global: {probe_interval: 10s, rate_window: 1m}\nmodules: {m1: {prober: completions, prompt: hi}}\nbaselines: [{name: llama, file: llama.yaml}]\ntargets:\n")
	probes := &fakeProbes{means: map[string]prober.Means{}, models: map[string]string{}}
	for i := range n {
		name := fmt.Sprintf("t%04d", i)
		fmt.Fprintf(&cfg, "  - {name: %s, url: \"http://127.0.0.1:%d\", baseline: llama}\n", name, 10000+i)
		probes.means[name+"/m1"] = prober.Means{TTFT: 0.5, TPOT: 0.0234375, ITL: 0.046875, E2E: 0.75, OutputTokens: 33, Load: 3, N: 3}
		probes.models[name] = "served"
	}
	c := New(Options{Probes: probes, Server: &fakeServer{running: 1, waiting: 1, loadOK: true, stream: 100, streamOK: true}})
	if err := c.Apply(loadConfig(b, cfg.String())); err != nil {
		b.Fatal(err)
	}
	ch := make(chan prometheus.Metric, 16*n)
	b.ReportAllocs()
	for b.Loop() {
		c.Collect(ch)
		for len(ch) > 0 {
			<-ch
		}
	}
}
