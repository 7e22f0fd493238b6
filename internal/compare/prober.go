package compare

import (
	"time"

	"github.com/vllm-prober/vllm_prober/prober"
)

// StatsSource is the part of *prober.Manager that FromProber reads.
type StatsSource interface {
	Stats(target, module string) (prober.PairStats, bool)
	Model(target string) string
	MeanTTFT(target string, since time.Time) (seconds float64, n int)
}

// FromProber adapts the prober's Manager to a ProbeSource. Window reads the
// pair's statistics once, which the prober keeps incrementally: O(1) per
// (target, module) and scrape, with no copy of the history (the daemon's
// --history.limit bounds how many probes the means reach back); its
// Means read that copy without the Manager's lock.
func FromProber(s StatsSource) ProbeSource { return proberSource{s} }

type proberSource struct{ s StatsSource }

func (p proberSource) Model(target string) string { return p.s.Model(target) }

func (p proberSource) MeanTTFT(target string, since time.Time) (float64, int) {
	return p.s.MeanTTFT(target, since)
}

func (p proberSource) Window(target, module string) ProbeWindow {
	st, _ := p.s.Stats(target, module) // an unknown pair has no probes: every mean NaN
	return st
}
