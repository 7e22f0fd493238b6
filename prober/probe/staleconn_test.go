package probe

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// TestProbeSurvivesServerClosingEachStream sends probes back to back (a
// burst, /probe) to a server that closes the connection after each stream
// while it advertises keep-alive, as llama.cpp's llama-server does: the
// second probe reuses the pooled connection, which the server no longer
// reads. net/http sends it again on a new connection, once.
func TestProbeSurvivesServerClosingEachStream(t *testing.T) {
	sim, _, _ := simtest.Start(t, nil)
	url, posts := simtest.CloseEach(t, sim.Handler(), 300*time.Millisecond)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer client.CloseIdleConnections()
	for _, kind := range []string{config.ProberCompletions, config.ProberChat} {
		spec := simSpec(t, kind, 3)
		for i := range 3 {
			res := spec.Run(context.Background(), client, Call{BaseURL: url, Model: "sim-model"})
			if !res.Success {
				t.Errorf("%s probe %d: %s: %s", kind, i, res.Reason, res.Err)
			}
			if _, ok := res.RequestHeader["Idempotency-Key"]; ok {
				t.Errorf("%s probe %d: the recorded request header holds Idempotency-Key", kind, i)
			}
		}
	}
	if n := posts.Load(); n != 6 {
		t.Errorf("the server was given %d probes, want 6 (each once)", n)
	}
}
