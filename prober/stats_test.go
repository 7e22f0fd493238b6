package prober

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// naiveMeans is the definition Means must match: vLLM's calculate_metrics over
// the successful results that started at or after since.
func naiveMeans(rs []probe.Result, since time.Time) Means {
	var ttft, tpot, itl, e2e, out, load float64
	var n, nTPOT, nITL, nLoad int
	for _, r := range rs {
		if !r.Success || r.Start.Before(since) {
			continue
		}
		n++
		ttft += r.TTFT.Seconds()
		e2e += r.E2E.Seconds()
		out += float64(r.OutputTokens)
		if r.OutputTokens > 1 {
			tpot += (r.E2E - r.TTFT).Seconds() / float64(r.OutputTokens-1)
			nTPOT++
		}
		for _, g := range r.ITLs {
			itl += g.Seconds()
			nITL++
		}
		if !math.IsNaN(r.Load) {
			load += r.Load
			nLoad++
		}
	}
	div := func(s float64, n int) float64 {
		if n == 0 {
			return math.NaN()
		}
		return s / float64(n)
	}
	return Means{TTFT: div(ttft, n), TPOT: div(tpot, nTPOT), ITL: div(itl, nITL), E2E: div(e2e, n),
		OutputTokens: div(out, n), Load: div(load, nLoad), N: n}
}

func nearly(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b))
}

func sameMeans(a, b Means) bool {
	return a.N == b.N && nearly(a.TTFT, b.TTFT) && nearly(a.TPOT, b.TPOT) && nearly(a.ITL, b.ITL) &&
		nearly(a.E2E, b.E2E) && nearly(a.OutputTokens, b.OutputTokens) && nearly(a.Load, b.Load)
}

// TestStatWindowMatchesHistory records random probes, well past several
// evictions and rebasings, and checks every window against the definition
// computed from the last limit results.
func TestStatWindowMatchesHistory(t *testing.T) {
	const limit = 7
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	var all []probe.Result
	var w statWindow
	var old []statWindow // copies taken earlier must stay valid
	var oldWant []probe.Result
	for i := range 60 {
		r := probe.Result{Start: t0.Add(time.Duration(i) * time.Second), Success: rng.IntN(4) != 0, Load: math.NaN()}
		if r.Success {
			r.TTFT = time.Duration(50+rng.IntN(200)) * ms
			r.OutputTokens = rng.IntN(5)
			r.E2E = r.TTFT + time.Duration(r.OutputTokens*20)*ms
			for range max(r.OutputTokens-1, 0) {
				r.ITLs = append(r.ITLs, time.Duration(10+rng.IntN(20))*ms)
			}
			if rng.IntN(2) == 0 {
				r.Load = float64(1 + rng.IntN(9))
			}
		}
		all = append(all, r)
		w.add(&r, limit)
		kept := all[max(0, len(all)-limit):]
		if p, s := w.probes(); p != len(kept) || s != naiveMeans(kept, time.Time{}).N {
			t.Fatalf("probe %d: probes, successes = %d, %d; want %d kept", i, p, s, len(kept))
		}
		for _, since := range []time.Time{{}, t0.Add(time.Duration(i-3) * time.Second), t0.Add(time.Duration(i+1) * time.Second)} {
			if got, want := w.means(since.UnixNano()), naiveMeans(kept, since); !sameMeans(got, want) {
				t.Fatalf("probe %d since %v: means %+v, want %+v", i, since, got, want)
			}
			var want []int64
			for _, r := range kept {
				if r.Success && !r.Start.Before(since) {
					want = append(want, r.Start.UnixNano())
				}
			}
			if got := (PairStats{window: w}).SuccessStarts(nil, since); !slices.Equal(got, want) {
				t.Fatalf("probe %d since %v: success starts %v, want %v", i, since, got, want)
			}
		}
		if i == 20 {
			old = append(old, w)
			oldWant = append([]probe.Result(nil), kept...)
		}
	}
	if got, want := old[0].means(0), naiveMeans(oldWant, time.Time{}); !sameMeans(got, want) {
		t.Errorf("a copy taken earlier changed under later probes: %+v, want %+v", got, want)
	}
}

func TestPairStateOutlivesEviction(t *testing.T) {
	var s pairState
	t0 := time.Unix(1_700_000_000, 0)
	ok := probe.Result{Start: t0, Success: true, TTFT: time.Second, E2E: 2 * time.Second, OutputTokens: 3, Load: 2}
	s.record(&ok, t0.Add(2*time.Second), 2)
	failStart := t0.Add(10 * time.Second)
	for i := range 5 {
		bad := probe.Result{Start: failStart.Add(time.Duration(i) * time.Second), Reason: probe.ReasonHTTP5xx}
		s.record(&bad, bad.Start.Add(time.Second), 2)
	}
	if !s.lastSuccess.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("LastSuccess = %v, evicted with the history", s.lastSuccess)
	}
	if !s.failingSince.Equal(failStart.Add(time.Second)) {
		t.Errorf("FailingSince = %v, want the end of the first failure %v", s.failingSince, failStart.Add(time.Second))
	}
	if s.lastReason != probe.ReasonHTTP5xx || !s.lastProbe.Equal(failStart.Add(5*time.Second)) {
		t.Errorf("last reason %q at %v", s.lastReason, s.lastProbe)
	}
	if p, n := s.window.probes(); p != 2 || n != 0 {
		t.Errorf("window holds %d probes, %d successes; want 2, 0", p, n)
	}
	s.record(&ok, failStart.Add(time.Minute), 2)
	if !s.failingSince.IsZero() || s.lastReason != "" {
		t.Errorf("after a success: failing since %v, reason %q", s.failingSince, s.lastReason)
	}
}

func TestTPOTDefinition(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		ttft, e2e time.Duration
		out       int
		want      time.Duration
		ok        bool
	}{
		{100 * ms, 400 * ms, 4, 100 * ms, true},
		{100 * ms, 400 * ms, 1, 0, false}, // one token: no probe.TPOT (vLLM skips it)
		{100 * ms, 400 * ms, 0, 0, false},
		{0, 0, 5, 0, false}, // nothing streamed
	} {
		if got, ok := probe.TPOT(c.ttft, c.e2e, c.out); got != c.want || ok != c.ok {
			t.Errorf("TPOT(%v, %v, %d) = %v, %v; want %v, %v", c.ttft, c.e2e, c.out, got, ok, c.want, c.ok)
		}
	}
}

// BenchmarkPairStatsMeans reads one pair's statistics and means: constant time, no allocation.
func BenchmarkPairStatsMeans(b *testing.B) {
	var s pairState
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 40 {
		r := probe.Result{Start: t0.Add(time.Duration(i) * time.Second), Success: true, TTFT: time.Second, E2E: 2 * time.Second, OutputTokens: 3, Load: 1}
		s.record(&r, r.Start, DefaultHistoryLimit)
	}
	p := &pair{key: pairKey{"t", "m", ""}, tgt: &target{}, state: s}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.stats(t0).Means(t0.Add(30 * time.Second))
	}
}
