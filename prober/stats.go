package prober

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Means are the means of the successful probes of one (target, module) in a
// window, with vLLM's definitions (calculate_metrics): TTFT and E2E per probe;
// TPOT per probe with more than one output token (TPOT); ITL pooled over every
// inter-chunk gap of every probe. Latencies are in seconds; a mean no probe
// measured is NaN.
type Means struct {
	TTFT, TPOT, ITL, E2E float64
	// OutputTokens is the mean output tokens per successful probe.
	OutputTokens float64
	// Load is the mean of probe.Result.Load (running + waiting + 1 when the probe
	// started) over the probes that knew it.
	Load float64
	N    int // successful probes
	// NTPOT, NITL and NLoad are what TPOT, ITL and Load are means over:
	// the probes with a TPOT (more than one token), the inter-token gaps
	// of every probe, the probes that knew their load. With them a mean
	// can be turned back into its sum exactly (e.g. the means since two
	// times into those of the probes in between).
	NTPOT, NITL, NLoad int
}

// PairStats is the state of one (target, module) pair that the regression
// series, the collector and the landing page read. It is a value: the
// Manager hands out copies in O(1), without copying the pair's history.
type PairStats struct {
	Target, Module, Model string
	// Probes and Successes count the scheduled probes in the kept history
	// (the last --history.limit of them).
	Probes, Successes int
	// LastProbe and LastSuccess are when the last probe (the last successful
	// probe) finished; FailingSince is when the first failure of the current
	// run of failures finished, zero while the last probe succeeded. They
	// survive history eviction. Zero when unknown.
	LastProbe, LastSuccess, FailingSince time.Time
	// LastReason is the failure reason of the last probe, "" if it succeeded.
	LastReason  string
	RecordStats // the landing page's (pairstate.go)

	window statWindow
}

// Means returns the means of the successful probes in the kept history that
// started at or after since. It does not lock and does not allocate: the
// window it reads is immutable.
func (s PairStats) Means(since time.Time) Means {
	return s.window.means(since.UnixNano())
}

// SuccessStarts appends to dst the starts (Unix nanoseconds) of the
// successful probes in the kept history that started at or after since,
// oldest first: the times at which Means changes as since moves. It does not
// lock: the window it reads is immutable.
func (s PairStats) SuccessStarts(dst []int64, since time.Time) []int64 {
	w := &s.window
	from := since.UnixNano()
	i := sort.Search(len(w.entries), func(i int) bool { return w.entries[i].start >= from })
	prev := w.base.n
	if i > 0 {
		prev = w.entries[i-1].n
	}
	for _, e := range w.entries[i:] {
		if e.n > prev {
			dst = append(dst, e.start)
		}
		prev = e.n
	}
	return dst
}

// statEntry is one probe of the kept history: its start and the running sums
// of the window up to and including it. Sums make any suffix of the window
// (every probe since some time) two subtractions away.
type statEntry struct {
	start                 int64 // probe.Result.Start, Unix nanoseconds
	n, nTPOT, nITL, nLoad int   // successes, with TPOT, ITL gaps, with load
	ttft, tpot, itl, e2e  float64
	out, load             float64
}

func (e *statEntry) minus(b *statEntry) statEntry {
	return statEntry{start: e.start,
		n: e.n - b.n, nTPOT: e.nTPOT - b.nTPOT, nITL: e.nITL - b.nITL, nLoad: e.nLoad - b.nLoad,
		ttft: e.ttft - b.ttft, tpot: e.tpot - b.tpot, itl: e.itl - b.itl, e2e: e.e2e - b.e2e,
		out: e.out - b.out, load: e.load - b.load}
}

// statWindow holds the running sums of the last limit probes of a pair,
// oldest first. An entry is never written after it was appended (append only
// writes past every copy's length, and eviction reslices or moves to a new
// array), so copies of a statWindow are safe to read without the Manager's
// lock while the pair records more probes.
type statWindow struct {
	base    statEntry // the running sums before entries[0]
	entries []statEntry
}

// add appends a finished probe, evicting the oldest beyond limit. Amortised
// O(1): the backing array has room for 2×limit entries and is replaced (with
// the sums rebased to zero) when it is full.
func (w *statWindow) add(r *probe.Result, limit int) {
	limit = max(limit, 1)
	for len(w.entries) >= limit {
		w.base = w.entries[0]
		w.entries = w.entries[1:]
	}
	if len(w.entries) == cap(w.entries) {
		fresh := make([]statEntry, len(w.entries), 2*limit)
		for i := range w.entries {
			fresh[i] = w.entries[i].minus(&w.base)
		}
		w.base, w.entries = statEntry{}, fresh
	}
	e := w.base
	if n := len(w.entries); n > 0 {
		e = w.entries[n-1]
	}
	e.start = r.Start.UnixNano()
	if r.Success {
		e.n++
		e.ttft += r.TTFT.Seconds()
		e.e2e += r.E2E.Seconds()
		e.out += float64(r.OutputTokens)
		if tpot, ok := probe.TPOT(r.TTFT, r.E2E, r.OutputTokens); ok {
			e.tpot += tpot.Seconds()
			e.nTPOT++
		}
		for _, g := range r.ITLs {
			e.itl += g.Seconds()
		}
		e.nITL += len(r.ITLs)
		if !math.IsNaN(r.Load) {
			e.load += r.Load
			e.nLoad++
		}
	}
	w.entries = append(w.entries, e)
}

// probes returns how many probes and successes the window holds.
func (w *statWindow) probes() (probes, successes int) {
	if len(w.entries) == 0 {
		return 0, 0
	}
	return len(w.entries), w.entries[len(w.entries)-1].n - w.base.n
}

// since returns the sums over the probes that started at or after since.
func (w *statWindow) since(since int64) statEntry {
	// Probes of a pair never overlap, so starts ascend.
	i := sort.Search(len(w.entries), func(i int) bool { return w.entries[i].start >= since })
	if i == len(w.entries) {
		return statEntry{}
	}
	before := &w.base
	if i > 0 {
		before = &w.entries[i-1]
	}
	return w.entries[len(w.entries)-1].minus(before)
}

func (w *statWindow) means(since int64) Means {
	s := w.since(since)
	nan := math.NaN()
	div := func(sum float64, n int) float64 {
		if n == 0 {
			return nan
		}
		return sum / float64(n)
	}
	return Means{
		N:    s.n,
		TTFT: div(s.ttft, s.n), E2E: div(s.e2e, s.n), OutputTokens: div(s.out, s.n),
		TPOT: div(s.tpot, s.nTPOT), ITL: div(s.itl, s.nITL), Load: div(s.load, s.nLoad),
		NTPOT: s.nTPOT, NITL: s.nITL, NLoad: s.nLoad,
	}
}

// pairState is what a pair remembers of its probes besides the history.
type pairState struct {
	window                               statWindow
	lastProbe, lastSuccess, failingSince time.Time
	lastReason                           probe.Reason
}

// record books a finished probe that ended at end. The caller serialises.
func (s *pairState) record(r *probe.Result, end time.Time, limit int) {
	s.window.add(r, limit)
	s.lastProbe = end
	if r.Success {
		s.lastSuccess, s.failingSince, s.lastReason = end, time.Time{}, ""
		return
	}
	if s.failingSince.IsZero() {
		s.failingSince = end
	}
	s.lastReason = r.Reason
}

// stats returns p's PairStats at now. m.mu must be held.
func (p *pair) stats(now time.Time) PairStats {
	probes, successes := p.state.window.probes()
	return PairStats{
		Target: p.key.target, Module: p.key.module, Model: pairModel(p),
		Probes: probes, Successes: successes,
		LastProbe: p.state.lastProbe, LastSuccess: p.state.lastSuccess, FailingSince: p.state.failingSince,
		LastReason:  string(p.state.lastReason),
		RecordStats: p.recordStats(now),
		window:      p.state.window,
	}
}

// Stats returns the statistics of the (target, module) pair, false if the
// configuration has no such pair. O(1); it copies no history.
func (m *Manager) Stats(target, module string) (PairStats, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pairs[pairKey{target, module, ""}]
	if !ok {
		return PairStats{}, false
	}
	return p.stats(m.now()), true
}

// AllStats returns the statistics of every pair, sorted by target and module.
// O(pairs); it copies no history.
func (m *Manager) AllStats() []PairStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PairStats, len(m.order))
	now := m.now()
	for i, p := range m.order {
		out[i] = p.stats(now)
	}
	return out
}

// sortPairs rebuilds m.order after the pairs changed. m.mu must be held.
func (m *Manager) sortPairs() {
	m.order = m.order[:0]
	for _, p := range m.pairs {
		m.order = append(m.order, p)
	}
	slices.SortFunc(m.order, func(a, b *pair) int {
		if c := strings.Compare(a.key.target, b.key.target); c != 0 {
			return c
		}
		if c := strings.Compare(a.key.module, b.key.module); c != 0 {
			return c
		}
		return strings.Compare(a.key.model, b.key.model) // models: all
	})
}
