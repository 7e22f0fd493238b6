package prober

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
)

// Errors of Burster.Start. Each wraps ErrBurstRefused.
var (
	ErrBurstRefused   = errors.New("burst refused")
	ErrBurstOff       = fmt.Errorf("%w: bursts are off (global.burst.token_budget_per_hour is 0)", ErrBurstRefused)
	ErrBurstOverLimit = fmt.Errorf("%w: over the configured limits", ErrBurstRefused)
	ErrBurstBudget    = fmt.Errorf("%w: the burst token budget for this hour is spent", ErrBurstRefused)
)

// BurstPlan is an accepted burst.
type BurstPlan struct {
	Target, Module string
	Probes         int
	Within         time.Duration
	// Reserved is the worst-case token cost reserved for the whole burst.
	Reserved int
}

// Burster runs bursts: N extra probes of one (target, module) spread over a
// duration, while a rollout's analysis needs samples. Burst probes are
// recorded exactly like scheduled ones (history, statistics, every
// vllm_probe_* series), so an analysis sees them; they draw on the burst
// budget (global.burst) only, never on the target's token_budget_per_hour,
// and do not count against the global concurrency limit. A burst probe takes
// the pair's in-flight slot only while no scheduled probe holds it or waits
// for it, and a scheduled probe that falls due during a burst probe runs
// right after it, before the burst's next: a burst never makes a scheduled
// probe skip (it may delay it by one burst probe).
type Burster struct {
	m *Manager

	mu   sync.Mutex
	pool TokenPool // the burst budget: spends of the last hour and reservations; b.mu guards it
	ctx  context.Context
	wg   sync.WaitGroup

	requests *prometheus.CounterVec
	probes   *prometheus.CounterVec
	pending  *prometheus.GaugeVec
	tokens   prometheus.Counter
	budget   prometheus.GaugeFunc
}

// NewBurster returns a Burster of m's pairs, with its metrics registered
// with reg (nil: none). Bursts start once Run was called.
func NewBurster(reg prometheus.Registerer, m *Manager) *Burster {
	b := &Burster{m: m,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_probe_burst_requests_total",
			Help: "Burst requests (POST /burst), by result: accepted, or refused (over the limits, over the burst token budget, bursts off).",
		}, []string{"result"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm_probe_burst_probes_total",
			Help: "Probes run by bursts; each is also recorded as a probe of its target and module (vllm_probe_attempts_total and the rest).",
		}, []string{"target", "module"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vllm_probe_burst_pending_probes",
			Help: "Probes of accepted bursts not run yet.",
		}, []string{"target", "module"}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm_probe_burst_tokens_total",
			Help: "Prompt plus output tokens spent by burst probes (drawn on global.burst.token_budget_per_hour, never on a target's budget).",
		}),
	}
	b.budget = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vllm_probe_burst_budget_remaining_tokens",
		Help: "Tokens of the rolling hour's burst budget neither spent nor reserved by bursts running.",
	}, func() float64 { return float64(b.remaining()) })
	for _, r := range []string{"accepted", "refused"} {
		b.requests.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(b.requests, b.probes, b.pending, b.tokens, b.budget)
	}
	return b
}

// Run lets bursts start from its return on, until ctx is done; the returned
// wait blocks until ctx is done and every burst has ended (ctx cancels them).
func (b *Burster) Run(ctx context.Context) (wait func()) {
	b.mu.Lock()
	b.ctx = ctx
	b.mu.Unlock()
	return func() {
		<-ctx.Done()
		b.mu.Lock()
		b.ctx = nil
		b.mu.Unlock()
		b.wg.Wait()
	}
}

// limits are the running configuration's burst limits.
func (b *Burster) limits() config.Burst {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if b.m.cfg == nil {
		return config.DefaultBurst
	}
	return b.m.cfg.Global.Burst
}

// remaining is the budget neither spent in the last hour nor reserved.
func (b *Burster) remaining() int {
	lim := b.limits()
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(lim.TokenBudgetPerHour-b.pool.Used(b.m.now()), 0)
}

// Start accepts a burst of probes probes of (target, module) spread over
// within, or refuses it (an error wrapping ErrBurstRefused, with what the
// limit is, or another error for an unknown target or module). The first
// probe starts at once, the others every within/probes after it (or after the
// previous one ended, when a probe takes longer).
func (b *Burster) Start(target, module string, probes int, within time.Duration) (BurstPlan, error) {
	plan := BurstPlan{Target: target, Module: module, Probes: probes, Within: within}
	lim := b.limits()
	refuse := func(err error) (BurstPlan, error) {
		b.requests.WithLabelValues("refused").Inc()
		return plan, err
	}
	switch {
	case lim.TokenBudgetPerHour <= 0:
		return refuse(ErrBurstOff)
	case probes < 1 || probes > lim.MaxProbes:
		return refuse(fmt.Errorf("%w: %d probes asked, global.burst.max_probes allows 1 to %d", ErrBurstOverLimit, probes, lim.MaxProbes))
	case within < 0 || within > time.Duration(lim.MaxWithin):
		return refuse(fmt.Errorf("%w: within %s asked, global.burst.max_within allows up to %s", ErrBurstOverLimit, within, lim.MaxWithin))
	}
	m := b.m
	m.mu.Lock()
	p, ok := m.pairs[pairKey{target, module, ""}]
	if !ok || p.stopped {
		m.mu.Unlock()
		return plan, fmt.Errorf("no probes of target %q with module %q run here", target, module)
	}
	cost := p.worstCost()
	m.mu.Unlock()

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return refuse(fmt.Errorf("%w: the prober is not running", ErrBurstRefused))
	}
	plan.Reserved = cost * probes
	now := m.now()
	if !b.pool.Allows(now, lim.TokenBudgetPerHour, lim.TokenBudgetPerHour, "", plan.Reserved) {
		return refuse(fmt.Errorf("%w: %d probes may cost up to %d tokens, %d of global.burst.token_budget_per_hour %d are left",
			ErrBurstBudget, probes, plan.Reserved, max(lim.TokenBudgetPerHour-b.pool.Used(now), 0), lim.TokenBudgetPerHour))
	}
	b.pool.Reserve("", plan.Reserved)
	b.requests.WithLabelValues("accepted").Inc()
	b.pending.WithLabelValues(target, module).Add(float64(probes))
	ctx := b.ctx
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.run(ctx, plan, cost)
	}()
	return plan, nil
}

// run runs an accepted burst's probes and releases what it did not spend.
func (b *Burster) run(ctx context.Context, plan BurstPlan, cost int) {
	every := time.Duration(0)
	if plan.Probes > 1 {
		every = plan.Within / time.Duration(plan.Probes)
	}
	left := plan.Probes
	defer func() {
		b.mu.Lock()
		b.pool.Reserve("", -cost*left)
		b.mu.Unlock()
		b.pending.WithLabelValues(plan.Target, plan.Module).Sub(float64(left))
	}()
	next := time.Now()
	for left > 0 {
		if d := time.Until(next); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		next = next.Add(every)
		spent, ok := b.m.burstProbe(ctx, plan.Target, plan.Module, func() {
			b.probes.WithLabelValues(plan.Target, plan.Module).Inc()
		})
		left--
		b.pending.WithLabelValues(plan.Target, plan.Module).Dec()
		b.mu.Lock()
		b.pool.Settle(b.m.now(), "", cost, spent)
		b.mu.Unlock()
		if spent > 0 {
			b.tokens.Add(float64(spent))
		}
		if !ok {
			return // the pair went away (reload): the rest of the burst with it
		}
	}
}

// burstProbe runs one probe of (target, module) outside the schedule and
// records it as a scheduled one. It returns the tokens it spent, and false
// when the pair is gone. It books nothing on the target's budget and does not
// count against the concurrency limit. It takes the pair's in-flight slot,
// waiting while a scheduled probe holds it or waits for it, so that a pair's
// probes never overlap (its statistics rely on it). The scheduled probe takes
// precedence: a tick that meets a burst probe in flight does not skip, it
// waits for this probe to end and takes the slot before the burst's next
// probe.
func (m *Manager) burstProbe(ctx context.Context, target, module string, started func()) (spent int, ok bool) {
	var p *pair
	for {
		m.mu.Lock()
		p, ok = m.pairs[pairKey{target, module, ""}]
		if !ok || p.stopped {
			m.mu.Unlock()
			return 0, false
		}
		if !p.inFlight {
			p.inFlight, p.burstHolds = true, true
			break
		}
		m.mu.Unlock()
		t := time.NewTimer(burstWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, false
		case <-t.C:
		}
	}
	recorded := false
	defer func() { // after the unlock below
		if recorded {
			m.notifyRecorded(p)
		}
	}()
	defer m.mu.Unlock()
	attempt := m.attempt(p)
	s, res := m.launch(ctx, p, nil, "", 0, func() { attempt(); started() })
	spent = spentTokens(s, res)
	p.burstHolds = false
	if p.scheduledNext != nil {
		close(p.scheduledNext) // the slot goes to the scheduled probe that waits for it
		p.scheduledNext = nil
	} else {
		p.inFlight = false
	}
	if ctx.Err() != nil || p.stopped {
		return spent, false
	}
	m.record(p, res)
	recorded = true
	return spent, true
}

// burstWait is how often a burst probe looks whether a scheduled probe of its
// pair has ended.
const burstWait = 25 * time.Millisecond
