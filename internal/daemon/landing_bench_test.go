package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// BenchmarkLandingPage renders / for 1,000 targets × 2 modules from the pair
// statistics a prober with full histories (--history.limit 20) reports: 10 %
// failing with an error text, 5 % flapping, the rest healthy. It reports the
// page's size (bytes/page) next to ns/op; docs/performance.md has the
// figures. The statistics are given, so the baseline and scrape columns are
// empty: BenchmarkLandingPageLive measures the whole handler on a daemon that
// probed and scraped for real, every target with a baseline, and
// prober.BenchmarkAllStats the read of the statistics of 2,000 full histories.
func BenchmarkLandingPage(b *testing.B) {
	const targets = 1000
	d := fleetDaemon(b, targets, func(int) string { return "http://127.0.0.1:1" })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var sums []prober.PairStats
	for i := range targets {
		for j, mod := range []string{"short_completion", "short_chat"} {
			s := prober.PairStats{Target: fmt.Sprintf("vllm-%04d", i), Module: mod, Model: "meta-llama/Llama-3.1-8B-Instruct",
				Probes: 20, Successes: 20, LastProbe: now.Add(-2 * time.Second), LastSuccess: now.Add(-2 * time.Second),
				RecordStats: prober.RecordStats{HourProbes: 240, HourSuccesses: 240, LastID: 240}}
			switch n := 2*i + j; {
			case n%10 == 0:
				s.Successes, s.HourSuccesses = 0, 180
				s.LastReason, s.LastStatusCode = string(probe.ReasonHTTP5xx), 500
				s.LastErr = "HTTP 500 InternalServerError: EngineCore encountered an issue. See stack trace (above) for the root cause."
				s.FailingSince, s.LastSuccess, s.LastFailureID = now.Add(-11*time.Minute), now.Add(-11*time.Minute), 240
			case n%20 == 1:
				s.Successes, s.HourSuccesses, s.LastFailureID = 11, 130, 238
			}
			sums = append(sums, s)
		}
	}
	benchLanding(b, d, sums, now)
}

// fleetDaemon is a daemon (not running) configured with targets targets
// vllm-0000… at url(i), two modules each, two static labels.
func fleetDaemon(b *testing.B, targets int, url func(i int) string) *Daemon {
	var cfg strings.Builder
	cfg.WriteString("modules:\n  short_completion: {prober: completions, prompt: hi, max_tokens: 8}\n  short_chat: {prober: chat, messages: [{role: user, content: hi}], max_tokens: 8}\ntargets:\n")
	for i := range targets {
		fmt.Fprintf(&cfg, "  - {name: vllm-%04d, url: '%s', model: meta-llama/Llama-3.1-8B-Instruct, labels: {pool: pool-%d, cluster: c%d}, modules: [short_completion, short_chat]}\n", i, url(i), i%20, i%3)
	}
	path := filepath.Join(b.TempDir(), "c.yml")
	writeConfig(b, path, cfg.String())
	d, err := New(Options{ConfigFile: path}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchLanding times the render of / from sums and reports its size.
func benchLanding(b *testing.B, d *Daemon, sums []prober.PairStats, now time.Time) {
	q := url.Values{}
	var size int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var w testWriter
		if err := landingTemplate.Execute(&w, d.landingData(q, sums, now)); err != nil {
			b.Fatal(err)
		}
		size = len(w.b)
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// BenchmarkLandingPageOutage is BenchmarkLandingPage in the worst case for the
// page's size: every one of the 1,000 targets × 2 modules failing, each with
// a long error (a refused connection to an in-cluster address), and every
// target's last scrape down with its own error. The summary must still stay
// under 1 MB; docs/performance.md has the figures.
func BenchmarkLandingPageOutage(b *testing.B) {
	const targets = 1000
	d := fleetDaemon(b, targets, func(i int) string { return fmt.Sprintf("http://vllm-%04d.inference.svc.cluster.local:8000", i) })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	scrapes := fakeScrapes{}
	var sums []prober.PairStats
	for i := range targets {
		host := fmt.Sprintf("vllm-%04d.inference.svc.cluster.local:8000", i)
		addr := fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250)
		scrapes[fmt.Sprintf("vllm-%04d", i)] = collector.ScrapeState{At: now.Add(-3 * time.Second), Duration: 1500 * time.Microsecond,
			Err: fmt.Sprintf("Get \"http://%s/metrics\": dial tcp %s: connect: connection refused", host, addr)}
		for _, mod := range []string{"short_completion", "short_chat"} {
			sums = append(sums, prober.PairStats{Target: fmt.Sprintf("vllm-%04d", i), Module: mod, Model: "meta-llama/Llama-3.1-8B-Instruct",
				Probes: 20, LastProbe: now.Add(-2 * time.Second), LastSuccess: now.Add(-47 * time.Minute),
				FailingSince: now.Add(-46 * time.Minute), LastReason: string(probe.ReasonConnection),
				RecordStats: prober.RecordStats{HourProbes: 240, HourSuccesses: 13, LastID: 240, LastFailureID: 240, LastFailure: now.Add(-2 * time.Second),
					LastErr: fmt.Sprintf("connection refused: Post \"http://%s/v1/chat/completions\": dial tcp %s: connect: connection refused", host, addr)}})
		}
	}
	d.scrapes = scrapes
	benchLanding(b, d, sums, now)
}

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
	go func() { done <- d.Run(ctx) }()
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
