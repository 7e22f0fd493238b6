package collector

import (
	"math"
	"sort"
	"time"
)

// Latency is a server-side latency statistic over the rate window.
type Latency struct {
	Mean float64 // Δsum / Δcount
	P50  float64 // NaN when the buckets cannot place it
	P99  float64
}

// Derived holds one model's values over the rate window, computed from the
// snapshots inside it. Rates are NaN when the window holds fewer than two
// snapshots of the model or the server does not expose the counter.
type Derived struct {
	Start, End time.Time // time of the first and last snapshot used

	PromptTokensPerSecond     float64
	GenerationTokensPerSecond float64
	PreemptionsPerSecond      float64
	// KVTransferFailuresPerSecond: failed KV cache transfers of
	// prefill/decode disaggregation; NaN without a KV connector.
	KVTransferFailuresPerSecond float64
	RequestSuccessPerSecond     map[string]float64 // by finished_reason

	// PromptSourceRatio is each source's share of the prompt tokens over the
	// window (vllm:prompt_tokens_by_source_total): local_cache_hit is the
	// prefix cache's share, external_kv_transfer the share a remote prefill
	// sent; nil without the family or without a prompt token.
	PromptSourceRatio map[string]float64
	// PromptCachedRatio is Δ cached prompt tokens ÷ Δ prompt tokens; NaN
	// without the counters or a prompt token.
	PromptCachedRatio float64
	// FLOPsPerGPUPerSecond, ReadBytesPerGPUPerSecond and
	// WriteBytesPerGPUPerSecond are the rates of the MFU inputs; NaN
	// without them.
	FLOPsPerGPUPerSecond, ReadBytesPerGPUPerSecond, WriteBytesPerGPUPerSecond float64
	// AdmissionRejectionsPerSecond is vllm:admission_rejections_total's rate
	// by reason; nil without it.
	AdmissionRejectionsPerSecond map[string]float64

	// Latencies by "ttft", "itl", "e2e", "queue", "prefill", "kv_transfer"; a key is absent when the
	// histogram saw no new observation in the window.
	Latencies map[string]Latency

	// StreamOutputTokensPerSecond is the output rate of one request while it
	// is in the server: Δ sum(vllm:request_generation_tokens) ÷ Δ
	// sum(vllm:e2e_request_latency_seconds) over the requests that finished in
	// the window. It does not depend on how busy the server is, so it can be
	// compared with a benchmark's output_throughput ÷ concurrency (the same
	// quantity for a closed-loop benchmark). NaN when no request finished.
	StreamOutputTokensPerSecond float64

	// SpecAcceptanceRate is speculative decoding's draft acceptance rate
	// over the window: Δ accepted tokens ÷ Δ draft tokens. NaN without
	// speculative decoding or without a draft token in the window.
	SpecAcceptanceRate float64
	// SpecAcceptedPerDraft is the mean number of draft tokens accepted per
	// draft: Δ accepted tokens ÷ Δ drafts (vLLM's mean acceptance length
	// minus the bonus token). NaN without drafts counted.
	SpecAcceptedPerDraft float64
}

// increase sums the increases of a counter over consecutive values like
// Prometheus' rate(): a decrease is a counter reset (restart, metrics reset),
// after which the counter counts from zero, so the increase is the new value.
// A rate therefore never goes negative and a reset never makes a spike.
func increase(vals []float64) float64 {
	inc := 0.0
	for i := 1; i < len(vals); i++ {
		if d := vals[i] - vals[i-1]; d >= 0 {
			inc += d
		} else {
			inc += vals[i]
		}
	}
	return inc
}

// derive computes model's values over snaps (oldest first, all inside the window).
func derive(snaps []*Snapshot, model string) *Derived {
	var ms []*Model
	var times []time.Time
	for _, s := range snaps {
		if m := s.Models[model]; m != nil {
			ms = append(ms, m)
			times = append(times, s.Time)
		}
	}
	d := &Derived{
		PromptTokensPerSecond:       math.NaN(),
		GenerationTokensPerSecond:   math.NaN(),
		PreemptionsPerSecond:        math.NaN(),
		KVTransferFailuresPerSecond: math.NaN(),
		PromptCachedRatio:           math.NaN(),
		FLOPsPerGPUPerSecond:        math.NaN(),
		ReadBytesPerGPUPerSecond:    math.NaN(),
		WriteBytesPerGPUPerSecond:   math.NaN(),
		Latencies:                   map[string]Latency{},

		StreamOutputTokensPerSecond: math.NaN(),
		SpecAcceptanceRate:          math.NaN(),
		SpecAcceptedPerDraft:        math.NaN(),
	}
	if len(ms) < 2 {
		return d
	}
	d.Start, d.End = times[0], times[len(times)-1]
	secs := d.End.Sub(d.Start).Seconds()
	if secs <= 0 {
		return d
	}
	rate := func(f func(*Model) float64) float64 {
		vals := make([]float64, 0, len(ms))
		for _, m := range ms {
			v := f(m)
			if math.IsNaN(v) {
				return math.NaN()
			}
			vals = append(vals, v)
		}
		return increase(vals) / secs
	}
	d.PromptTokensPerSecond = rate(func(m *Model) float64 { return m.PromptTokens })
	d.GenerationTokensPerSecond = rate(func(m *Model) float64 { return m.GenerationTokens })
	d.PreemptionsPerSecond = rate(func(m *Model) float64 { return m.Preemptions })
	d.KVTransferFailuresPerSecond = rate(func(m *Model) float64 { return m.KVTransferFailures })
	d.FLOPsPerGPUPerSecond = rate(func(m *Model) float64 { return m.FLOPsPerGPU })
	d.ReadBytesPerGPUPerSecond = rate(func(m *Model) float64 { return m.ReadBytesPerGPU })
	d.WriteBytesPerGPUPerSecond = rate(func(m *Model) float64 { return m.WriteBytesPerGPU })
	if prompt := rate(func(m *Model) float64 { return m.PromptTokens }); prompt > 0 {
		d.PromptCachedRatio = rate(func(m *Model) float64 { return m.PromptCached }) / prompt
	}
	byKey := func(get func(*Model) map[string]float64) map[string]float64 {
		last := get(ms[len(ms)-1])
		if len(last) == 0 {
			return nil
		}
		out := map[string]float64{}
		for key := range last {
			if r := rate(func(m *Model) float64 { return get(m)[key] }); !math.IsNaN(r) {
				out[key] = r // a key that appears later counts from zero
			}
		}
		return out
	}
	if src := byKey(func(m *Model) map[string]float64 { return m.PromptBySource }); src != nil {
		total := 0.0
		for _, r := range src {
			total += r
		}
		if total > 0 {
			d.PromptSourceRatio = map[string]float64{}
			for key, r := range src {
				d.PromptSourceRatio[key] = r / total
			}
		}
	}
	d.AdmissionRejectionsPerSecond = byKey(func(m *Model) map[string]float64 { return m.AdmissionRejections })
	accepted := rate(func(m *Model) float64 { return m.SpecAcceptedTokens })
	if draftTokens := rate(func(m *Model) float64 { return m.SpecDraftTokens }); draftTokens > 0 {
		d.SpecAcceptanceRate = accepted / draftTokens
	}
	if drafts := rate(func(m *Model) float64 { return m.SpecDrafts }); drafts > 0 {
		d.SpecAcceptedPerDraft = accepted / drafts
	}

	last := ms[len(ms)-1]
	if len(last.RequestSuccess) > 0 {
		d.RequestSuccessPerSecond = map[string]float64{}
		for reason := range last.RequestSuccess {
			r := rate(func(m *Model) float64 {
				v, ok := m.RequestSuccess[reason]
				if !ok {
					return 0 // a reason that appears later counted from zero
				}
				return v
			})
			if !math.IsNaN(r) {
				d.RequestSuccessPerSecond[reason] = r
			}
		}
	}

	hs := make([]*Histogram, len(ms))
	for _, lh := range latencyHistograms {
		for i, m := range ms {
			hs[i] = lh.of(m)
		}
		if delta := histogramIncrease(hs); delta != nil && delta.Count > 0 {
			mean := delta.Sum / delta.Count
			d.Latencies[lh.key] = Latency{
				Mean: mean,
				P50:  boundedQuantile(0.5, delta.Buckets, mean),
				P99:  boundedQuantile(0.99, delta.Buckets, mean),
			}
		}
	}
	d.StreamOutputTokensPerSecond = streamOutputRate(ms)
	return d
}

// latencyHistograms are the histograms derive reads latencies from, by
// their key in Derived.Latencies.
var latencyHistograms = [...]struct {
	key string
	of  func(*Model) *Histogram
}{
	{"ttft", func(m *Model) *Histogram { return m.TTFT }},
	{"itl", func(m *Model) *Histogram { return m.ITL }},
	{"e2e", func(m *Model) *Histogram { return m.E2E }},
	{"queue", func(m *Model) *Histogram { return m.Queue }},
	{"prefill", func(m *Model) *Histogram { return m.Prefill }},
	{"kv_transfer", func(m *Model) *Histogram { return m.KVTransfer }},
	{"kv_block_lifetime", func(m *Model) *Histogram { return m.KVBlockLifetime }},
}

// streamOutputRate is Δ generated tokens ÷ Δ request seconds of the requests
// that finished between the first and the last of ms. Both histograms are
// taken pair by pair, and a pair where either reset is left out of both sums,
// so that the ratio always covers the same requests.
func streamOutputRate(ms []*Model) float64 {
	var tokens, secs float64
	for i := 1; i < len(ms); i++ {
		pe, ce := ms[i-1].E2E, ms[i].E2E
		pg, cg := ms[i-1].GenerationTokensPerRequest, ms[i].GenerationTokensPerRequest
		if pe == nil || ce == nil || pg == nil || cg == nil {
			continue
		}
		if ce.Count < pe.Count || cg.Count < pg.Count || ce.Count-pe.Count != cg.Count-pg.Count {
			continue // a reset, or the two histograms disagree on the requests
		}
		tokens += cg.Sum - pg.Sum
		secs += ce.Sum - pe.Sum
	}
	if secs <= 0 || tokens <= 0 {
		return math.NaN()
	}
	return tokens / secs
}

// histogramIncrease is the histogram of the observations made between the
// first and the last of hs, with counter-reset handling per pair: when the
// count drops or the bucket layout changes, the newer histogram is taken as
// counting from zero. Missing histograms (nil) break the chain.
func histogramIncrease(hs []*Histogram) *Histogram {
	var acc *Histogram
	var step Histogram // a pair's increase, its buckets reused from pair to pair
	for i := 1; i < len(hs); i++ {
		prev, cur := hs[i-1], hs[i]
		if cur == nil || prev == nil {
			continue
		}
		delta := cur
		if !(cur.Count < prev.Count) && sameBounds(prev, cur) { // as a NaN count compares
			step.Sum, step.Count = cur.Sum-prev.Sum, cur.Count-prev.Count
			if step.Sum < 0 {
				step.Sum = 0
			}
			step.Buckets = step.Buckets[:0]
			for j, b := range cur.Buckets {
				step.Buckets = append(step.Buckets, Bucket{UpperBound: b.UpperBound, Count: math.Max(0, b.Count-prev.Buckets[j].Count)})
			}
			delta = &step
		}
		switch {
		case acc == nil || !sameBounds(acc, delta):
			acc = &Histogram{Sum: delta.Sum, Count: delta.Count, Buckets: append([]Bucket(nil), delta.Buckets...)}
		default:
			acc.Sum += delta.Sum
			acc.Count += delta.Count
			for j := range acc.Buckets {
				acc.Buckets[j].Count += delta.Buckets[j].Count
			}
		}
	}
	return acc
}

func sameBounds(a, b *Histogram) bool {
	if len(a.Buckets) != len(b.Buckets) {
		return false
	}
	for i := range a.Buckets {
		if a.Buckets[i].UpperBound != b.Buckets[i].UpperBound {
			return false
		}
	}
	return true
}

// boundedQuantile is bucketQuantile capped by what the mean allows: a
// latency is never negative, so by Markov's inequality its q-quantile is at
// most mean/(1-q). Interpolation alone invents figures when every observation
// falls in a coarse lowest bucket: vLLM's queue-time buckets start at 0.3 s,
// and an idle server (mean 0) read p50 0.15 s and p99 0.297 s; capped, both
// read 0. Where the buckets are fine enough the cap does not bind.
func boundedQuantile(q float64, buckets []Bucket, mean float64) float64 {
	v := bucketQuantile(q, buckets)
	if limit := mean / (1 - q); mean >= 0 && v > limit {
		return limit
	}
	return v
}

// bucketQuantile estimates quantile q from cumulative buckets exactly like
// PromQL's histogram_quantile on classic buckets: linear interpolation inside
// the bucket that holds the rank, the lower bound of the first bucket being 0;
// a rank in the +Inf bucket returns the largest finite bound. It returns NaN
// when there are fewer than two buckets, no +Inf bucket or no observation.
func bucketQuantile(q float64, buckets []Bucket) float64 {
	if len(buckets) < 2 || !math.IsInf(buckets[len(buckets)-1].UpperBound, +1) {
		return math.NaN()
	}
	var buf [32]Bucket // vLLM's latency histograms have up to 23 buckets, +Inf included: no allocation
	bs := append(buf[:0], buckets...)
	// Enforce monotonicity like Prometheus does for precision errors.
	for i := 1; i < len(bs); i++ {
		if bs[i].Count < bs[i-1].Count {
			bs[i].Count = bs[i-1].Count
		}
	}
	total := bs[len(bs)-1].Count
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	b := sort.Search(len(bs)-1, func(i int) bool { return bs[i].Count >= rank })
	if b == len(bs)-1 {
		return bs[len(bs)-2].UpperBound
	}
	if b == 0 && bs[0].UpperBound <= 0 {
		return bs[0].UpperBound
	}
	start, end, count := 0.0, bs[b].UpperBound, bs[b].Count
	if b > 0 {
		start = bs[b-1].UpperBound
		count -= bs[b-1].Count
		rank -= bs[b-1].Count
	}
	return start + (end-start)*(rank/count)
}
