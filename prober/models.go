package prober

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vllm-prober/vllm_prober/internal/config"
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

// applyTargetPairs creates or updates the pairs of target t under cfg and
// returns their keys. m.mu must be held.
func (m *Manager) applyTargetPairs(cfg *config.Config, tc *config.Target, t *target) map[pairKey]bool {
	keep := map[pairKey]bool{}
	interval := cfg.ProbeInterval(tc)
	t.pairs = t.pairs[:0]
	for _, mod := range tc.Modules {
		mc := cfg.Modules[mod]
		spec := m.specs[mod]
		for _, model := range pairModels(t) {
			key := pairKey{tc.Name, mod, model}
			keep[key] = true
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
			t.pairs = append(t.pairs, p)
			p.timeout, p.stall = cfg.ProbeTimeout(tc, &mc), cfg.StallTimeout(&mc)
			if restart {
				m.stopPair(p)
				m.startPair(p)
			}
		}
	}
	return keep
}

// removePair stops p and deletes its series. m.mu must be held.
func (m *Manager) removePair(p *pair) {
	m.stopPair(p)
	p.stopped = true
	delete(m.pairs, p.key)
}

// syncModels takes the ids a check listed: on a target with models set it
// adds the pairs of new matching ids and removes those of ids no longer
// listed. It reports whether any matched. m.mu must be held.
func (m *Manager) syncModels(t *target, ids []string) bool {
	match := t.cfg.ModelsMatcher()
	var list []string
	for _, id := range ids {
		if match(id) && !slices.Contains(list, id) {
			list = append(list, id)
		}
	}
	slices.Sort(list)
	if slices.Equal(list, t.models) || m.cfg == nil {
		return len(list) > 0
	}
	t.models = list
	m.warnBudgetShare(t)
	keep := m.applyTargetPairs(m.cfg, &t.cfg, t)
	for key, p := range m.pairs {
		if key.target == t.cfg.Name && !keep[key] {
			m.removePair(p)
		}
	}
	m.sortPairs()
	return len(list) > 0
}
