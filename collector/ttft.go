package collector

import "math"

// Whether a server's TTFT histogram counts the time a request waits in the
// queue. vLLM's does: V1 observes vllm:time_to_first_token_seconds from the
// request's arrival in the frontend (vllm/v1/metrics/stats.py,
// update_from_output: first token time − arrival time), and so did V0. Some
// engines and simulators speaking vLLM's names measure from scheduling
// instead, and then the probes' TTFT exceeds the server's by the queue time.

// ttftQueueEvidence decides from one model's window whether its server TTFT
// includes the queue time. decided is false when the window cannot tell:
// too little queueing to matter, or no request finished.
//
//   - With vllm:request_prefill_time_seconds (scheduled → first token): TTFT
//     counted from arrival is about queue + prefill, counted from scheduling
//     about prefill alone; the nearer one wins.
//   - Without it: a TTFT counted from arrival can never be shorter than the
//     queue time of the same requests, so a mean queue time above the mean
//     TTFT proves the TTFT excludes it. The other way round proves nothing.
func ttftQueueEvidence(d *Derived) (includes, decided bool) {
	if d == nil {
		return false, false
	}
	ttft, okT := d.Latencies["ttft"]
	queue, okQ := d.Latencies["queue"]
	if !okT || !okQ || math.IsNaN(ttft.Mean) || math.IsNaN(queue.Mean) {
		return false, false
	}
	// Queueing of a few milliseconds changes no gap worth reading.
	if queue.Mean < math.Max(0.005, 0.1*ttft.Mean) {
		return false, false
	}
	if prefill, ok := d.Latencies["prefill"]; ok && !math.IsNaN(prefill.Mean) {
		withQueue := math.Abs(ttft.Mean - (queue.Mean + prefill.Mean))
		without := math.Abs(ttft.Mean - prefill.Mean)
		return withQueue <= without, true
	}
	if queue.Mean > 1.05*ttft.Mean+0.001 {
		return false, true
	}
	return false, false
}
