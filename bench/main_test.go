package bench

import (
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/leakcheck"
)

// TestMain fails the package when one of its goroutines outlives its test.
func TestMain(m *testing.M) { leakcheck.Main(m, "vllm_prober/bench.", "vllm_prober/simulator.") }
