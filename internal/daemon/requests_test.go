package daemon

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// pathCounter counts the requests a handler serves, by path.
type pathCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *pathCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.URL.Path]++
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (c *pathCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// TestRequestsPerTarget counts the requests each kind of target receives
// from a daemon over ten minutes of simulated time (every interval divided
// by 100: probe_interval 30s is 300ms, scrape_interval 15s is 150ms,
// models_refresh_interval 5m is 3s; 6s of wall clock). A scraped target's
// health is its scrape (no GET /health); /v1/models is read on
// models_refresh_interval, not at every check; a target that is not scraped,
// or whose probes fail, asks /health at every check; a probe refused for its
// model has the next check read the list again. The old pattern (a /health
// and a /v1/models every probe_interval, whatever the scrape said) fails it. The figures are those
// of docs/performance.md's requests per target per minute.
func TestRequestsPerTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon for 6s")
	}
	kinds := []struct {
		name, keys string
		sim        func(*simulator.Config)
	}{
		{"scraped", ``, nil},
		{"unscraped", `scrape_metrics: false`, nil},
		{"scrapeonly", `probe: false`, nil},
		{"refused", `model: not-served, scrape_metrics: false`, nil},
		// Scraped, but its probes fail: /health decides whether it is up
		// (vLLM's /metrics answers while /health says its engine is dead).
		{"failing", ``, func(c *simulator.Config) {
			c.Fault, c.FaultRate, c.FaultStatus = simulator.FaultHTTPStatus, 1, 500
		}},
	}
	counters := map[string]*pathCounter{}
	targets := ""
	for _, k := range kinds {
		c := &pathCounter{n: map[string]int{}}
		counters[k.name] = c
		srv := startWrappedSim(t, k.sim, c.wrap)
		extra := ""
		if k.keys != "" {
			extra = ", " + k.keys
		}
		targets += fmt.Sprintf("  - {name: %s, url: %q%s}\n", k.name, srv.URL, extra)
	}
	f := &fixture{t: t}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, `
global:
  probe_interval: 300ms
  probe_timeout: 300ms
  scrape_interval: 150ms
  scrape_timeout: 150ms
  rate_window: 1s
  models_refresh_interval: 3s
modules:
  m: {prober: completions, prompt: hi, max_tokens: 2}
targets:
`+targets)
	f.start(Options{ConfigFile: f.path})
	const window = 6 * time.Second // ten simulated minutes
	start := func() map[string]map[string]int {
		out := map[string]map[string]int{}
		for name, c := range counters {
			out[name] = c.counts()
		}
		return out
	}
	// Past the first check and scrape, then count over the window.
	time.Sleep(time.Second)
	before := start()
	time.Sleep(window)
	after := start()
	_, metrics := f.get("/metrics")
	f.stop()
	for _, want := range []string{`vllm_probe_health_up{model="meta-llama/Llama-3.1-8B-Instruct",target="scraped"} 1`,
		`vllm_probe_health_up{model="meta-llama/Llama-3.1-8B-Instruct",target="failing"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	perMin := func(kind, path string) float64 {
		return float64(after[kind][path]-before[kind][path]) / 10 // ten simulated minutes
	}
	for _, k := range kinds {
		t.Logf("%-10s per simulated minute: probes %.1f, /metrics %.1f, /health %.1f, /v1/models %.1f",
			k.name, perMin(k.name, "/v1/completions"), perMin(k.name, "/metrics"), perMin(k.name, "/health"), perMin(k.name, "/v1/models"))
	}
	// At most, per simulated minute; the old pattern was 2 /health and 2
	// /v1/models. Bounds leave room for a loaded machine's late ticks.
	for _, c := range []struct {
		kind, path string
		min, max   float64
	}{
		{"scraped", "/v1/completions", 1, 2.5},
		{"scraped", "/metrics", 2, 4.5},
		{"scraped", "/health", 0, 0.2},
		{"scraped", "/v1/models", 0.1, 0.5},
		{"unscraped", "/v1/completions", 1, 2.5},
		{"unscraped", "/metrics", 0, 0},
		{"unscraped", "/health", 1, 2.5},
		{"unscraped", "/v1/models", 0.1, 0.5},
		{"scrapeonly", "/v1/completions", 0, 0},
		{"scrapeonly", "/health", 0, 0},
		{"scrapeonly", "/v1/models", 0, 0.2},
		{"failing", "/health", 1, 2.5},
		// Every probe refused for its model has the next check read the list.
		{"refused", "/v1/models", 1, 5},
	} {
		if got := perMin(c.kind, c.path); got < c.min || got > c.max {
			t.Errorf("target %s: %s %.1f per simulated minute, want %.1f to %.1f", c.kind, c.path, got, c.min, c.max)
		}
	}
}
