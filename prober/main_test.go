package prober

import (
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testOptions are a Manager's options for a test: its own client pool and
// redactor.
func testOptions(reg prometheus.Registerer, logger log.Logger) Options {
	red := redact.New()
	return Options{Registerer: reg, Logger: logger, Clients: httpclient.New(red), Redactor: red}
}
