package regression

import (
	"math"
	"time"

	"github.com/vllm-prober/vllm_prober/baseline"
)

// probeSlices is how many slices probeExpectation cuts a pair's window
// into. A slice usually holds at most one probe (the window is the larger of
// the rate window and three probe intervals), so each probe is compared with
// the baseline at its own load.
const probeSlices = 16

// probeExpectation is the baseline's expectation for the probes of (target,
// module) that started in [now−window, now), each compared at the load it
// saw when it started (ProbeMeans.Load: running + waiting + 1), not at the
// load of the moment: a probe that queued behind a burst is compared with
// the baseline at the burst's load, and an idle probe with the idle
// expectation, even when both are in one window.
//
// The window is cut into probeSlices slices; the sums of each slice are two
// ProbeSource means apart. The expectation of a metric is the mean over the
// window's probes of the baseline's value at each slice's mean load, weighted
// by the slice's probes, which is the quantity the probes' mean is to be
// compared with. A slice whose probes did not know their load uses
// fallbackLoad (the latest scraped load). ok is false when no probe of the
// window has an expectation.
func probeExpectation(src ProbeSource, b *baseline.Baseline, target, module string, now time.Time, window time.Duration, fallbackLoad float64) (live ProbeMeans, exp baseline.Expectation, ok bool) {
	since := now.Add(-window)
	live = src.MeanStats(target, module, since)
	nan := math.NaN()
	exp = baseline.Expectation{Concurrency: nan, TTFTMean: nan, TPOTMean: nan, ITLMean: nan, E2EMean: nan,
		TTFTP99: nan, TPOTP99: nan, ITLP99: nan, E2EP99: nan, OutputThroughput: nan}
	if live.N == 0 {
		return live, exp, false
	}
	// sums is what the probes since t add up to.
	type sums struct{ n, load, out float64 }
	at := func(t time.Time) sums {
		m := src.MeanStats(target, module, t)
		if m.N == 0 {
			return sums{}
		}
		s := sums{n: float64(m.N), load: nan, out: nan}
		if !math.IsNaN(m.Load) {
			s.load = m.Load * float64(m.N)
		}
		if !math.IsNaN(m.OutputTokens) {
			s.out = m.OutputTokens * float64(m.N)
		}
		return s
	}
	var wsum, load, ttft, tpot, itl, e2e weighted
	step := window / probeSlices
	cur := at(since)
	for k := 1; k <= probeSlices && cur.n > 0; k++ {
		next := sums{}
		if k < probeSlices {
			next = at(since.Add(time.Duration(k) * step))
		}
		n := cur.n - next.n
		if n > 0.5 {
			l := (cur.load - next.load) / n
			if math.IsNaN(l) || !(l > 0) {
				l = fallbackLoad
			}
			if e, eok := b.Expected(l); eok {
				wsum.add(1, n)
				load.add(l, n)
				ttft.add(e.TTFTMean, n)
				tpot.add(e.TPOTMean, n)
				itl.add(e.ITLMean, n)
				if out := (cur.out - next.out) / n; out >= 1 {
					e2e.add(e.TTFTMean+e.TPOTMean*(out-1), n)
				}
			}
		}
		cur = next
	}
	if wsum.n == 0 {
		return live, exp, false
	}
	exp.Concurrency, exp.TTFTMean, exp.TPOTMean, exp.ITLMean, exp.E2EMean = load.mean(), ttft.mean(), tpot.mean(), itl.mean(), e2e.mean()
	return live, exp, true
}

// weighted is a weighted mean that skips NaN values.
type weighted struct{ sum, n float64 }

func (w *weighted) add(v, n float64) {
	if !math.IsNaN(v) {
		w.sum += v * n
		w.n += n
	}
}

func (w *weighted) mean() float64 {
	if w.n == 0 {
		return math.NaN()
	}
	return w.sum / w.n
}
