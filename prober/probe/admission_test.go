package probe

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestAdmissionRefusalUnderLoad: vllm_sim with --max-num-queued-reqs 2 under
// 8 concurrent probes refuses the ones beyond the cap with vLLM's admission
// 503, and each refused probe reads reason overloaded, never http_5xx; the
// admitted ones succeed.
func TestAdmissionRefusalUnderLoad(t *testing.T) {
	_, ts, _ := startSim(t, func(c *simulator.Config) {
		c.MaxNumQueuedReqs = 2
		c.TTFT = 200 * time.Millisecond
	})
	const n = 8
	results := make([]Result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			results[i] = Stream(ctx, ts.Client(), StreamRequest{
				BaseURL: ts.URL, Kind: config.ProberCompletions,
				Body: map[string]any{"model": "sim-model", "prompt": "p", "max_tokens": 4},
			})
		}()
	}
	close(start)
	wg.Wait()
	var ok, overloaded int
	for _, r := range results {
		switch {
		case r.Success:
			ok++
		case r.Reason == ReasonOverloaded && r.StatusCode == http.StatusServiceUnavailable:
			overloaded++
		default:
			t.Errorf("probe: success %v, reason %q, HTTP %d: %s; want success or overloaded", r.Success, r.Reason, r.StatusCode, r.Err)
		}
	}
	if ok < 1 || ok > 2 || overloaded != n-ok {
		t.Errorf("%d succeeded and %d overloaded of %d with a cap of 2, want 1-2 and the rest", ok, overloaded, n)
	}
}
