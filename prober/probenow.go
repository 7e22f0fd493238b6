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
	t := m.targets[targetName]
	if t == nil && m.cfg != nil {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("unknown target %q", targetName)
	}
	p, err := m.oneOff(t, module)
	if err == nil {
		p.key.model, err = probeNowModel(t, model)
	}
	if err != nil {
		m.mu.Unlock()
		return nil, nil, err
	}
	if known, ok := m.pairs[p.key]; ok {
		p.promptEstimate, p.seq = known.promptEstimate, known.seq
		known.seq++ // the pair's next probe asks the next question
	}
	// On-demand probes draw on a pool of their own (budget.go): however
	// many calls /probe gets, the scheduled probes keep their budget.
	return m.launchOneOff(ctx, p, &t.onDemand, onDemandBudget(t, p.worstCost()), ErrOnDemandBudgetExceeded)
}

// launchOneOff runs p, a probe outside the schedule, when its worst-case
// cost fits budget in pool (else it returns refused), and returns its result
// and its series in a fresh registry. m.mu must be held; launchOneOff
// releases it.
func (m *Manager) launchOneOff(ctx context.Context, p *pair, pool *TokenPool, budget int, refused error) (*probe.Result, *prometheus.Registry, error) {
	defer m.mu.Unlock()
	cost := p.worstCost()
	if !pool.Allows(m.now(), budget, budget, "", cost) {
		return nil, nil, refused
	}
	pool.Reserve("", cost)
	_, res := m.launch(ctx, p, pool, "", cost, func() {})
	return res, oneShotRegistry(m.hist, res, unixSeconds(m.now())), nil
}

// oneOff is a pair for one probe of module on t outside the schedule
// (ProbeModelNow, ProbeURLNow). t may be nil only when no configuration was
// applied. m.mu must be held.
func (m *Manager) oneOff(t *target, module string) (*pair, error) {
	if m.cfg == nil {
		return nil, errors.New("no configuration applied")
	}
	mod, ok := m.cfg.Modules[module]
	spec := m.specs[module]
	if !ok || spec == nil {
		return nil, fmt.Errorf("unknown module %q", module)
	}
	return &pair{key: pairKey{t.cfg.Name, module, ""}, tgt: t, spec: spec,
		timeout: m.cfg.ProbeTimeout(&t.cfg, &mod), stall: m.cfg.StallTimeout(&mod)}, nil
}
