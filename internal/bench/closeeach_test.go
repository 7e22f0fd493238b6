package bench

import (
	"context"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// TestBenchSurvivesServerClosingEachStream runs bench against a server that
// closes the connection after every response while it advertises
// `Keep-Alive: timeout=5, max=100`, as llama.cpp's llama-server does: bench
// reuses the pooled connection at once, and lost 8-17 % of its requests to
// EOF against llama-server. A request sent into such a closing connection
// never reached the server, and is sent again on a new connection; none is
// sent twice (the handler saw each request once).
func TestBenchSurvivesServerClosingEachStream(t *testing.T) {
	sim, _, _ := simtest.Start(t, func(c *simulator.Config) {
		c.Model = simModel
		c.TTFT = 5 * time.Millisecond
		c.ITL = time.Millisecond
	})
	// The connection stays open 300 ms after each response: the next request
	// of a concurrency-1 level is sent into it well before it closes.
	url, posts := simtest.CloseEach(t, sim.Handler(), 300*time.Millisecond)
	const n = 6
	rep, err := Run(context.Background(), Options{
		URL: url, Model: simModel, Requests: n, Concurrencies: []int{1}, SkipWarmup: true,
		MaxTokens: 4, IgnoreEOS: true, Endpoint: config.ProberCompletions, PollInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Levels[0].Metrics
	if m.Completed != n || m.Failed != 0 {
		t.Errorf("completed %d, failed %d of %d: %+v", m.Completed, m.Failed, n, m.Failures)
	}
	// A POST sent into a closing connection never reached the handler; the
	// one sent again did: each reached it once.
	if streams := posts.Load(); streams != n {
		t.Errorf("the server was given %d completion requests, want %d (each once)", streams, n)
	}
}
