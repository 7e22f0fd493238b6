package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/percentile"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Dist summarises one distribution the way vLLM's calculate_metrics does:
// mean, median, population standard deviation (ddof=0) and numpy-linear
// percentiles. Every value of an empty distribution is 0 (vLLM's `x or 0`).
type Dist struct {
	N           int
	Mean        float64
	Median      float64
	Std         float64
	Min, Max    float64
	Percentiles []float64 // the values at Options.Percentiles, in that order
}

// Summarize computes a Dist of values at the given percentiles. values is not modified.
func Summarize(values []float64, percentiles []float64) Dist {
	d := Dist{N: len(values), Percentiles: make([]float64, len(percentiles))}
	if len(values) == 0 {
		return d
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	d.Mean = sum / float64(len(sorted))
	ss := 0.0
	for _, v := range sorted {
		ss += (v - d.Mean) * (v - d.Mean)
	}
	d.Std = math.Sqrt(ss / float64(len(sorted)))
	d.Median = percentile.Linear(sorted, 50)
	d.Min, d.Max = sorted[0], sorted[len(sorted)-1]
	for i, p := range percentiles {
		d.Percentiles[i] = percentile.Linear(sorted, p)
	}
	return d
}

// PercentileLabel formats p the way vLLM names its keys and lines: 99 -> "99",
// 99.9 -> "99.9".
func PercentileLabel(p float64) string {
	return strconv.FormatFloat(p, 'f', -1, 64)
}

// Metrics is the aggregate of one load level, computed like vLLM's
// calculate_metrics (vllm/benchmarks/serve.py). Latencies are in
// seconds, throughputs per second.
type Metrics struct {
	Completed, Failed int
	Duration          time.Duration
	TotalInput        int // prompt tokens of successful requests (server usage)
	TotalOutput       int // output tokens of successful requests

	RequestThroughput    float64 // completed / duration
	OutputThroughput     float64 // total output / duration
	InputThroughput      float64 // total input / duration
	TotalTokenThroughput float64 // (input + output) / duration
	// MaxOutputTokensPerS is the largest 1-second bucket of streamed content
	// events (one token per event), counted from the first request's start.
	MaxOutputTokensPerS float64
	// MaxConcurrentRequests is the sweep-line peak of requests in flight.
	MaxConcurrentRequests int

	TTFT, TPOT, ITL, E2E Dist
	// Per request, the multi-GPU presets report's "Request Generation Level TPS" (output tokens / E2E)
	// and "Request Prompt Level TPS" (prompt tokens / E2E).
	OutputTPSPerRequest, InputTPSPerRequest Dist

	// Failures breaks the failed requests down by class (FailureBreakdown).
	Failures []Failure
}

// SuccessRatio is completed / (completed + failed), 1 for an empty level.
func (m *Metrics) SuccessRatio() float64 {
	if n := m.Completed + m.Failed; n > 0 {
		return float64(m.Completed) / float64(n)
	}
	return 1
}

// Calculate aggregates the results of one load level that took duration, at
// the given percentiles.
//
// Following vLLM: only successful requests contribute; TPOT is per request
// (E2E-TTFT)/(out-1) for requests with more than one output token, averaged
// over requests; ITL pools every gap of every request (chunk-weighted); a
// request whose output token count is 0 counts as 1 (no tokenizer).
func Calculate(results []probe.Result, duration time.Duration, percentiles []float64) Metrics {
	m := Metrics{Duration: duration, Failures: FailureBreakdown(results)}
	var ttfts, tpots, itls, e2es, outTPS, inTPS []float64
	for i := range results {
		r := &results[i]
		if !r.Success {
			m.Failed++
			continue
		}
		m.Completed++
		out := r.OutputTokens
		if out <= 0 {
			out = 1
		}
		m.TotalOutput += out
		m.TotalInput += r.PromptTokens
		ttfts = append(ttfts, r.TTFT.Seconds())
		e2es = append(e2es, r.E2E.Seconds())
		if tpot, ok := probe.TPOT(r.TTFT, r.E2E, out); ok {
			tpots = append(tpots, tpot.Seconds())
		}
		for _, g := range r.ITLs {
			itls = append(itls, g.Seconds())
		}
		if e := r.E2E.Seconds(); e > 0 {
			outTPS = append(outTPS, float64(out)/e)
			inTPS = append(inTPS, float64(r.PromptTokens)/e)
		}
	}
	if s := duration.Seconds(); s > 0 {
		m.RequestThroughput = float64(m.Completed) / s
		m.OutputThroughput = float64(m.TotalOutput) / s
		m.InputThroughput = float64(m.TotalInput) / s
		m.TotalTokenThroughput = float64(m.TotalInput+m.TotalOutput) / s
	}
	m.TTFT = Summarize(ttfts, percentiles)
	m.TPOT = Summarize(tpots, percentiles)
	m.ITL = Summarize(itls, percentiles)
	m.E2E = Summarize(e2es, percentiles)
	m.OutputTPSPerRequest = Summarize(outTPS, percentiles)
	m.InputTPSPerRequest = Summarize(inTPS, percentiles)
	m.MaxOutputTokensPerS, m.MaxConcurrentRequests = peaks(results)
	return m
}

// peaks computes vLLM's max_output_tokens_per_s and max_concurrent_requests
// (PR #23867): token timestamps are start+TTFT, then +ITL cumulatively, counted
// in 1-second buckets from the earliest start; the concurrency peak is a sweep
// line over [start, start+E2E) of successful requests, ends before starts on ties.
func peaks(results []probe.Result) (float64, int) {
	var t0 time.Time
	for i := range results {
		if r := &results[i]; r.Success && (t0.IsZero() || r.Start.Before(t0)) {
			t0 = r.Start
		}
	}
	if t0.IsZero() {
		return 0, 0
	}
	buckets := map[int64]int{}
	type edge struct {
		at    time.Duration
		delta int
	}
	var edges []edge
	for i := range results {
		r := &results[i]
		if !r.Success {
			continue
		}
		off := r.Start.Sub(t0)
		t := off + r.TTFT
		buckets[int64(t/time.Second)]++
		for _, g := range r.ITLs {
			t += g
			buckets[int64(t/time.Second)]++
		}
		edges = append(edges, edge{off, 1}, edge{off + r.E2E, -1})
	}
	maxTok := 0
	for _, n := range buckets {
		maxTok = max(maxTok, n)
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta) // -1 (end) before +1 (start)
	})
	cur, peak := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return float64(maxTok), peak
}

// Failure is one class of failed requests: the prober's failure reason (the
// reason label of vllm_probe_failures_total, see probe.Reasons) and, when the
// server answered with an error status, that status.
type Failure struct {
	Reason probe.Reason
	// Status is the HTTP status of an error answer (not 2xx); 0 when the
	// request failed without one (connection, timeout) or inside a 200 stream.
	Status int
	Count  int
	// Example is the error message of the first request of the class, as the
	// prober wrote it (credentials redacted).
	Example string
}

// Class names the failure for people: "http_5xx (HTTP 500)", "timeout".
func (f Failure) Class() string {
	if f.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d)", f.Reason, f.Status)
	}
	return string(f.Reason)
}

// FailureBreakdown counts the failed results by reason and error status, the
// largest class first (ties in the order of probe.Reasons, then by status).
// The classification is the prober's own: bench reuses Result.Reason as
// probe.Stream set it.
func FailureBreakdown(results []probe.Result) []Failure {
	type key struct {
		reason probe.Reason
		status int
	}
	idx := map[key]int{}
	var out []Failure
	for i := range results {
		r := &results[i]
		if r.Success {
			continue
		}
		k := key{r.Reason, 0}
		if r.StatusCode != 0 && (r.StatusCode < 200 || r.StatusCode > 299) {
			k.status = r.StatusCode
		}
		j, ok := idx[k]
		if !ok {
			j = len(out)
			idx[k] = j
			out = append(out, Failure{Reason: k.reason, Status: k.status, Example: r.Err})
		}
		out[j].Count++
	}
	order := map[probe.Reason]int{}
	for i, r := range probe.Reasons() {
		order[r] = i + 1 // a reason the list lacks sorts first (0); none should
	}
	slices.SortStableFunc(out, func(a, b Failure) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(order[a.Reason], order[b.Reason]); c != 0 {
			return c
		}
		return cmp.Compare(a.Status, b.Status)
	})
	return out
}
