package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// BenchmarkLandingPageLive serves / (handler, statistics, baseline comparisons,
// last scrapes and render) for 100 targets × 2 modules that a real daemon
// probed and scraped until every pair's history was full (--history.limit 20):
// every target has a baseline and two static labels; 10 % of the targets
// answer 500 to every completion (failing, with an error text), 5 % to one in
// three (flapping), the rest succeed. The daemon is stopped before the timed
// loop, so that its probes do not compete with the render for the CPU. It
// reports the page's size (bytes/page) next to ns/op; docs/performance.md has
// the figures. It is BenchmarkLandingPage with everything real, at a tenth of
// the fleet: at 1,000 targets the 40,000 probes that fill the histories did
// not finish within 10 minutes, twice, on the shared 2-core machine (load
// average 15-20); at 100 targets they take from 25 s to a few minutes.
func BenchmarkLandingPageLive(b *testing.B) {
	const targets, modules, limit = 100, 2, 20
	sim := func(mutate func(*simulator.Config)) string {
		return startPlainSim(b, func(c *simulator.Config) {
			c.TTFT, c.ITL = 2*time.Millisecond, 0
			if mutate != nil {
				mutate(c)
			}
		}).URL
	}
	ok := sim(nil)
	failing := sim(func(c *simulator.Config) { c.Fault, c.FaultRate, c.FaultStatus = simulator.FaultHTTPStatus, 1, 500 })
	flapping := sim(func(c *simulator.Config) { c.Fault, c.FaultRate, c.FaultStatus = simulator.FaultHTTPStatus, 0.33, 500 })
	dir := b.TempDir()
	baselineFile := benchBaseline(b, ok, dir, "simbase")

	var cfg strings.Builder
	fmt.Fprintf(&cfg, `global: {probe_interval: 1s, scrape_interval: 2s, scrape_timeout: 1s, rate_window: 5m, max_concurrent_probes: 64}
modules:
  short_completion: {prober: completions, prompt: hi, max_tokens: 2}
  short_chat: {prober: chat, messages: [{role: user, content: hi}], max_tokens: 2}
baselines: [{name: simbase, file: %s}]
targets:
`, baselineFile)
	for i := range targets {
		url := ok
		switch {
		case i%10 == 0:
			url = failing
		case i%20 == 5:
			url = flapping
		}
		fmt.Fprintf(&cfg, "  - {name: vllm-%04d, url: %q, baseline: simbase, labels: {pool: pool-%d, cluster: c%d}, modules: [short_completion, short_chat]}\n", i, url, i%20, i%3)
	}
	path := filepath.Join(dir, "vllm_prober.yml")
	writeConfig(b, path, cfg.String())
	// The comparisons reach back over the probes run below, not only the
	// last 5 minutes, however long the timed loop takes.
	d, err := New(Options{ConfigFile: path, HistoryLimit: limit, ProbeWindow: time.Hour}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, d.Handler()) }()
	full := func() bool {
		stats := d.probes.AllStats()
		if len(stats) != targets*modules {
			return false
		}
		for _, s := range stats {
			if s.Probes < limit {
				return false
			}
			if _, ok := d.coll.LastScrape(s.Target); !ok {
				return false
			}
		}
		return true
	}
	start := time.Now()
	for deadline := start.Add(10 * time.Minute); !full(); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			cancel()
			b.Fatal("the histories did not fill within 10 minutes")
		}
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.Logf("%d pairs with full histories after %s", targets*modules, time.Since(start).Round(time.Second))

	h := d.Handler()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	var size, compared int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("/ = %d", w.Code)
		}
		size = w.Body.Len()
		compared = strings.Count(w.Body.String(), "×</td>")
	}
	b.StopTimer()
	if compared < targets {
		b.Fatalf("only %d baseline ratios on the page: the comparisons did not run", compared)
	}
	b.ReportMetric(float64(size), "bytes/page")
}
