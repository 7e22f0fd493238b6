package collector

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestSignalAvailable: vllm_server_signal_available tells a family the server
// does not export (0) from one it exports, whatever its value (1): vLLM
// 0.4.3 has no queue-time histogram and no prefix-cache counters; the
// 0.11-era capture has every signal, all of them at zero.
func TestSignalAvailable(t *testing.T) {
	all := []string{"e2e", "generation_tokens", "itl", "kv_cache_usage", "prefix_cache", "preemptions", "prompt_tokens",
		"queue_time", "request_success", "running", "sleep_state", "spec_decode", "ttft", "waiting"}
	for _, tc := range []struct {
		file    string
		missing map[string]bool
	}{
		{"real-0.4.3.prom", map[string]bool{"queue_time": true, "prefix_cache": true, "sleep_state": true, "spec_decode": true}},
		{"real-0.11.prom", map[string]bool{"sleep_state": true, "spec_decode": true}},
		{"finish-reason.prom", map[string]bool{"e2e": true, "itl": true, "kv_cache_usage": true, "prefix_cache": true,
			"preemptions": true, "queue_time": true, "ttft": true, "waiting": true, "sleep_state": true, "spec_decode": true,
			"generation_tokens": true, "prompt_tokens": true}},
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
