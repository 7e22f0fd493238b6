package web_test

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/internal/daemon"
	"github.com/vllm-prober/vllm_prober/internal/daemonweb"
	"github.com/vllm-prober/vllm_prober/internal/web"
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
	d := fleetDaemon(b, targets, func(int) string { return "http://127.0.0.1:1" }, nil)
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

// fleetDaemon are the pages over a daemon (not running), with scrapes
// when not nil, configured with targets targets
// vllm-0000… at url(i), two modules each, two static labels.
func fleetDaemon(b *testing.B, targets int, url func(i int) string, scrapes web.Scrapes) web.Pages {
	var cfg strings.Builder
	cfg.WriteString("modules:\n  short_completion: {prober: completions, prompt: hi, max_tokens: 8}\n  short_chat: {prober: chat, messages: [{role: user, content: hi}], max_tokens: 8}\ntargets:\n")
	for i := range targets {
		fmt.Fprintf(&cfg, "  - {name: vllm-%04d, url: '%s', model: meta-llama/Llama-3.1-8B-Instruct, labels: {pool: pool-%d, cluster: c%d}, modules: [short_completion, short_chat]}\n", i, url(i), i%20, i%3)
	}
	path := filepath.Join(b.TempDir(), "c.yml")
	writeConfig(b, path, cfg.String())
	d, err := daemon.New(daemon.Options{ConfigFile: path}, nil)
	if err != nil {
		b.Fatal(err)
	}
	o := daemonweb.WebOptions(d)
	if scrapes != nil {
		o.Scrapes = scrapes
	}
	return web.NewPages(o)
}

// benchLanding times the render of / from sums and reports its size.
func benchLanding(b *testing.B, d web.Pages, sums []prober.PairStats, now time.Time) {
	q := url.Values{}
	var size int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var w testWriter
		if err := web.ExecLanding(&w, d.LandingData(q, sums, now)); err != nil {
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
	d := fleetDaemon(b, targets, func(i int) string { return fmt.Sprintf("http://vllm-%04d.inference.svc.cluster.local:8000", i) }, scrapes)
	benchLanding(b, d, sums, now)
}
