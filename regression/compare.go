package regression

import (
	"math"

	"github.com/vllm-prober/vllm_prober/baseline"
)

// Comparison is one (target, module)'s live probe means against its
// baseline's expectation at the target's current load: what the landing
// page and the debug report show next to vllm_probe_regression_ratio.
type Comparison struct {
	Baseline string  // configuration name of the target's baseline
	Load     float64 // running + waiting + 1
	Expected baseline.Expectation
	Live     ProbeMeans
	// TTFT and TPOT are the regression ratios (live / expected; above 1 is
	// worse), NaN when unknown.
	TTFT, TPOT float64
}

// Compare returns the comparison of (target, module) now; false when the
// target has no baseline, or its load or the baseline's expectation at that
// load is unknown.
func (c *Collector) Compare(target, module string) (Comparison, bool) {
	c.mu.RLock()
	st, fixed, server := c.state, c.window, c.server
	c.mu.RUnlock()
	l, ok := st.byTarget[target]
	if !ok || server == nil || c.probes == nil {
		return Comparison{}, false
	}
	running, waiting, ok := server.Load(target)
	if !ok {
		return Comparison{}, false
	}
	load := running + waiting + 1
	exp, ok := l.b.Expected(load)
	if !ok {
		return Comparison{}, false
	}
	window := fixed
	for _, t := range st.targets {
		if t.name == target && fixed == 0 {
			window = t.window
		}
	}
	live := c.probes.MeanStats(target, module, c.now().Add(-window))
	return Comparison{Baseline: l.name, Load: load, Expected: exp, Live: live,
		TTFT: latencyRatio(baseline.MetricTTFT, exp, live),
		TPOT: latencyRatio(baseline.MetricTPOT, exp, live)}, true
}

// latencyRatio is vllm_probe_regression_ratio of a latency metric: NaN
// without successful probes.
func latencyRatio(m baseline.Metric, exp baseline.Expectation, live ProbeMeans) float64 {
	if live.N == 0 {
		return math.NaN()
	}
	return baseline.RegressionRatio(m, live.Mean(m), expectedFor(m, exp, live))
}
