package regression

import (
	"math"
	"time"

	"github.com/vllm-prober/vllm_prober/prober"
)

// StatusSource is the part of *prober.Manager that FromProber reads.
type StatusSource interface {
	// Successes returns the kept successful results of (target, module) that
	// started at or after since, without headers.
	Successes(target, module string, since time.Time) []prober.Result
	Model(target string) string
}

// FromProber adapts the prober's Manager to a ProbeSource: MeanStats averages
// the successful results kept in each (target, module)'s history (the daemon's
// --history.limit bounds how many there are).
func FromProber(s StatusSource) ProbeSource { return proberSource{s} }

type proberSource struct{ s StatusSource }

func (p proberSource) Model(target string) string { return p.s.Model(target) }

func (p proberSource) MeanStats(target, module string, since time.Time) ProbeMeans {
	// Only the pair's successes: the landing page asks for every pair.
	return Means(p.s.Successes(target, module, since), since)
}

// Means averages the successful results that started at or after since, with
// vLLM's definitions: TPOT per result with more than one output token, ITL
// pooled over every gap.
func Means(results []prober.Result, since time.Time) ProbeMeans {
	var ttft, tpot, itl, e2e, outTokens float64
	var nTPOT, nITL int
	out := ProbeMeans{}
	for i := range results {
		r := &results[i]
		if !r.Success || r.Start.Before(since) {
			continue
		}
		out.N++
		outTokens += float64(r.OutputTokens)
		ttft += r.TTFT.Seconds()
		e2e += r.E2E.Seconds()
		if r.OutputTokens > 1 {
			tpot += (r.E2E - r.TTFT).Seconds() / float64(r.OutputTokens-1)
			nTPOT++
		}
		for _, g := range r.ITLs {
			itl += g.Seconds()
			nITL++
		}
	}
	div := func(sum float64, n int) float64 {
		if n == 0 {
			return math.NaN()
		}
		return sum / float64(n)
	}
	out.TTFT, out.E2E = div(ttft, out.N), div(e2e, out.N)
	out.OutputTokens = div(outTokens, out.N)
	out.TPOT, out.ITL = div(tpot, nTPOT), div(itl, nITL)
	return out
}
