package prober

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
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
	tc := config.DefaultTarget
	tc.Name, tc.URL, tc.Model = urlProbeTarget, u.URL, u.Model
	m.mu.Lock()
	p, err := m.oneOff(&target{cfg: tc, client: u.Client, model: u.Model}, u.Module)
	if err != nil {
		m.mu.Unlock()
		return nil, nil, err
	}
	// One pool for every URL probe (budget.go's TokenPool), apart from every
	// target's scheduled and on-demand pools. The model, when the URL probe
	// names none, is resolved on p's own target: no configured target's
	// series learn it.
	return m.launchOneOff(ctx, p, &m.urlProbes, u.TokenBudgetPerHour, ErrBudgetExceeded)
}
