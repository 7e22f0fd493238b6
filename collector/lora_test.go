package collector

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestLoRAJoin: vllm_sim counts a LoRA adapter's traffic under its base
// model's model_name, and the collector tells the base of every served
// model from /v1/models' parent (View.Base), so that compare can give the
// adapter's probes the base model's server figures.
func TestLoRAJoin(t *testing.T) {
	scfg := simulator.DefaultConfig()
	scfg.Model = "base/model"
	scfg.MaxModelLen = 1024
	scfg.KVCacheTokens = 4096
	scfg.TTFT = 20 * time.Millisecond
	scfg.ITL = 5 * time.Millisecond
	scfg.LoRAModules = []simulator.LoRAModule{{Name: "lora-a", Path: "/adapters/a"}, {Name: "lora-b"}}
	sim, err := simulator.New(scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	defer sim.Close()

	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(configFor(t, srv.URL, "10s", 4)); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	ctx := context.Background()
	s.scrapeOnce(ctx)
	for range 3 {
		resp, err := http.Post(srv.URL+"/v1/completions", "application/json",
			bytes.NewBufferString(`{"model":"lora-a","prompt":"hi","max_tokens":3}`))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request to the adapter: %d %s", resp.StatusCode, b.String())
		}
	}
	s.scrapeOnce(ctx)
	s.client.CloseIdleConnections()

	if _, ok := gathered(t, reg, "vllm_server_time_to_first_token_seconds", map[string]string{"target": "a", "model": "base/model", "stat": "mean"}); !ok {
		t.Fatal("no server TTFT for the base model: adapter traffic not counted under it")
	}
	v, ok := m.View("a")
	if !ok || v.Base["lora-a"] != "base/model" {
		t.Errorf("view %v: lora-a's base is not base/model", v.Base)
	}
	if _, ok := v.Model("lora-a"); ok {
		t.Error("the adapter has series of its own; vLLM counts it under the base model")
	}
	for id, base := range map[string]string{"base/model": "base/model", "lora-a": "base/model", "lora-b": "base/model"} {
		if _, ok := gathered(t, reg, "vllm_server_served_model_info", map[string]string{"target": "a", "model": id, "base_model": base}); !ok {
			t.Errorf("no vllm_server_served_model_info{model=%q, base_model=%q}", id, base)
		}
	}
}
