package prober

import (
	"fmt"
	"time"
)

// TokenPool is one rolling-hour token budget: a probe reserves its
// worst-case cost before it starts (Allows, then Reserve) and books what it
// spent when it ends (Settle), so that probes in flight count at their worst
// case. Keys split a pool into shares (the models of a target with models:
// all); "" is the whole target. Every kind of probe that spends a target's
// tokens draws on a pool of its own, so that no kind can starve another: the
// scheduled probes on a target's Scheduled pool, on-demand /probe calls on
// its OnDemand pool. The zero value is an empty pool. It is not safe for
// concurrent use: its owner serialises (the Manager's lock).
type TokenPool struct {
	ledger   []spend        // spends of the last hour, oldest first
	reserved map[string]int // worst-case cost of probes in flight, by key
}

type spend struct {
	at     time.Time
	tokens int
	key    string
}

// Allows reports whether a probe of worst-case cost fits the pool at now:
// within budget for the whole pool and within share for key (budget <= 0:
// no limit). It forgets the spends older than an hour.
func (p *TokenPool) Allows(now time.Time, budget, share int, key string, cost int) bool {
	if budget <= 0 {
		return true
	}
	cut := now.Add(-time.Hour)
	i := 0
	for i < len(p.ledger) && p.ledger[i].at.Before(cut) {
		i++
	}
	p.ledger = p.ledger[i:]
	spent, mine := 0, 0
	for k, n := range p.reserved {
		spent += n
		if k == key {
			mine += n
		}
	}
	for _, s := range p.ledger {
		spent += s.tokens
		if s.key == key {
			mine += s.tokens
		}
	}
	return spent+cost <= budget && mine+cost <= share
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

// onDemandShare is the part of a target's token_budget_per_hour that its
// OnDemand pool may spend in a rolling hour, on top of the scheduled
// probes' budget: on-demand /probe calls are anyone's who can reach the
// port, and must never make a scheduled probe skip.
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

// ErrOnDemandBudgetExceeded is returned by ProbeNow when the target's
// on-demand budget (a tenth of token_budget_per_hour, separate from the
// scheduled probes') is spent for the rolling hour. It wraps
// ErrBudgetExceeded.
var ErrOnDemandBudgetExceeded = fmt.Errorf("on-demand probe budget spent for this hour (a tenth of token_budget_per_hour, separate from the scheduled probes' budget, which it never touches): %w", ErrBudgetExceeded)
