package compare

import (
	"math"
	"slices"

	"github.com/vllm-prober/vllm_prober/prober"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
)

// Comparison is one (target, module)'s live probe means against its
// baseline's expectation: what the landing page and the debug report show
// next to vllm_probe_regression_ratio, computed the same way.
type Comparison struct {
	Baseline string  // configuration name of the target's baseline
	Load     float64 // the latest scraped running + waiting + 1
	// Expected is the baseline at the loads the window's probes saw (at
	// Load while no probe of the window succeeded).
	Expected baseline.Expectation
	Live     prober.Means
	// TTFT and TPOT are the regression ratios (vllm_probe_regression_ratio:
	// the median of the window's per-probe live / expected; above 1 is
	// worse), NaN when unknown.
	TTFT, TPOT float64
	// Goodput is the attainment the baseline expects
	// (vllm_probe_expected_goodput_ratio), NaN when not exported, and then
	// GoodputWhy says why (e.g. the objectives differ).
	Goodput    float64
	GoodputWhy string
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
	exp, ok := l.curve.Expected(load)
	if !ok {
		return Comparison{}, false
	}
	window := fixed
	for _, t := range st.targets {
		if t.name == target && fixed == 0 {
			window = t.window
		}
	}
	live, pexp, ratios, pok := probeExpectation(c.probes, l.curve, target, module, c.now(), window, load)
	if !pok {
		pexp = exp
	}
	g, why := math.NaN(), "the target does not probe this module"
	if t := st.lookup(target); t != nil {
		if i := slices.Index(t.modules, module); i >= 0 {
			if why = t.goodput[i]; why == "" {
				if g = pexp.SLOAttainment; math.IsNaN(g) {
					why = "no expectation at the probes' load"
				}
			}
		}
	}
	return Comparison{Baseline: l.name, Load: load, Expected: pexp, Live: live,
		TTFT:    latencyRatio(baseline.MetricTTFT, ratios, live, pok),
		TPOT:    latencyRatio(baseline.MetricTPOT, ratios, live, pok),
		Goodput: g, GoodputWhy: why}, true
}

// latencyRatio is vllm_probe_regression_ratio of a latency metric, from the
// window's per-probe ratios (probeExpectation): NaN without successful probes
// or an expectation at their loads.
func latencyRatio(m baseline.Metric, ratios map[baseline.Metric]float64, live prober.Means, ok bool) float64 {
	if v, found := ratios[m]; found && live.N > 0 && ok {
		return v
	}
	return math.NaN()
}
