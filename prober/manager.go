package prober

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
)

// ModuleStatus is the state of one (target, module) pair for the landing page.
type ModuleStatus struct {
	Module  string
	Last    *Result
	History []Result // newest first, bounded
}

// TargetStatus is the state of one target for the landing page.
type TargetStatus struct {
	Name     string
	URL      string
	Model    string
	HealthUp bool
	ModelsUp bool
	Modules  []ModuleStatus
}

// Manager runs the probes of every (target, module) pair of a configuration.
type Manager struct {
	mu     sync.Mutex
	reg    prometheus.Registerer
	logger log.Logger
	cfg    *config.Config
}

// NewManager returns a Manager that registers its metrics with reg.
func NewManager(reg prometheus.Registerer, logger log.Logger) *Manager {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	return &Manager{reg: reg, logger: logger}
}

// Apply (re)configures the manager. It is safe before and while Run runs.
func (m *Manager) Apply(cfg *config.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg = cfg
	return nil
}

// Run probes until ctx is done and returns once every goroutine it started exited.
func (m *Manager) Run(ctx context.Context) {
	<-ctx.Done()
}

// ProbeNow runs one probe of module on target now and returns its metrics in a fresh registry.
func (m *Manager) ProbeNow(ctx context.Context, target, module string) (*Result, *prometheus.Registry, error) {
	return nil, nil, errors.New("not implemented")
}

// Status returns the state of every target, in configuration order.
func (m *Manager) Status() []TargetStatus { return nil }

// Model returns the resolved model of target, "" if unknown.
func (m *Manager) Model(target string) string { return "" }

// MeanTTFT returns the mean TTFT in seconds of the successful probes of target since since.
func (m *Manager) MeanTTFT(target string, since time.Time) (seconds float64, n int) {
	_ = since
	return 0, 0
}
