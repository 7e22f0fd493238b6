package prober

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// ProbeNow runs one probe of module on target now, outside the schedule, and
// returns its result and its metrics in a fresh registry (without target,
// module and model labels: the scraper of /probe sets them). It draws on the
// target's on-demand token pool, never on the scheduled probes' budget
// (ErrOnDemandBudgetExceeded when spent; budget.go), and it is not counted in
// the long-lived metrics or the history.
func (m *Manager) ProbeNow(ctx context.Context, targetName, module string) (*probe.Result, *prometheus.Registry, error) {
	return m.ProbeModelNow(ctx, targetName, module, "")
}

// ProbeModelNow is ProbeNow of one model of a target with models (models.go):
// model must be one the target lists; "" is its first. On other targets model
// must be "".
func (m *Manager) ProbeModelNow(ctx context.Context, targetName, module, model string) (*probe.Result, *prometheus.Registry, error) {
	m.mu.Lock()
	if m.cfg == nil {
		m.mu.Unlock()
		return nil, nil, errors.New("no configuration applied")
	}
	t, ok := m.targets[targetName]
	if !ok {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("unknown target %q", targetName)
	}
	mod, ok := m.cfg.Modules[module]
	spec := m.specs[module]
	if !ok || spec == nil {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("unknown module %q", module)
	}
	p := &pair{key: pairKey{targetName, module, ""}, tgt: t, spec: spec,
		timeout: m.cfg.ProbeTimeout(&t.cfg, &mod), stall: m.cfg.StallTimeout(&mod)}
	var err error
	if p.key.model, err = probeNowModel(t, model); err != nil {
		m.mu.Unlock()
		return nil, nil, err
	}
	if known, ok := m.pairs[p.key]; ok {
		p.promptEstimate, p.seq = known.promptEstimate, known.seq
		known.seq++ // the pair's next probe asks the next question
	}
	cost := p.worstCost()
	// On-demand probes draw on a pool of their own (budget.go): however
	// many calls /probe gets, the scheduled probes keep their budget.
	if budget := onDemandBudget(t, cost); !t.onDemand.Allows(m.now(), budget, budget, "", cost) {
		m.mu.Unlock()
		return nil, nil, ErrOnDemandBudgetExceeded
	}
	t.onDemand.Reserve("", cost)
	s := m.snapshot(p)
	hist := m.hist
	m.mu.Unlock()

	res := m.probe(ctx, s, func() {})

	m.mu.Lock()
	m.settle(&t.onDemand, "", cost, s, res)
	end := float64(m.now().UnixNano()) / 1e9
	m.mu.Unlock()

	return res, oneShotRegistry(hist, res, end), nil
}
