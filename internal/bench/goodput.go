package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Goodput is what a level's requests give against the run's goodput
// objectives (Options.Goodput), as vLLM's bench serve --goodput and GuideLLM
// count it: a request is good when it succeeded and met every objective.
type Goodput struct {
	Good int
	// RequestGoodput is good requests / duration (vLLM's request_goodput).
	RequestGoodput float64
	// Attainment is good / every request, failed ones included (GuideLLM's
	// slo_attainment: errored requests count against it).
	Attainment float64
}

// judgeGoodput counts the good requests of results against o.
func judgeGoodput(results []probe.Result, duration time.Duration, o *config.Objectives) *Goodput {
	g := &Goodput{}
	for i := range results {
		if r := &results[i]; r.Success && o.Good(r.Latencies()) {
			g.Good++
		}
	}
	if s := duration.Seconds(); s > 0 {
		g.RequestGoodput = float64(g.Good) / s
	}
	if len(results) > 0 {
		g.Attainment = float64(g.Good) / float64(len(results))
	}
	return g
}

// GoodputSearch is the result of the search for the highest concurrency
// meeting a target attainment (Options.GoodputTarget).
type GoodputSearch struct {
	Target float64
	// Highest is the highest concurrency tried whose attainment met Target;
	// 0 when even concurrency 1 missed it.
	Highest int
	// Capped says the search stopped at Options.GoodputMaxConcurrency while
	// still meeting the target: the server may do more.
	Capped bool
}

// searchGoodput finds the highest concurrency whose attainment is at least
// target, as GuideLLM's goodput profile does: double from 1 while the
// target is met (up to maxC), then bisect between the last level that met
// it and the first that missed, until they are within 10 % (or adjacent).
// try runs one concurrency level and returns its attainment.
func searchGoodput(ctx context.Context, target float64, maxC int, try func(int) (float64, error)) (*GoodputSearch, error) {
	res := &GoodputSearch{Target: target}
	meets := func(c int) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		a, err := try(c)
		if err != nil {
			return false, fmt.Errorf("concurrency %d: %w", c, err)
		}
		return a >= target, nil
	}
	lo, hi := 0, 0 // lo met the target (0: none yet), hi missed it (0: none yet)
	for c := 1; ; c *= 2 {
		c = min(c, maxC)
		ok, err := meets(c)
		if err != nil {
			return res, err
		}
		if !ok {
			hi = c
			break
		}
		lo = c
		if c == maxC {
			res.Highest, res.Capped = lo, true
			return res, nil
		}
	}
	for lo > 0 && hi-lo > max(1, lo/10) {
		mid := lo + (hi-lo)/2
		ok, err := meets(mid)
		if err != nil {
			res.Highest = lo
			return res, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	res.Highest = lo
	return res, nil
}
