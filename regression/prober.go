package regression

import (
	"time"

	"github.com/vllm-prober/vllm_prober/prober"
)

// StatsSource is the part of *prober.Manager that FromProber reads.
type StatsSource interface {
	Stats(target, module string) (prober.PairStats, bool)
	Model(target string) string
}

// FromProber adapts the prober's Manager to a ProbeSource. Window reads the
// pair's statistics once, which the prober keeps incrementally: O(1) per
// (target, module) and scrape, with no copy of the history (the daemon's
// --history.limit bounds how many probes the means reach back); its
// MeanStats read that copy without the Manager's lock.
func FromProber(s StatsSource) ProbeSource { return proberSource{s} }

type proberSource struct{ s StatsSource }

func (p proberSource) Model(target string) string { return p.s.Model(target) }

func (p proberSource) Window(target, module string) ProbeWindow {
	st, _ := p.s.Stats(target, module) // an unknown pair has no probes: every mean NaN
	return pairWindow{st}
}

type pairWindow struct{ st prober.PairStats }

func (w pairWindow) MeanStats(since time.Time) ProbeMeans {
	m := w.st.Means(since)
	return ProbeMeans{TTFT: m.TTFT, TPOT: m.TPOT, ITL: m.ITL, E2E: m.E2E,
		OutputTokens: m.OutputTokens, Load: m.Load, N: m.N, NTPOT: m.NTPOT, NITL: m.NITL, NLoad: m.NLoad}
}
