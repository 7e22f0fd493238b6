package daemon

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/prober"
)

// BenchmarkLandingPage renders / for 1,000 targets × 2 modules, each pair
// with a full history behind its summary (--history.limit 20): 10 % failing
// with an error text, 5 % flapping, the rest healthy. It reports the page's
// size (bytes/page) next to ns/op; docs/performance.md has the figures. The
// summary reads no history (prober.BenchmarkAllStats measures the read of the
// pair statistics themselves).
func BenchmarkLandingPage(b *testing.B) {
	const targets = 1000
	var cfg strings.Builder
	cfg.WriteString("modules:\n  short_completion: {prober: completions, prompt: hi, max_tokens: 8}\n  short_chat: {prober: chat, messages: [{role: user, content: hi}], max_tokens: 8}\ntargets:\n")
	for i := range targets {
		fmt.Fprintf(&cfg, "  - {name: vllm-%04d, url: 'http://127.0.0.1:1', model: meta-llama/Llama-3.1-8B-Instruct, labels: {pool: pool-%d, cluster: c%d}, modules: [short_completion, short_chat]}\n", i, i%20, i%3)
	}
	path := filepath.Join(b.TempDir(), "c.yml")
	writeConfig(b, path, cfg.String())
	d, err := New(Options{ConfigFile: path}, nil)
	if err != nil {
		b.Fatal(err)
	}
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
				s.LastReason, s.LastStatusCode = string(prober.ReasonHTTP5xx), 500
				s.LastErr = "HTTP 500 InternalServerError: EngineCore encountered an issue. See stack trace (above) for the root cause."
				s.FailingSince, s.LastSuccess, s.LastFailureID = now.Add(-11*time.Minute), now.Add(-11*time.Minute), 240
			case n%20 == 1:
				s.Successes, s.HourSuccesses, s.LastFailureID = 11, 130, 238
			}
			sums = append(sums, s)
		}
	}
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
