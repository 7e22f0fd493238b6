package prober

import (
	"net/http/httptest"
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// startSim runs vllm_sim in-process behind a real HTTP server (simtest.Start).
func startSim(t *testing.T, mutate func(*simulator.Config)) (*simulator.Simulator, *httptest.Server, simulator.Config) {
	t.Helper()
	return simtest.Start(t, mutate)
}
