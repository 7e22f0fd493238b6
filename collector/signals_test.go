package collector

import (
	"context"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestSignalAvailable: vllm_server_signal_available tells a family the server
// does not export (0) from one it exports, whatever its value (1): vLLM
// 0.4.3 has no queue-time histogram and no prefix-cache counters; the
// 0.11-era capture has every signal, all of them at zero.
func TestSignalAvailable(t *testing.T) {
	all := []string{"e2e", "generation_tokens", "itl", "kv_cache_usage", "kv_transfer", "prefix_cache", "preemptions", "prompt_tokens",
		"queue_time", "request_success", "running", "sleep_state", "spec_decode", "ttft", "waiting"}
	for _, tc := range []struct {
		file    string
		missing map[string]bool
	}{
		{"real-0.4.3.prom", map[string]bool{"queue_time": true, "prefix_cache": true, "sleep_state": true, "spec_decode": true, "kv_transfer": true}},
		{"real-0.11.prom", map[string]bool{"sleep_state": true, "spec_decode": true, "kv_transfer": true}},
		{"finish-reason.prom", map[string]bool{"e2e": true, "itl": true, "kv_cache_usage": true, "prefix_cache": true,
			"preemptions": true, "queue_time": true, "ttft": true, "waiting": true, "sleep_state": true, "spec_decode": true,
			"generation_tokens": true, "prompt_tokens": true, "kv_transfer": true}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			srv := textServer(t, readFixture(t, tc.file))
			reg := prometheus.NewPedanticRegistry()
			m := NewManager(testOptions(reg, nil))
			if err := m.Apply(configFor(t, srv.URL, "10s", 4)); err != nil {
				t.Fatal(err)
			}
			s := m.target("a")
			s.scrapeOnce(context.Background())
			s.client.CloseIdleConnections()
			for _, sig := range all {
				want := 1.0
				if tc.missing[sig] {
					want = 0
				}
				got, ok := gathered(t, reg, "vllm_server_signal_available", map[string]string{"target": "a", "signal": sig, "preset": "small"})
				if !ok || got != want {
					t.Errorf("signal %s = %g (present %v), want %g", sig, got, ok, want)
				}
			}
			if n := len(signals); n != len(all) {
				t.Errorf("%d signals exported, the test knows %d", n, len(all))
			}
		})
	}
}

// TestKVTransferSignals: the KV transfer of prefill/decode disaggregation
// is read from SGLang's decode server (kv_transfer_latency_ms, in
// milliseconds, and the failed transfers) and from vLLM's NIXL families as
// vllm_sim serves them on a decode instance that pulled a prefill's blocks,
// and exported as vllm_server_kv_transfer_seconds and
// vllm_server_kv_transfer_failures_per_second, with its signal.
func TestKVTransferSignals(t *testing.T) {
	s := scrapeFixture(t, "sglang-pd-decode-hand.prom")
	m := s.Models["deepseek-ai/DeepSeek-V3"]
	if m == nil || m.KVTransfer == nil || m.KVTransfer.Count != 100 || math.Abs(m.KVTransfer.Sum-1.21) > 1e-9 || m.KVTransferFailures != 2 {
		t.Fatalf("SGLang decode server: %+v", m)
	}
	if got := m.KVTransfer.Buckets[3]; got.UpperBound != 0.01 || got.Count != 40 {
		t.Errorf("bucket 4 = %+v, want 40 transfers within 10 ms (0.01 s)", got)
	}
}
