package baseline

import (
	"fmt"
	"math"
	"sort"

	"github.com/vllm-prober/vllm_prober/config"
)

// Metric names a compared quantity, as used in the regression-ratio series' metric label.
type Metric string

// The metrics Expected interpolates and RegressionRatio compares.
const (
	MetricTTFT             Metric = "ttft"
	MetricTPOT             Metric = "tpot"
	MetricITL              Metric = "itl"
	MetricE2E              Metric = "e2e"
	MetricOutputThroughput Metric = "output_throughput"
)

// Metrics lists every Metric in a fixed order.
var Metrics = []Metric{MetricTTFT, MetricTPOT, MetricITL, MetricE2E, MetricOutputThroughput}

// HigherIsWorse reports whether a larger value of m is a regression (true for latencies).
func (m Metric) HigherIsWorse() bool { return m != MetricOutputThroughput }

// Expectation holds the values expected at one concurrency. Latencies are in seconds,
// OutputThroughput in tokens/s. A value the baseline has no data for is NaN.
type Expectation struct {
	// Concurrency is the load the expectation was computed for.
	Concurrency float64

	TTFTMean, TTFTP99 float64
	TPOTMean, TPOTP99 float64
	ITLMean, ITLP99   float64
	E2EMean, E2EP99   float64
	OutputThroughput  float64
	// SLOAttainment is the share of requests the baseline had meet every goodput objective at
	// this load (0..1), against the objectives of Curve.GoodputObjectives; NaN when the baseline
	// has no attainment or its points do not share one set of known objectives.
	SLOAttainment float64
}

// Mean returns the expected mean of a latency metric, or the output throughput for
// MetricOutputThroughput; NaN when unknown.
func (e Expectation) Mean(m Metric) float64 {
	switch m {
	case MetricTTFT:
		return e.TTFTMean
	case MetricTPOT:
		return e.TPOTMean
	case MetricITL:
		return e.ITLMean
	case MetricE2E:
		return e.E2EMean
	case MetricOutputThroughput:
		return e.OutputThroughput
	}
	return math.NaN()
}

// curvePoint is a point placed on the concurrency axis.
type curvePoint struct {
	c float64
	p *Point
}

// PlacementProblem explains why none of b's usable points can be placed on the concurrency axis
// (so Expected never gives a value and the daemon exports the points but no expected values or
// regression ratios), or returns "" when at least one can. A point is placed by its concurrency,
// or by Little's law from its request throughput and mean E2E (or TTFT + TPOT × tokens).
func (b *Baseline) PlacementProblem() string {
	usable := 0
	for i := range b.Points {
		p := &b.Points[i]
		if !p.Usable() {
			continue
		}
		usable++
		if _, ok := p.effectiveConcurrency(); ok {
			return ""
		}
	}
	if usable == 0 {
		return "" // CheckUsable's refusal says more
	}
	return fmt.Sprintf("none of its %d usable points can be placed on the concurrency axis (no finite concurrency, and no "+
		"request throughput with a mean E2E, or TTFT and TPOT and output throughput, for Little's law): its points are "+
		"exported, but no expected values or regression ratios", usable)
}

// effectiveConcurrency returns the concurrency a point represents: its concurrency key, or for a
// request-rate-keyed point Little's law L = λ·W with λ = request_throughput and W = mean E2E
// latency (W estimated as TTFT + TPOT·(tokens per request − 1) when the tool did not report E2E).
func (p *Point) effectiveConcurrency() (float64, bool) {
	if p.Concurrency != nil {
		c := float64(*p.Concurrency)
		return c, !math.IsInf(c, 0)
	}
	if p.RequestThroughput == nil || *p.RequestThroughput <= 0 {
		return 0, false
	}
	w, ok := p.meanE2E()
	if !ok || w <= 0 {
		return 0, false
	}
	return *p.RequestThroughput * w, true
}

// meanE2E returns the mean E2E latency, reported or estimated from TTFT, TPOT and tokens per request.
func (p *Point) meanE2E() (float64, bool) {
	if w, ok := p.E2E.MeanValue(); ok {
		return w, true
	}
	ttft, ok1 := p.TTFT.MeanValue()
	tpot, ok2 := p.TPOT.MeanValue()
	if !ok1 || !ok2 || p.OutputThroughput == nil || p.RequestThroughput == nil || *p.RequestThroughput <= 0 {
		return 0, false
	}
	n := *p.OutputThroughput / *p.RequestThroughput
	if n < 1 {
		return ttft, true
	}
	return ttft + tpot*(n-1), true
}

// curve returns the usable points sorted by concurrency: all-failed and excluded points and points
// that cannot be placed on the concurrency axis are left out.
func (b *Baseline) curve() []curvePoint {
	var cps []curvePoint
	for i := range b.Points {
		p := &b.Points[i]
		if !p.Usable() {
			continue
		}
		if c, ok := p.effectiveConcurrency(); ok && c > 0 {
			cps = append(cps, curvePoint{c: c, p: p})
		}
	}
	sort.SliceStable(cps, func(i, j int) bool { return cps[i].c < cps[j].c })
	return cps
}

// xy is one value of a curve at a concurrency.
type xy struct{ x, y float64 }

// The values a Curve interpolates, in the order of Curve.values.
const (
	cTTFTMean = iota
	cTTFTP99
	cTPOTMean
	cTPOTP99
	cITLMean
	cITLP99
	cE2EMean
	cE2EP99
	cOutputThroughput
	cSLOAttainment
	numCurveValues
)

// Curve is a baseline placed on the concurrency axis once, for interpolation: for each value, the
// usable points that report it, sorted by concurrency, with points at equal concurrency averaged.
// Build it with Baseline.Curve when the baseline is loaded; Expected then sorts and allocates
// nothing. A Curve does not follow later changes to the baseline's points.
type Curve struct {
	placed bool // some usable point could be placed on the concurrency axis
	values [numCurveValues][]xy
	// goodput are the objectives of the attainment values (Baseline.GoodputObjectives);
	// hasGoodput false leaves the attainment out.
	goodput    config.Objectives
	hasGoodput bool
}

// GoodputObjectives are the objectives Expected's SLOAttainment was measured against; false
// when the curve gives no attainment.
func (c *Curve) GoodputObjectives() (config.Objectives, bool) {
	return c.goodput, c.hasGoodput
}

// Curve builds b's interpolation curve (see Expected).
func (b *Baseline) Curve() *Curve {
	cps := b.curve()
	c := &Curve{placed: len(cps) > 0}
	// TTFT, TPOT, ITL and E2E: mean then p99 of each, in the order of the constants above.
	for i, get := range []func(*Point) *Stats{
		func(p *Point) *Stats { return p.TTFT },
		func(p *Point) *Stats { return p.TPOT },
		func(p *Point) *Stats { return p.ITL },
		func(p *Point) *Stats { return p.E2E },
	} {
		c.values[cTTFTMean+2*i] = values(cps, func(p *Point) (float64, bool) { return get(p).MeanValue() })
		c.values[cTTFTP99+2*i] = values(cps, func(p *Point) (float64, bool) { return get(p).P99() })
	}
	c.values[cOutputThroughput] = values(cps, func(p *Point) (float64, bool) {
		if p.OutputThroughput == nil {
			return 0, false
		}
		return *p.OutputThroughput, true
	})
	// The attainment only where every point that has one shares known objectives: a curve
	// through attainments against two definitions of "good" means nothing.
	if c.goodput, c.hasGoodput = b.GoodputObjectives(); c.hasGoodput {
		c.values[cSLOAttainment] = values(cps, func(p *Point) (float64, bool) {
			if p.SLOAttainment == nil {
				return 0, false
			}
			return *p.SLOAttainment, true
		})
	}
	return c
}

// Expected interpolates the baseline at the given concurrency. For each value it takes the points
// that report it, sorted by concurrency, and interpolates linearly between the two neighbours of
// load; below the first or above the last point it returns that end point's value (clamping).
// Points at equal concurrency are averaged. It returns false when no point can be placed on the
// concurrency axis (see effectiveConcurrency) or load is not a positive finite number.
// It builds the curve at each call: a caller that interpolates repeatedly keeps b.Curve().
func (b *Baseline) Expected(load float64) (Expectation, bool) {
	return b.Curve().Expected(load)
}

// Expected is Baseline.Expected on the curve built once.
func (c *Curve) Expected(load float64) (Expectation, bool) {
	nan := math.NaN()
	e := Expectation{Concurrency: load, TTFTMean: nan, TTFTP99: nan, TPOTMean: nan, TPOTP99: nan,
		ITLMean: nan, ITLP99: nan, E2EMean: nan, E2EP99: nan, OutputThroughput: nan, SLOAttainment: nan}
	if !(load > 0) || math.IsInf(load, 0) || !c.placed {
		return e, false
	}
	e.TTFTMean = interpolate(c.values[cTTFTMean], load)
	e.TTFTP99 = interpolate(c.values[cTTFTP99], load)
	e.TPOTMean = interpolate(c.values[cTPOTMean], load)
	e.TPOTP99 = interpolate(c.values[cTPOTP99], load)
	e.ITLMean = interpolate(c.values[cITLMean], load)
	e.ITLP99 = interpolate(c.values[cITLP99], load)
	e.E2EMean = interpolate(c.values[cE2EMean], load)
	e.E2EP99 = interpolate(c.values[cE2EP99], load)
	e.OutputThroughput = interpolate(c.values[cOutputThroughput], load)
	e.SLOAttainment = interpolate(c.values[cSLOAttainment], load)
	return e, true
}

// values returns the points of cps that have a value, averaging points at equal concurrency.
func values(cps []curvePoint, get func(*Point) (float64, bool)) []xy {
	var pts []xy
	n := 0 // points merged into the last element (for averaging ties)
	for _, cp := range cps {
		y, ok := get(cp.p)
		if !ok || math.IsNaN(y) {
			continue
		}
		if len(pts) > 0 && pts[len(pts)-1].x == cp.c {
			last := &pts[len(pts)-1]
			last.y = (last.y*float64(n) + y) / float64(n+1)
			n++
			continue
		}
		pts = append(pts, xy{cp.c, y})
		n = 1
	}
	return pts
}

// interpolate is piecewise-linear interpolation with clamping over pts (sorted by x).
func interpolate(pts []xy, x float64) float64 {
	switch {
	case len(pts) == 0:
		return math.NaN()
	case x <= pts[0].x:
		return pts[0].y
	case x >= pts[len(pts)-1].x:
		return pts[len(pts)-1].y
	}
	i := sort.Search(len(pts), func(i int) bool { return pts[i].x >= x })
	lo, hi := pts[i-1], pts[i]
	return lo.y + (x-lo.x)/(hi.x-lo.x)*(hi.y-lo.y)
}

// RegressionRatio compares a live value with the expected one so that a result above 1 is worse
// than the baseline: live/expected for latencies, expected/live for throughput. It returns NaN
// when either value is not a positive finite number (no data, or no traffic to compare).
func RegressionRatio(m Metric, live, expected float64) float64 {
	if !(live > 0) || !(expected > 0) || math.IsInf(live, 0) || math.IsInf(expected, 0) {
		return math.NaN()
	}
	if m.HigherIsWorse() {
		return live / expected
	}
	return expected / live
}
