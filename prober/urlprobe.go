package prober

import (
	"context"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// URLProbe is one probe of a URL that is no configured target (url_probes:
// /probe?target=<URL>&module=M, as a Prometheus Operator Probe asks).
type URLProbe struct {
	URL, Module string
	// Model is the model to ask; "" means the first id of the URL's /v1/models.
	Model string
	// Client is url_probes' own client: never a configured target's.
	Client *http.Client
	// TokenBudgetPerHour is url_probes' budget, shared by every URL probe and
	// apart from every target's.
	TokenBudgetPerHour int
}

// urlProbeTarget names URL probes where a target name is expected (the
// request headers of a probe, the load lookup, which knows no such target).
const urlProbeTarget = "url_probe"

// ProbeURLNow runs one URL probe and returns its result and its metrics in a
// fresh registry, as ProbeNow does. Its tokens are booked in the URL probes'
// own TokenPool (ErrBudgetExceeded when it could exceed TokenBudgetPerHour), so
// URL probes never take from a target's budget, and they do not count against
// max_concurrent_probes: a scheduled probe never skips because of them.
func (m *Manager) ProbeURLNow(ctx context.Context, u URLProbe) (*probe.Result, *prometheus.Registry, error) {
	m.mu.Lock()
	if m.cfg == nil {
		m.mu.Unlock()
		return nil, nil, errors.New("no configuration applied")
	}
	mod, ok := m.cfg.Modules[u.Module]
	spec := m.specs[u.Module]
	if !ok || spec == nil {
		m.mu.Unlock()
		return nil, nil, errors.New("unknown module " + u.Module)
	}
	tc := config.DefaultTarget
	tc.Name, tc.URL, tc.Model = urlProbeTarget, u.URL, u.Model
	p := &pair{key: pairKey{urlProbeTarget, u.Module, ""}, tgt: &target{cfg: tc, client: u.Client, model: u.Model},
		spec: spec, timeout: m.cfg.ProbeTimeout(&tc, &mod), stall: m.cfg.StallTimeout(&mod)}
	cost := p.worstCost()
	// One pool for every URL probe (budget.go's TokenPool), apart from every
	// target's scheduled and on-demand pools.
	if !m.urlProbes.Allows(m.now(), u.TokenBudgetPerHour, u.TokenBudgetPerHour, "", cost) {
		m.mu.Unlock()
		return nil, nil, ErrBudgetExceeded
	}
	m.urlProbes.Reserve("", cost)
	s := m.snapshot(p)
	hist := m.hist
	m.mu.Unlock()

	var res *probe.Result
	if s.model == "" {
		// Resolved here, not by probe's resolveModel: no configured target's
		// series must learn this model.
		mctx, cancel := context.WithTimeout(ctx, s.timeout)
		ids, r := probe.ListModels(mctx, s.client, s.url, s.red)
		cancel()
		switch {
		case r != nil:
			r.Phase, r.Request = probe.PhaseModels, http.MethodGet+" /v1/models"
			r.Scrub(s.red)
			res = r
		case len(ids) == 0:
			res = &probe.Result{Reason: probe.ReasonModelNotFound, Err: "/v1/models lists no model", Phase: probe.PhaseModels}
		default:
			s.model = ids[0]
		}
	}
	if res == nil {
		res = m.probe(ctx, s, func() {})
	}

	m.mu.Lock()
	m.settle(&m.urlProbes, "", cost, s, res)
	end := float64(m.now().UnixNano()) / 1e9
	m.mu.Unlock()

	return res, oneShotRegistry(hist, res, end), nil
}
