package prober

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A target with models: all (or a regular expression) has one pair per
// (module, listed model): each model gets its own schedule, history and
// model label, and they all draw on the target's one token budget, spread
// evenly over them (budgetShare). The list is re-read with /health on the
// health-check interval (check.go).

// ErrUnknownModel is returned by ProbeModelNow for a model the target does
// not probe.
var ErrUnknownModel = errors.New("not a model this target probes")

// probeNowModel is the pair model key of a probe ProbeModelNow runs of
// model on t.
func probeNowModel(t *target, model string) (string, error) {
	if t.cfg.Models == "" {
		if model != "" {
			return "", fmt.Errorf("model %q: %w: target %q has no models key", model, ErrUnknownModel, t.cfg.Name)
		}
		return "", nil
	}
	switch {
	case model == "" && len(t.models) > 0:
		return t.models[0], nil
	case model == "" || slices.Contains(t.models, model):
		return model, nil
	}
	return "", fmt.Errorf("model %q: %w; target %q lists %s", model, ErrUnknownModel, t.cfg.Name, strings.Join(t.models, ", "))
}

// pairModels lists the model keys of t's pairs: "" (the target's one model,
// configured or resolved) or every listed id the target's models key matches.
func pairModels(t *target) []string {
	if t.cfg.Models == "" {
		return []string{""}
	}
	return t.models
}

// pairModel is the model a pair probes, "" while unresolved.
func pairModel(p *pair) string {
	if p.key.model != "" {
		return p.key.model
	}
	return p.tgt.model
}

// syncPairs creates or updates the pairs of target t under the running
// configuration and removes those it no longer has: a target's change
// touches its pairs alone. m.mu must be held.
func (m *Manager) syncPairs(t *target) {
	old := t.pairs
	t.pairs = nil
	interval := m.cfg.ProbeInterval(&t.cfg)
	for _, mod := range t.cfg.Modules {
		mc := m.cfg.Modules[mod]
		spec := m.specs[mod]
		for _, model := range pairModels(t) {
			key := pairKey{t.cfg.Name, mod, model}
			p, ok := m.pairs[key]
			if !ok {
				p = &pair{key: key, hist: history{limit: m.historyLimit}, series: newSeries(m.hist, true)}
				m.pairs[key] = p
			}
			if ok && p.spec != spec {
				p.promptEstimate = 0 // the prompt may have changed
			}
			restart := !ok || p.interval != interval
			p.tgt, p.spec, p.interval = t, spec, interval
			p.series.allChecks = spec.ChecksAnswers()
			p.series.objectives = mc.SLOs
			if hdr, ok := m.gatewayRoles[t.cfg.Name]; ok {
				if p.samples == nil {
					p.samples = &sampleRing{}
				}
				p.memberHeader = hdr
			} else {
				p.samples, p.memberHeader = nil, ""
			}
			p.timeout, p.stall = m.cfg.ProbeTimeout(&t.cfg, &mc), m.cfg.StallTimeout(&mc)
			t.pairs = append(t.pairs, p)
			if restart {
				m.stopPair(p)
				m.startPair(p)
			}
		}
	}
	for _, p := range old {
		if !slices.Contains(t.pairs, p) {
			m.removePair(p)
		}
	}
	t.version++
}

// removePair stops p; its series go with it. m.mu must be held.
func (m *Manager) removePair(p *pair) {
	m.stopPair(p)
	p.stopped = true
	delete(m.pairs, p.key)
}

// sameModel tells whether the id a server lists names the configured model:
// the same id, or, for a model without a tag, Ollama's "<model>:latest",
// as Ollama lists a model created without a tag and answers requests that
// name it without one.
func sameModel(id, model string) bool {
	return id == model || !strings.Contains(model, ":") && id == model+":latest"
}

// listed takes the ids a check listed, on a target with models set: it
// adds the pairs of new matching ids and removes those of ids no longer
// listed. It reports whether any matched. The lock must be held.
func (t *target) listed(ids []string) bool {
	match := t.cfg.ModelsMatcher()
	var list []string
	for _, id := range ids {
		if match(id) && !slices.Contains(list, id) {
			list = append(list, id)
		}
	}
	slices.Sort(list)
	if !slices.Equal(list, t.models) {
		t.models = list
		t.host.modelsChanged(t)
	}
	return len(list) > 0
}
