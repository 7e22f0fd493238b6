package simulator

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestSleepMode: POST /sleep?level=2 puts the engine to sleep:
// /is_sleeping says so, vllm:engine_sleep_state has discard_all=1 and
// awake=0, a completion is refused with 503 and /health stays 200; POST
// /wake_up undoes it all.
func TestSleepMode(t *testing.T) {
	_, ts := startSim(t, nil)
	state := func() map[string]float64 {
		mfs, _ := scrape(t, ts.URL)
		out := map[string]float64{}
		for _, st := range []string{"awake", "weights_offloaded", "discard_all"} {
			out[st] = value(t, mfs, "vllm:engine_sleep_state", map[string]string{"sleep_state": st})
		}
		return out
	}
	complete := func() int {
		resp := post(t, ts.URL+"/v1/completions", `{"model":"m","prompt":"hi","max_tokens":2}`)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := state(); got["awake"] != 1 || got["discard_all"] != 0 {
		t.Fatalf("awake server's sleep state %v", got)
	}
	status := func(path string) int {
		resp := post(t, ts.URL+path, "")
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := status("/sleep?level=2"); code != http.StatusOK {
		t.Fatalf("POST /sleep: %d", code)
	}
	if code, body := get(t, ts.URL+"/is_sleeping"); code != 200 || !strings.Contains(body, `"is_sleeping":true`) {
		t.Errorf("GET /is_sleeping = %d %s", code, body)
	}
	if got := state(); got["awake"] != 0 || got["weights_offloaded"] != 0 || got["discard_all"] != 1 {
		t.Errorf("sleep state at level 2: %v", got)
	}
	if code := complete(); code != http.StatusServiceUnavailable {
		t.Errorf("completion while sleeping: HTTP %d, want 503", code)
	}
	if code, _ := get(t, ts.URL+"/health"); code != http.StatusOK {
		t.Errorf("/health while sleeping: %d, want 200", code)
	}
	if code := status("/sleep?level=3"); code != http.StatusBadRequest {
		t.Errorf("POST /sleep?level=3: %d, want 400", code)
	}
	if code := status("/wake_up"); code != http.StatusOK {
		t.Fatalf("POST /wake_up: %d", code)
	}
	if code, body := get(t, ts.URL+"/is_sleeping"); code != 200 || !strings.Contains(body, `"is_sleeping":false`) {
		t.Errorf("GET /is_sleeping after wake_up = %d %s", code, body)
	}
	if got := state(); got["awake"] != 1 {
		t.Errorf("sleep state after wake_up: %v", got)
	}
	if code := complete(); code != http.StatusOK {
		t.Errorf("completion after wake_up: HTTP %d", code)
	}
}

// TestEngineSurfaces: each engine's /metrics carries its own names (none
// of vLLM's for the others), its error body shape and health answer.
func TestEngineSurfaces(t *testing.T) {
	for _, tc := range []struct {
		engine, family, errFragment string
	}{
		{EngineVLLM, "vllm:num_requests_running", `"error":{"message"`},
		{EngineRay, "ray_vllm_num_requests_running", `"error":{"message"`},
		{EngineNIM, "num_requests_running", `"error":{"message"`},
		{EngineSGLang, "sglang:num_running_reqs", `"object":"error"`},
		{EngineTRTLLM, "trtllm_num_requests_running", `"object":"error"`},
		{EngineTriton, "nv_trt_llm_request_metrics", `{"detail":`},
		{EngineLlamaCpp, "llamacpp:requests_processing", `"type":"not_found_error"`},
		{EngineDynamo, "dynamo_frontend_inflight_requests", `{"error":"`},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			_, ts := startSim(t, func(c *Config) { c.Engine = tc.engine })
			mfs, _ := scrape(t, ts.URL)
			if mfs[tc.family] == nil {
				t.Errorf("/metrics has no %s", tc.family)
			}
			for name := range mfs {
				if tc.engine != EngineVLLM && strings.HasPrefix(name, "vllm:") {
					t.Errorf("/metrics of %s has vLLM's %s", tc.engine, name)
				}
			}
			resp := post(t, ts.URL+"/v1/completions", `{"model":"nope","prompt":"hi","max_tokens":2}`)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), tc.errFragment) {
				t.Errorf("unknown model: %d %s, want 404 with %s", resp.StatusCode, b, tc.errFragment)
			}
			if code, _ := get(t, ts.URL+"/health"); code != http.StatusOK {
				t.Errorf("/health = %d", code)
			}
			// NIM serves its metrics on /v1/metrics by default.
			if code, body := get(t, ts.URL+"/v1/metrics"); (code == http.StatusOK && strings.Contains(body, "\n"+tc.family+"{")) != (tc.engine == EngineNIM) {
				t.Errorf("/v1/metrics = %d: NIM's own path, and only NIM's", code)
			}
			if code, _ := get(t, ts.URL+"/is_sleeping"); (code == http.StatusOK) != (tc.engine == EngineVLLM) {
				t.Errorf("/is_sleeping = %d: sleep mode is vLLM's own", code)
			}
		})
	}
}
