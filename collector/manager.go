package collector

import (
	"context"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
)

// ProbeStats is what the collector needs from the prober.
type ProbeStats interface {
	MeanTTFT(target string, since time.Time) (float64, int)
	Model(target string) string
}

// Baselines is what the collector needs from the baseline package.
type Baselines interface {
	SaturationOutputThroughput(target string) (float64, bool)
}

// Manager runs one scrape loop per target and exports the derived series.
type Manager struct {
	logger log.Logger
}

// NewManager returns a Manager registered with reg.
func NewManager(reg prometheus.Registerer, logger log.Logger, probes ProbeStats, baselines Baselines) *Manager {
	return &Manager{logger: logger}
}

// Apply (re)configures the manager.
func (m *Manager) Apply(cfg *config.Config) error { return nil }

// Run blocks until ctx is done and every goroutine it started exited.
func (m *Manager) Run(ctx context.Context) { <-ctx.Done() }

// Load returns the latest running and waiting requests of target.
func (m *Manager) Load(target string) (running, waiting float64, ok bool) { return 0, 0, false }

// GenerationTokensPerSecond returns target's generation tokens/s over the rate window.
func (m *Manager) GenerationTokensPerSecond(target string) (float64, bool) { return 0, false }
