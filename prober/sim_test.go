package prober

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// startSim runs vllm_sim in-process behind a real HTTP server.
func startSim(t *testing.T, mutate func(*simulator.Config)) (*simulator.Simulator, *httptest.Server, simulator.Config) {
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
	t.Cleanup(func() { _ = sim.Close() }) // runs first: ends hung and stalled handlers
	return sim, ts, cfg
}
