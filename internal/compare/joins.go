package compare

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/prober"
)

// The joins of a baselined target (its expected values and regression
// ratios) are computed when their inputs change, not at every collection:
// a scrape's arrival (Scraped) computes what the target's last scrape and
// its baseline give (the load, the expectation at it, the throughput and
// speculative decoding ratios), a probe's completion (ProbeRecorded) what
// the pair's probe window gives (the per-probe expectations and the
// regression ratios). The collection reads them.
//
// One input changes without an event: time. A pair's values are those of
// the probes in [now−window, now) cut into probeSlices slices, and the
// slices move with now. They depend on now only through which probes fall
// in which slice, and since a slice's sums are two means of one snapshot
// apart and a failed probe adds nothing to them, only through which
// successful probes share a slice. When the snapshot tells its successes'
// starts (prober.PairStats does), the time until which they stay so is
// computed with the values (sliceValidity) and the collection compares
// the time with it; otherwise it compares the successes counted since each
// slice's start with those the values were computed with (sliceCounts).
// Either way the pair is computed again only when a probe left the window
// or two probes now share a slice or no longer do.

// targetJoins holds the joins of one baselined target; SetTargets gives
// every target new, empty ones.
type targetJoins struct {
	server atomic.Pointer[serverJoin]
	pairs  []pairJoins // by module, in the target's order
}

type pairJoins struct {
	p   atomic.Pointer[pairJoin]
	gen atomic.Uint64 // probes recorded (ProbeRecorded) since SetTargets
}

// serverJoin is what a target's last scrape and its baseline give.
type serverJoin struct {
	epoch uint64 // Collector.epoch when computed
	ok    bool   // false: the load or the expectation at it is unknown: no series
	load  float64
	exp   baseline.Expectation
	// throughput is the output_throughput regression ratio (per stream).
	throughput float64
	spec       []specRatio
}

// specRatio is vllm_server_spec_decode_regression_ratio of one model.
type specRatio struct {
	model string
	ratio float64
}

// pairJoin is what a pair's probe window gives, against the baseline, at
// the time its counts were taken.
type pairJoin struct {
	gen  uint64      // pairJoins.gen when w was read
	w    ProbeWindow // the snapshot read; immutable
	load float64     // the target's scraped load it was computed with (the fallback)
	// from and until (Unix ns; until exclusive) bound the times whose
	// slices hold the successes as they were when computed; timed false:
	// unknown, counts tells.
	from, until int64
	timed       bool
	counts      sliceSig
	live        prober.Means
	exp         baseline.Expectation
	ratios      map[baseline.Metric]float64 // read-only once stored
	ok          bool
}

// sliceSig is the successes counted since each slice's start of a window,
// without repeats: what a pair's joins depend on of now.
type sliceSig struct {
	n      int
	counts [probeSlices]int
}

// sliceCounts returns the signature of w's window ending at now: the
// successful probes that started at or after the start of each of its
// probeSlices slices (as probeExpectation cuts it), repeats left out. Two
// times with the same signature have the same probeExpectation: a slice's
// sums are those of the probes between two of these counts, a failed probe
// adds nothing to the sums, and a slice without a success is left out.
func sliceCounts(w ProbeWindow, now time.Time, window time.Duration) sliceSig {
	var sig sliceSig
	since := now.Add(-window)
	step := window / probeSlices
	for k := range probeSlices {
		n := w.Means(since.Add(time.Duration(k) * step)).N
		if n == 0 {
			break // and every later count is 0
		}
		if sig.n == 0 || sig.counts[sig.n-1] != n {
			sig.counts[sig.n] = n
			sig.n++
		}
	}
	return sig
}

// successStarts is a ProbeWindow that tells the starts of its successful
// probes (prober.PairStats).
type successStarts interface {
	SuccessStarts(dst []int64, since time.Time) []int64
}

// sliceValidity returns until when (Unix nanoseconds, exclusive) every
// successful probe of w's window ending at now stays in the window and
// shares its slice with the same others, as probeExpectation cuts the
// window; ok is false when w does not tell its successes' starts. A probe
// moves to the slice before at each of its crossings (a slice's start
// passing it), at most probeSlices times in a window: the grouping is
// compared at each crossing in turn.
func sliceValidity(w ProbeWindow, now time.Time, window time.Duration) (until int64, ok bool) {
	ss, ok := w.(successStarts)
	if !ok {
		return 0, false
	}
	starts := ss.SuccessStarts(nil, now.Add(-window))
	if len(starts) == 0 {
		return math.MaxInt64, true // nothing to leave: only a new probe changes it
	}
	win, step := int64(window), int64(window/probeSlices)
	if step <= 0 {
		return 0, false
	}
	// slice is the slice of a start at t, -1 out of the window, as
	// probeExpectation's since.Add(k*step) boundaries place it.
	slice := func(s, t int64) int64 {
		since := t - win
		if s < since {
			return -1
		}
		return min(probeSlices-1, (s-since)/step)
	}
	t0 := now.UnixNano()
	k0 := make([]int64, len(starts))
	for j, s := range starts {
		k0[j] = slice(s, t0)
	}
	same := func(t int64) bool {
		prev := int64(0)
		for j, s := range starts {
			k := slice(s, t)
			if (k < 0) != (k0[j] < 0) {
				return false
			}
			if j > 0 && (k == prev) != (k0[j] == k0[j-1]) {
				return false
			}
			prev = k
		}
		return true
	}
	// next is the first crossing after t: a start s drops below the
	// boundary k*step after since at s + win − k*step + 1, k < probeSlices.
	next := func(t int64) int64 {
		first := int64(math.MaxInt64)
		for _, s := range starts {
			d := s + win + 1 - t
			if d <= 0 {
				continue // out of the window since t
			}
			k := min((d-1)/step, probeSlices-1) // the last boundary still after s at t
			first = min(first, s+win+1-k*step)
		}
		return first
	}
	for t := next(t0); t != math.MaxInt64; t = next(t) {
		if !same(t) {
			return t, true
		}
	}
	return math.MaxInt64, true // not reached: the last crossing empties the window
}

// valid tells whether pj holds at now with the target's scraped load.
func (pj *pairJoin) valid(now time.Time, window time.Duration, load float64) bool {
	if pj.load != load {
		return false
	}
	if pj.timed {
		t := now.UnixNano()
		return pj.from <= t && t < pj.until
	}
	return pj.counts == sliceCounts(pj.w, now, window)
}

// effectiveWindow is how far back t's probe means reach.
func (c *Collector) effectiveWindow(t *target) time.Duration {
	if c.window > 0 {
		return c.window
	}
	return t.window
}

// computeServer computes t's serverJoin from the server's latest scrape.
func (c *Collector) computeServer(server ServerSource, l *loaded, t *target, epoch uint64) *serverJoin {
	c.computations.Add(1)
	sj := &serverJoin{epoch: epoch, throughput: math.NaN()}
	running, waiting, ok := server.Load(t.name)
	if !ok {
		return sj
	}
	sj.load = running + waiting + 1
	sj.exp, sj.ok = l.curve.Expected(sj.load)
	if !sj.ok {
		return sj
	}
	// Throughput is compared per stream: a benchmark at concurrency c gives
	// each request output_throughput/c tokens per second of its lifetime,
	// which is what the server's request histograms measure live. Comparing
	// the server's total tokens/s instead would call every lightly loaded
	// server a regression.
	if live, ok := server.StreamOutputTokensPerSecond(t.name); ok {
		sj.throughput = baseline.RegressionRatio(baseline.MetricOutputThroughput, live, sj.exp.OutputThroughput/sj.load)
	}
	sj.spec = specDecodeRatios(server, t.name, l)
	return sj
}

// computePair computes the joins of t's module i from the snapshot w.
func (c *Collector) computePair(l *loaded, t *target, i int, w ProbeWindow, gen uint64, now time.Time, load float64) *pairJoin {
	c.computations.Add(1)
	window := c.effectiveWindow(t)
	pj := &pairJoin{gen: gen, w: w, load: load, from: now.UnixNano()}
	if pj.until, pj.timed = sliceValidity(w, now, window); !pj.timed {
		pj.counts = sliceCounts(w, now, window)
	}
	pj.live, pj.exp, pj.ratios, pj.ok = probeExpectation(snapshotSource{w}, l.curve, t.name, t.modules[i], now, window, load)
	return pj
}

// snapshotSource hands probeExpectation a snapshot already read.
type snapshotSource struct{ w ProbeWindow }

func (s snapshotSource) Window(string, string) ProbeWindow { return s.w }

// serverJoinOf returns t's serverJoin: the one the last scrape computed,
// else (none yet, or the collector's targets changed since) one computed
// now and kept.
func (c *Collector) serverJoinOf(st *state, server ServerSource, t *target) *serverJoin {
	epoch := c.epoch.Load()
	if !c.pushed {
		return c.computeServer(server, st.byName[t.baseline], t, epoch)
	}
	old := t.joins.server.Load()
	if old != nil && old.epoch == epoch {
		return old
	}
	sj := c.computeServer(server, st.byName[t.baseline], t, epoch)
	t.joins.server.CompareAndSwap(old, sj)
	return sj
}

// pairJoinOf returns the joins of t's module i at now: the stored ones
// while the probes' slices and the scraped load are those they were
// computed with, else computed now (from the stored snapshot, or from a
// new one when none is stored) and kept.
func (c *Collector) pairJoinOf(st *state, t *target, i int, sj *serverJoin, now time.Time) *pairJoin {
	l := st.byName[t.baseline]
	if !c.pushed {
		return c.computePair(l, t, i, c.probes.Window(t.name, t.modules[i]), 0, now, sj.load)
	}
	pjs := &t.joins.pairs[i]
	old := pjs.p.Load()
	if old == nil {
		gen := pjs.gen.Load()
		pj := c.computePair(l, t, i, c.probes.Window(t.name, t.modules[i]), gen, now, sj.load)
		pjs.p.CompareAndSwap(nil, pj)
		return pj
	}
	if old.valid(now, c.effectiveWindow(t), sj.load) {
		return old
	}
	pj := c.computePair(l, t, i, old.w, old.gen, now, sj.load)
	pjs.p.CompareAndSwap(old, pj)
	return pj
}

// storePair keeps pj unless a later probe's joins are kept already.
func (pjs *pairJoins) storePair(pj *pairJoin) {
	for {
		old := pjs.p.Load()
		if old != nil && old.gen > pj.gen {
			return
		}
		if pjs.p.CompareAndSwap(old, pj) {
			return
		}
	}
}

// lookup returns the baselined target name of st, nil if none.
func (st *state) lookup(name string) *target {
	if i, ok := st.targetIndex[name]; ok {
		return &st.targets[i]
	}
	return nil
}

// ProbeRecorded computes the joins of the pair (target, module) after one
// of its probes was recorded: the prober calls it (without its lock held)
// once the pair's statistics hold the probe. A pair without a baseline is
// ignored.
func (c *Collector) ProbeRecorded(target, module string) {
	c.mu.RLock()
	st, server := c.state, c.server
	c.mu.RUnlock()
	t := st.lookup(target)
	if t == nil || !c.pushed || c.probes == nil || server == nil {
		return
	}
	for i, mod := range t.modules {
		if mod != module {
			continue
		}
		pjs := &t.joins.pairs[i]
		// The window read after this generation holds every probe whose
		// generation is not later: the one kept is that of the latest.
		gen := pjs.gen.Add(1)
		w := c.probes.Window(target, module)
		sj := c.serverJoinOf(st, server, t)
		pjs.storePair(c.computePair(st.byName[t.baseline], t, i, w, gen, c.now(), sj.load))
	}
}

// Scraped computes the joins of target after one of its scrapes ended
// (successful or not): the collector calls it (without its lock held) once
// the target's state holds the scrape. A target without a baseline is
// ignored.
func (c *Collector) Scraped(target string) {
	c.mu.RLock()
	st, server := c.state, c.server
	c.mu.RUnlock()
	t := st.lookup(target)
	if t == nil || !c.pushed || server == nil {
		return
	}
	epoch := c.epoch.Load()
	sj := c.computeServer(server, st.byName[t.baseline], t, epoch)
	t.joins.server.Store(sj)
	if !sj.ok || c.probes == nil {
		return
	}
	// The pairs' expectations fall back on the scraped load while no probe
	// of their window knew its own.
	now := c.now()
	for i := range t.joins.pairs {
		pjs := &t.joins.pairs[i]
		if old := pjs.p.Load(); old != nil && old.load != sj.load {
			pjs.p.CompareAndSwap(old, c.computePair(st.byName[t.baseline], t, i, old.w, old.gen, now, sj.load))
		}
	}
}

// ServersChanged tells the Collector that the collector's targets changed
// (collector.Manager.SetTargets ran): every target's scrape-side joins are
// computed again at their next read.
func (c *Collector) ServersChanged() { c.epoch.Add(1) }

// Computations is how many joins (a target's scrape side, a pair's probe
// side) were computed since New: a collection while nothing changed adds
// none.
func (c *Collector) Computations() uint64 { return c.computations.Load() }
