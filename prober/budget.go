package prober

import (
	"errors"
	"net/http"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// The token budget: every target's probes spend at most its
// token_budget_per_hour in any rolling hour. A probe reserves its worst-case
// cost (the prompt estimate plus max_tokens) when it starts and books what
// the server reported when it ends; a scheduled probe that does not fit is
// skipped (vllm_probe_skipped_total{reason="budget"}), /probe answers
// ErrBudgetExceeded. On a target with models the budget is shared evenly
// between its models (budgetShare).

// ErrBudgetExceeded is returned by ProbeNow when the probe could exceed the
// target's token budget per hour.
var ErrBudgetExceeded = errors.New("token budget per hour would be exceeded")

// spend is one finished probe in a target's ledger.
type spend struct {
	at     time.Time
	tokens int
	model  string // the pair's model key: "" unless the target has models
}

// promptCost is the pair's prompt estimate: the last usage.prompt_tokens
// plus probe.PromptSlack, else the module's pessimistic estimate.
func (p *pair) promptCost() int {
	if p.promptEstimate != 0 {
		return p.promptEstimate
	}
	return p.spec.PromptEstimate()
}

// worstCost is what a probe of p may spend at most.
func (p *pair) worstCost() int { return p.promptCost() + p.spec.Module().MaxTokens }

// budgetAllows reports whether a probe of worst-case cost fits t's rolling-hour
// budget, counting probes in flight at their worst case, and, on a target with
// models, the share of that budget of the probe's model (budgetShare). m.mu
// must be held.
func (m *Manager) budgetAllows(t *target, model string, cost int) bool {
	budget := t.cfg.TokenBudgetPerHour
	if budget <= 0 {
		return true
	}
	cut := m.now().Add(-time.Hour)
	i := 0
	for i < len(t.ledger) && t.ledger[i].at.Before(cut) {
		i++
	}
	t.ledger = t.ledger[i:]
	spent, mine := 0, 0
	for k, n := range t.reserved {
		spent += n
		if k == model {
			mine += n
		}
	}
	for _, s := range t.ledger {
		spent += s.tokens
		if s.model == model {
			mine += s.tokens
		}
	}
	return spent+cost <= budget && mine+cost <= budgetShare(t)
}

// settle releases a probe's reservation and books what it spent. m.mu must be held.
func (m *Manager) settle(t *target, model string, cost int, s probeSpec, res *probe.Result) {
	t.reserve(model, -cost)
	prompt := res.PromptTokens
	if prompt == 0 && res.StatusCode == http.StatusOK {
		prompt = s.promptEstimate // the server processed it but sent no usage
	}
	if n := prompt + res.OutputTokens; n > 0 {
		t.ledger = append(t.ledger, spend{at: m.now(), tokens: n, model: model})
	}
}

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

// reserve adds (or with a negative cost releases) the worst-case cost of a
// probe in flight of the pair with model key model.
func (t *target) reserve(model string, cost int) {
	if t.reserved == nil {
		t.reserved = map[string]int{}
	}
	if t.reserved[model] += cost; t.reserved[model] == 0 {
		delete(t.reserved, model)
	}
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
