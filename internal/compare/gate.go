package compare

import (
	"math"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/prober"
)

// WindowComparison is CompareWindow's result: the probes of a window
// against the target's baseline.
type WindowComparison struct {
	Baseline string
	// Live are the means of the window's probes that have an expectation,
	// Expected the baseline's at the loads they met (E2E for their length).
	Live, Expected prober.Means
	// Ratios are vllm_probe_regression_ratio's per-probe median ratios,
	// by metric, over the window.
	Ratios map[baseline.Metric]float64
}

// CompareWindow compares the probes of (target, module) that started in
// the last window with the target's baseline, each at the load it met, as the
// regression series do over their own window. hasBaseline is false when the
// target has no baseline; ok is false when no probe of the window could be
// compared (none succeeded, or none has an expectation).
func (c *Collector) CompareWindow(target, module string, window time.Duration) (cmp WindowComparison, hasBaseline, ok bool) {
	c.mu.RLock()
	st, server := c.state, c.server
	c.mu.RUnlock()
	l, found := st.byTarget[target]
	if !found || c.probes == nil {
		return cmp, false, false
	}
	cmp.Baseline = l.name
	fallback := 1.0 // an idle target's load, while nothing was scraped
	if server != nil {
		if running, waiting, lok := server.Load(target); lok {
			fallback = running + waiting + 1
		}
	}
	live, exp, ratios, pok := probeExpectation(c.probes, l.curve, target, module, c.now(), window, fallback)
	if !pok {
		nan := math.NaN()
		cmp.Live = prober.Means{TTFT: nan, TPOT: nan, ITL: nan, E2E: nan, OutputTokens: nan, Load: nan}
		cmp.Expected = cmp.Live
		return cmp, true, false
	}
	cmp.Live = live
	cmp.Expected = prober.Means{TTFT: exp.TTFTMean, TPOT: exp.TPOTMean, ITL: exp.ITLMean, E2E: exp.E2EMean, Load: exp.Concurrency}
	cmp.Ratios = ratios
	return cmp, true, true
}
