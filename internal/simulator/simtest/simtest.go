// Package simtest starts vllm_sim in-process behind a real HTTP server on
// 127.0.0.1, for the tests of the packages that probe it.
package simtest

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// Start runs a simulator serving model "sim-model" with a 40ms TTFT, a 10ms
// ITL, no jitter and every configured fault applied (FaultRate 1), after
// mutate. Both are closed when the test ends; the simulator first, which ends
// hung and stalled handlers.
func Start(t testing.TB, mutate func(*simulator.Config)) (*simulator.Simulator, *httptest.Server, simulator.Config) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Model = "sim-model"
	cfg.TTFT = 40 * time.Millisecond
	cfg.ITL = 10 * time.Millisecond
	cfg.Jitter = 0
	cfg.FaultRate = 1
	if mutate != nil {
		mutate(&cfg)
	}
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = sim.Close() })
	return sim, ts, cfg
}
