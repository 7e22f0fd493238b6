package collector

import "math"

// signals are the values of vllm_server_signal_available's signal label,
// each with the test that tells whether a model of the scrape exports it.
// A server that does not export a family is not the same as one reporting
// zero: panels and alerts built on a missing family stay empty or silent.
var signals = []struct {
	name    string
	present func(*Model) bool
}{
	{"e2e", func(m *Model) bool { return m.E2E != nil }},
	{"generation_tokens", func(m *Model) bool { return !math.IsNaN(m.GenerationTokens) }},
	{"itl", func(m *Model) bool { return m.ITL != nil }},
	{"kv_transfer", func(m *Model) bool { return m.KVTransfer != nil || !math.IsNaN(m.KVTransferFailures) }},
	{"kv_cache_usage", func(m *Model) bool { return !math.IsNaN(m.KVUsage) }},
	{"prefix_cache", func(m *Model) bool { return !math.IsNaN(m.PrefixCacheQueries) && !math.IsNaN(m.PrefixCacheHits) }},
	{"preemptions", func(m *Model) bool { return !math.IsNaN(m.Preemptions) }},
	{"prompt_tokens", func(m *Model) bool { return !math.IsNaN(m.PromptTokens) }},
	{"queue_time", func(m *Model) bool { return m.Queue != nil }},
	{"request_success", func(m *Model) bool { return len(m.RequestSuccess) > 0 }},
	{"running", func(m *Model) bool { return !math.IsNaN(m.Running) }},
	{"sleep_state", func(m *Model) bool { return !math.IsNaN(m.SleepLevel) }},
	{"spec_decode", func(m *Model) bool { return !math.IsNaN(m.SpecDraftTokens) && !math.IsNaN(m.SpecAcceptedTokens) }},
	{"ttft", func(m *Model) bool { return m.TTFT != nil }},
	{"waiting", func(m *Model) bool { return !math.IsNaN(m.Waiting) }},
}

// signalAvailability reports, per signal in the order of signals, whether
// any model of s exports it.
func signalAvailability(s *Snapshot) []bool {
	out := make([]bool, len(signals))
	for i, sig := range signals {
		for _, m := range s.Models {
			if sig.present(m) {
				out[i] = true
				break
			}
		}
	}
	return out
}
