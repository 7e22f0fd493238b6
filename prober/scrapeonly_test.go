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
// `probe: false`) next to a probed one gets no probe, while the other
// target's probes run.
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
	m := NewManager(prometheus.NewRegistry(), nil)
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
	defer mu.Unlock()
	for req, n := range hits {
		if req == "POST /v1/completions" || req == "POST /v1/chat/completions" {
			t.Errorf("scrape-only target got %d × %s", n, req)
		}
	}
	t.Logf("requests to the scrape-only targets: %v", hits)
}
