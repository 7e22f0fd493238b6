package compare

import (
	"math"
	"sort"
	"time"

	"github.com/vllm-prober/vllm_prober/prober"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
)

// probeSlices is how many slices probeExpectation cuts a pair's window
// into. A slice usually holds at most one probe (the window is the larger of
// the rate window and three probe intervals), so each probe is compared with
// the baseline at its own load.
const probeSlices = 16

// probeExpectation is the baseline's expectation for the probes of (target,
// module) that started in [now−window, now), each compared at the load it
// met over its lifetime (prober.Means.Load: running + waiting + 1, the mean of
// the scrape it started into and the scrapes during it), not at the load of
// the moment: a probe that queued behind a burst is compared with
// the baseline at the burst's load, and an idle probe with the idle
// expectation, even when both are in one window.
//
// The window is cut into probeSlices slices; the sums of each slice are two
// means of one snapshot of the pair (ProbeSource.Window) apart, each mean
// turned back into its sum with the count it is a mean over: a probe without
// a known load, or with another number of tokens, does not lend its
// neighbours its values. exp holds means over the same probes as live: the
// baseline's value at each slice's mean load, weighted by the slice's
// probes. ratios holds, per latency metric, the median over the slices of
// the slice's regression ratio: one probe misjudged (one that started in the
// instant between a burst's arrival and the scrape that saw it) cannot move
// it, while a regression of the server moves every slice. Probes that did not know their load are
// left out when others did; when none did, fallbackLoad (the latest scraped
// load) stands in. ok is false when no probe of the window has an
// expectation.
func probeExpectation(src interface {
	Window(target, module string) ProbeWindow
}, b *baseline.Curve, target, module string, now time.Time, window time.Duration, fallbackLoad float64) (live prober.Means, exp baseline.Expectation, ratios map[baseline.Metric]float64, ok bool) {
	since := now.Add(-window)
	w := src.Window(target, module)
	all := w.Means(since)
	nan := math.NaN()
	exp = baseline.Expectation{Concurrency: nan, TTFTMean: nan, TPOTMean: nan, ITLMean: nan, E2EMean: nan,
		TTFTP99: nan, TPOTP99: nan, ITLP99: nan, E2EP99: nan, OutputThroughput: nan, SLOAttainment: nan}
	if all.N == 0 {
		return all, exp, nil, false
	}
	// sums is what the probes since some time add up to: each mean times
	// the count it is a mean over.
	type sums struct {
		n, nTPOT, nITL, nLoad           float64
		load, out, ttft, tpot, itl, e2e float64
	}
	at := func(t time.Time) sums {
		m := w.Means(t)
		if m.N == 0 {
			return sums{}
		}
		n := float64(m.N)
		s := sums{n: n, out: m.OutputTokens * n, ttft: m.TTFT * n, e2e: m.E2E * n}
		if m.NTPOT > 0 {
			s.nTPOT, s.tpot = float64(m.NTPOT), m.TPOT*float64(m.NTPOT)
		}
		if m.NITL > 0 {
			s.nITL, s.itl = float64(m.NITL), m.ITL*float64(m.NITL)
		}
		if m.NLoad > 0 {
			s.nLoad, s.load = float64(m.NLoad), m.Load*float64(m.NLoad)
		}
		return s
	}
	// mean is the mean of the probes between two sums (NaN when none has
	// the value).
	mean := func(a, b, na, nb float64) float64 {
		if k := na - nb; k > 0.5 {
			return (a - b) / k
		}
		return math.NaN()
	}
	type slice struct {
		n, load, out, ttft, tpot, itl, e2e float64 // means over the slice's probes
	}
	var slices []slice
	step := window / probeSlices
	cur := at(since)
	for k := 1; k <= probeSlices && cur.n > 0; k++ {
		next := sums{}
		if k < probeSlices {
			next = at(since.Add(time.Duration(k) * step))
		}
		if n := cur.n - next.n; n > 0.5 {
			slices = append(slices, slice{n: n, load: mean(cur.load, next.load, cur.nLoad, next.nLoad),
				out: mean(cur.out, next.out, cur.n, next.n), ttft: mean(cur.ttft, next.ttft, cur.n, next.n),
				tpot: mean(cur.tpot, next.tpot, cur.nTPOT, next.nTPOT), itl: mean(cur.itl, next.itl, cur.nITL, next.nITL),
				e2e: mean(cur.e2e, next.e2e, cur.n, next.n)})
		}
		cur = next
	}
	// Probes that did not know their load (the scrape before them failed)
	// are left out while others did: comparing them at the load of the
	// moment is what made a burst read 13 times better or worse. Only when
	// no probe of the window knew its load is the latest scraped load used.
	known := false
	for _, sl := range slices {
		known = known || sl.load > 0
	}
	var n, load, ttft, tpot, itl, e2e, att, lTTFT, lTPOT, lITL, lE2E, lOut weighted
	perSlice := map[baseline.Metric][]float64{}
	for _, sl := range slices {
		l := sl.load
		if !(l > 0) {
			if known {
				continue
			}
			l = fallbackLoad
		}
		e, eok := b.Expected(l)
		if !eok {
			continue
		}
		n.add(1, sl.n)
		load.add(l, sl.n)
		lOut.add(sl.out, sl.n)
		att.add(e.SLOAttainment, sl.n) // NaN (skipped) without a goodput curve
		both := func(m baseline.Metric, exp, lv *weighted, e, v float64) {
			if !math.IsNaN(e) && !math.IsNaN(v) {
				exp.add(e, sl.n)
				lv.add(v, sl.n)
				perSlice[m] = append(perSlice[m], baseline.RegressionRatio(m, v, e))
			}
		}
		both(baseline.MetricTTFT, &ttft, &lTTFT, e.TTFTMean, sl.ttft)
		both(baseline.MetricTPOT, &tpot, &lTPOT, e.TPOTMean, sl.tpot)
		both(baseline.MetricITL, &itl, &lITL, e.ITLMean, sl.itl)
		if sl.out >= 1 {
			both(baseline.MetricE2E, &e2e, &lE2E, e.TTFTMean+e.TPOTMean*(sl.out-1), sl.e2e)
		}
	}
	if n.n == 0 {
		return all, exp, nil, false
	}
	live = prober.Means{TTFT: lTTFT.mean(), TPOT: lTPOT.mean(), ITL: lITL.mean(), E2E: lE2E.mean(),
		OutputTokens: lOut.mean(), Load: load.mean(), N: int(math.Round(n.n))}
	exp.Concurrency, exp.TTFTMean, exp.TPOTMean, exp.ITLMean, exp.E2EMean = load.mean(), ttft.mean(), tpot.mean(), itl.mean(), e2e.mean()
	exp.SLOAttainment = att.mean()
	ratios = map[baseline.Metric]float64{}
	for m, rs := range perSlice {
		ratios[m] = median(rs)
	}
	return live, exp, ratios, true
}

// median of rs (not empty), which it sorts; NaN values sort first and are
// left out.
func median(rs []float64) float64 {
	sort.Float64s(rs)
	for len(rs) > 0 && math.IsNaN(rs[0]) {
		rs = rs[1:]
	}
	if len(rs) == 0 {
		return math.NaN()
	}
	if k := len(rs); k%2 == 1 {
		return rs[k/2]
	} else {
		return (rs[k/2-1] + rs[k/2]) / 2
	}
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
