package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestGateHoldsTheBuiltRequest: for every kind, Call.Gate runs once the
// request is built and before any byte of it reaches the server, and the
// probe's t0 (Result.Start) is taken after it returns, so that a held wave
// measures from its release.
func TestGateHoldsTheBuiltRequest(t *testing.T) {
	_, srv, _ := startSim(t, func(c *simulator.Config) {
		c.TTFT, c.ITL = 5*time.Millisecond, time.Millisecond
	})
	var arrived atomic.Int64
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	defer counting.Close()
	for _, kind := range []string{config.ProberCompletions, config.ProberChat, config.ProberResponses, config.ProberEmbeddings} {
		t.Run(kind, func(t *testing.T) {
			spec := simSpec(t, kind, 3)
			before := arrived.Load()
			var calls int
			var released time.Time
			res := spec.Run(context.Background(), counting.Client(), Call{BaseURL: counting.URL, Target: "t",
				Gate: func() {
					calls++
					if n := arrived.Load(); n != before {
						t.Errorf("%d requests reached the server before the gate opened", n-before)
					}
					time.Sleep(20 * time.Millisecond)
					released = time.Now()
				}})
			if !res.Success {
				t.Fatalf("probe failed: %s %s", res.Reason, res.Err)
			}
			if calls != 1 || arrived.Load() != before+1 {
				t.Errorf("gate called %d times, %d requests arrived; want 1 and 1", calls, arrived.Load()-before)
			}
			if res.Start.Before(released) {
				t.Errorf("t0 %v is before the gate opened at %v: the wait is in the measurement", res.Start, released)
			}
		})
	}
}
