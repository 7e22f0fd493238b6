package prober

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// The token budget: every target's probes spend at most its
// token_budget_per_hour in any rolling hour. A probe reserves its worst-case
// cost (the prompt estimate plus max_tokens) when it starts and books what
// the server reported when it ends; a scheduled probe that does not fit is
// skipped (vllm_probe_skipped_total{reason="budget"}). On a target with
// models the budget is shared evenly between its models (budgetShare).
//
// On-demand probes (/probe, ProbeNow) never touch that budget: they draw on
// a pool of their own, a tenth of it (onDemandBudget), and answer
// ErrOnDemandBudgetExceeded when it is spent, so that callers of /probe
// cannot make a scheduled probe skip.

// ErrBudgetExceeded is returned by ProbeNow when the probe could exceed the
// target's token budget per hour.
var ErrBudgetExceeded = errors.New("token budget per hour would be exceeded")

// ErrOnDemandBudgetExceeded is returned by ProbeNow when the target's
// on-demand budget (onDemandBudget) is spent for the rolling hour. It wraps
// ErrBudgetExceeded.
var ErrOnDemandBudgetExceeded = fmt.Errorf("on-demand probe budget spent for this hour (a tenth of token_budget_per_hour, separate from the scheduled probes' budget, which it never touches): %w", ErrBudgetExceeded)

// TokenPool is one rolling-hour token budget: a probe reserves its
// worst-case cost before it starts (Allows, then Reserve) and books what it
// spent when it ends (Settle), so that probes in flight count at their worst
// case. Keys split a pool into shares (the models of a target with models:
// all); "" is the whole target. Every kind of probe that spends a target's
// tokens draws on a pool of its own, so that no kind can starve another: the
// scheduled probes on a target's scheduled pool, on-demand /probe calls on
// its onDemand pool. The zero value is an empty pool. It is not safe for
// concurrent use: its owner serialises (the Manager's lock).
type TokenPool struct {
	ledger   []spend        // spends of the last hour, oldest first
	reserved map[string]int // worst-case cost of probes in flight, by key
}

// spend is one finished probe in a pool's ledger.
type spend struct {
	at     time.Time
	tokens int
	key    string // the pair's model key: "" unless the target has models
}

// Allows reports whether a probe of worst-case cost fits the pool at now:
// within budget for the whole pool and within share for key (budget <= 0:
// no limit). It forgets the spends older than an hour.
func (p *TokenPool) Allows(now time.Time, budget, share int, key string, cost int) bool {
	if budget <= 0 {
		return true
	}
	spent, mine := p.usage(now, key)
	return spent+cost <= budget && mine+cost <= share
}

// Used is what the pool holds at now: the spends of the last hour plus the
// reservations of the probes in flight. It forgets older spends.
func (p *TokenPool) Used(now time.Time) int {
	all, _ := p.usage(now, "")
	return all
}

// usage forgets the spends older than an hour and sums the rest with the
// reservations: all of them, and those of key.
func (p *TokenPool) usage(now time.Time, key string) (all, mine int) {
	cut := now.Add(-time.Hour)
	i := 0
	for i < len(p.ledger) && p.ledger[i].at.Before(cut) {
		i++
	}
	p.ledger = p.ledger[i:]
	for k, n := range p.reserved {
		all += n
		if k == key {
			mine += n
		}
	}
	for _, s := range p.ledger {
		all += s.tokens
		if s.key == key {
			mine += s.tokens
		}
	}
	return all, mine
}

// Reserve adds (or with a negative cost releases) the worst-case cost of a
// probe in flight under key.
func (p *TokenPool) Reserve(key string, cost int) {
	if p.reserved == nil {
		p.reserved = map[string]int{}
	}
	if p.reserved[key] += cost; p.reserved[key] == 0 {
		delete(p.reserved, key)
	}
}

// Settle releases a finished probe's reservation of cost and books the
// tokens it spent at now.
func (p *TokenPool) Settle(now time.Time, key string, cost, spent int) {
	p.Reserve(key, -cost)
	if spent > 0 {
		p.ledger = append(p.ledger, spend{at: now, tokens: spent, key: key})
	}
}

// onDemandShare divides a target's token_budget_per_hour into what its
// on-demand pool may spend in a rolling hour, on top of the scheduled
// probes' budget.
const onDemandShare = 10

// onDemandBudget is what on-demand probes of t may spend in a rolling hour:
// a tenth of its token_budget_per_hour, and at least one probe of worst-case
// cost; no limit on a target without a budget.
func onDemandBudget(t *target, cost int) int {
	budget := t.cfg.TokenBudgetPerHour
	if budget <= 0 {
		return 0
	}
	return max(budget/onDemandShare, cost)
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

// settle releases a probe's reservation in pool and books what it spent.
// m.mu must be held.
func (m *Manager) settle(pool *TokenPool, model string, cost int, s probeSpec, res *probe.Result) {
	pool.Settle(m.now(), model, cost, spentTokens(s, res))
}

// spentTokens is what a finished probe spent: its prompt and output tokens,
// the prompt estimate when the server processed it but sent no usage.
func spentTokens(s probeSpec, res *probe.Result) int {
	prompt := res.PromptTokens
	if prompt == 0 && res.StatusCode == http.StatusOK {
		prompt = s.promptEstimate
	}
	return prompt + res.OutputTokens
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
