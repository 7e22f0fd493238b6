package collector

import (
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testOptions are a Manager's options for a test, with its own client pool.
func testOptions(reg prometheus.Registerer, logger log.Logger) Options {
	return Options{Registerer: reg, Logger: logger, Clients: httpclient.New(nil)}
}
