package collector

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestVLLM2026Series: a 2026 vLLM with the newest names only (no
// gpu_cache_usage_perc, no time_per_output_token_seconds), scraped twice 60
// s of counters apart: every signal is read (running, waiting, KV usage,
// tokens, TTFT, ITL, E2E, queue) and the new series are exported: waiting by
// reason, each prompt source's share (the prefix cache's 40 %, the remote
// prefill's 10 %), the cached share (50 %), FLOPs and memory traffic per GPU
// (the mean of the two engines' per-GPU counters), MFU against the target's
// peak_flops_per_gpu, KV block lifetime and admission rejections by reason.
func TestVLLM2026Series(t *testing.T) {
	bodies := [][]byte{readFixture(t, "vllm-2026-hand.prom"), readFixture(t, "vllm-2026-hand-later.prom")}
	var which atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(bodies[which.Load()])
	}))
	t.Cleanup(srv.Close)
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	cfg := configFor(t, srv.URL, "10m", 4)
	cfg.Targets[0].PeakFLOPSPerGPU = 1e15
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	s.scrapeOnce(context.Background())
	which.Store(1)
	// The first snapshot moved 60 s back: rates over about that span (plus
	// the milliseconds between the two scrapes).
	s.mu.Lock()
	s.ring[len(s.ring)-1].Time = s.ring[len(s.ring)-1].Time.Add(-60e9)
	s.mu.Unlock()
	s.scrapeOnce(context.Background())

	model := "Qwen/Qwen3-8B"
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"vllm_server_requests", map[string]string{"state": "running"}, 10},
		{"vllm_server_requests", map[string]string{"state": "waiting"}, 6},
		{"vllm_server_kv_cache_usage_ratio", nil, 0.7},
		{"vllm_server_waiting_requests", map[string]string{"reason": "capacity"}, 4},
		{"vllm_server_waiting_requests", map[string]string{"reason": "deferred"}, 2},
		{"vllm_server_prompt_tokens_source_ratio", map[string]string{"source": "local_compute"}, 0.5},
		{"vllm_server_prompt_tokens_source_ratio", map[string]string{"source": "local_cache_hit"}, 0.4},
		{"vllm_server_prompt_tokens_source_ratio", map[string]string{"source": "external_kv_transfer"}, 0.1},
		{"vllm_server_prompt_tokens_cached_ratio", nil, 0.5},
		{"vllm_server_flops_per_gpu_per_second", nil, 1e14},
		{"vllm_server_memory_bytes_per_gpu_per_second", map[string]string{"kind": "read"}, 2e12},
		{"vllm_server_memory_bytes_per_gpu_per_second", map[string]string{"kind": "write"}, 1e11},
		{"vllm_server_mfu_ratio", nil, 0.1},
		{"vllm_server_kv_block_lifetime_seconds", map[string]string{"stat": "mean"}, 20},
		{"vllm_server_admission_rejections_per_second", map[string]string{"reason": "max_num_queued_reqs"}, 0.5},
		{"vllm_server_admission_rejections_per_second", map[string]string{"reason": "max_num_queued_tokens"}, 0.1},
	}
	for _, w := range want {
		labels := map[string]string{"target": "a", "model": model}
		for k, v := range w.labels {
			labels[k] = v
		}
		got, ok := gathered(t, reg, w.name, labels)
		if !ok || math.Abs(got-w.value) > 1e-3*math.Max(1e-9, math.Abs(w.value)) {
			t.Errorf("%s%v = %g (present %v), want %g", w.name, w.labels, got, ok, w.value)
		}
	}
	for _, sig := range []string{"ttft", "itl", "e2e", "queue_time", "kv_cache_usage", "prompt_tokens", "generation_tokens", "request_success", "running", "waiting"} {
		if got, ok := gathered(t, reg, "vllm_server_signal_available", map[string]string{"target": "a", "signal": sig}); !ok || got != 1 {
			t.Errorf("signal %s = %g (present %v), want 1: the newest names must carry every signal", sig, got, ok)
		}
	}
}
