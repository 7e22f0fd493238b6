package prober

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestScrapeOnlyTargetNeverProbes: a target with `modules: none` (or
// `probe: false`) next to a probed one gets no request at all from the
// prober (no probe, no /health or /v1/models check) and no health series,
// while the other target's probes run. A reload that makes a checked target
// scrape-only drops its health series.
func TestScrapeOnlyTargetNeverProbes(t *testing.T) {
	_, probed := newFake(t, "served")
	var mu sync.Mutex
	hits := map[string]int{}
	scrapeOnly := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(scrapeOnly.Close)
	cfg := loadConfig(t, `
global: {probe_interval: 30ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
  chat: {prober: chat, messages: [{role: user, content: hi}], max_tokens: 5}
targets:
  - {name: probed, url: `+probed.URL+`, model: served}
  - {name: metrics-only, url: `+scrapeOnly.URL+`, modules: none}
  - {name: metrics-only-2, url: `+scrapeOnly.URL+`, probe: false}
`)
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	stop := running(t, m)
	waitFor(t, "probes of the probed target", func() bool {
		st, ok := m.Stats("probed", "short")
		return ok && st.Probes >= 3
	})
	time.Sleep(100 * time.Millisecond) // a few more probe intervals
	stop()
	for _, name := range []string{"metrics-only", "metrics-only-2"} {
		for _, mod := range []string{"short", "chat"} {
			if st, ok := m.Stats(name, mod); ok && st.Probes > 0 {
				t.Errorf("%s/%s: %d probes of a scrape-only target", name, mod, st.Probes)
			}
		}
	}
	mu.Lock()
	if len(hits) > 0 {
		t.Errorf("the prober sent the scrape-only targets requests: %v", hits)
	}
	mu.Unlock()
	for _, name := range []string{"metrics-only", "metrics-only-2"} {
		for _, v := range []family{m.testMetrics().healthUp, m.testMetrics().modelsUp} {
			if v.has(name, "") {
				t.Errorf("%s has a health series", name)
			}
		}
		ts, ok := m.TargetStatus(name)
		if !ok || !ts.ScrapeOnly || ts.Checked {
			t.Errorf("%s: status %+v, want scrape-only and unchecked", name, ts)
		}
	}

	// The probed target becomes scrape-only: its checks stop and its
	// health series go.
	if _, ok := m.TargetStatus("probed"); !ok {
		t.Fatal("no status of the probed target")
	}
	cfg2 := loadConfig(t, `
global: {probe_interval: 30ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: probed, url: `+probed.URL+`, model: served, probe: false}
`)
	if err := m.Apply(cfg2); err != nil {
		t.Fatal(err)
	}
	if m.testMetrics().healthUp.has("probed", "served") {
		t.Error("a target made scrape-only kept its vllm_probe_health_up")
	}
	if ts, _ := m.TargetStatus("probed"); !ts.ScrapeOnly || ts.Checked {
		t.Errorf("probed after the reload: %+v, want scrape-only and unchecked", ts)
	}
}
