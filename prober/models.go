package prober

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/config"
)

// A target with models: all (or a regular expression) has one pair per
// (module, listed model): each model gets its own schedule, history and
// model label, and they all draw on the target's one token budget, spread
// evenly over them (budgetShare). The list is re-read with /health on the
// health-check interval (check.go).

// ErrUnknownModel is returned by ProbeModelNow for a model the target does
// not probe.
var ErrUnknownModel = errors.New("not a model this target probes")

// budgetShare is what the probes of one model of t may spend in a rolling
// hour: the target's token_budget_per_hour divided by the number of models it
// lists, so that N models together stay within the one budget and none of
// them starves the others; the whole budget on a target without models.
func budgetShare(t *target) int {
	budget := t.cfg.TokenBudgetPerHour
	if t.cfg.Models != "" && len(t.models) > 1 {
		return budget / len(t.models)
	}
	return budget
}

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
		chk, err := compileChecks(&mc)
		if err != nil { // validated configurations compile: a bug
			level.Error(m.logger).Log("msg", "Compiling the module's checks failed", "module", mod, "err", err)
		}
		for _, model := range pairModels(t) {
			key := pairKey{tc.Name, mod, model}
			keep[key] = true
			p, ok := m.pairs[key]
			if !ok {
				p = &pair{key: key, hist: history{limit: m.historyLimit}}
				m.pairs[key] = p
			}
			if ok && !reflect.DeepEqual(p.mod, mc) {
				p.promptEstimate = 0 // the prompt may have changed
			}
			restart := !ok || p.interval != interval
			p.tgt, p.mod, p.interval, p.checks = t, mc, interval, chk
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
	if p.gen == m.metrics && p.labels != nil {
		m.metrics.deletePair(p.labels)
	}
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
	for _, p := range m.pairs {
		if p.tgt == t {
			m.relabelPair(p)
		}
	}
	return len(list) > 0
}

// warnBudgetShare logs when t's budget share per model (budgetShare) is below
// the max_tokens of one of its modules: every probe of that module would be
// skipped (vllm_probe_skipped_total{reason="budget"}). --config.check cannot
// see this: the number of models is known only once /v1/models was read.
// m.mu must be held.
func (m *Manager) warnBudgetShare(t *target) {
	share := budgetShare(t)
	if t.cfg.TokenBudgetPerHour <= 0 || share == t.cfg.TokenBudgetPerHour {
		return
	}
	for _, name := range t.cfg.Modules {
		if mod := m.cfg.Modules[name]; mod.MaxTokens > share {
			level.Warn(m.logger).Log("msg", "The token budget share of each model is below max_tokens of a module: its probes will be skipped",
				"target", t.cfg.Name, "models", len(t.models), "token_budget_per_hour", t.cfg.TokenBudgetPerHour,
				"share", share, "module", name, "max_tokens", mod.MaxTokens)
		}
	}
}
