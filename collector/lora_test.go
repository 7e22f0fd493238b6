package collector

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/simulator"
)

// adapterProbes probes a LoRA adapter with a fixed mean TTFT.
type adapterProbes struct {
	model string
	mean  float64
}

func (p adapterProbes) MeanTTFT(string, time.Time) (float64, int) { return p.mean, 3 }
func (p adapterProbes) Model(string) string                       { return p.model }

// TestLoRAJoin: a target that probes a LoRA adapter on vllm_sim gets the
// adapter's TTFT gap from the base model's server figures (vLLM counts
// adapter traffic under the base model_name), and the served models with
// their base from /v1/models' parent.
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

	const probeMean = 0.5
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(reg, nil, adapterProbes{model: "lora-a", mean: probeMean}, nil)
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

	server, ok := gathered(t, reg, "vllm_server_time_to_first_token_seconds", map[string]string{"target": "a", "model": "base/model", "stat": "mean"})
	if !ok {
		t.Fatal("no server TTFT for the base model: adapter traffic not counted under it")
	}
	gap, ok := gathered(t, reg, "vllm_probe_server_ttft_gap_seconds", map[string]string{"target": "a", "model": "lora-a"})
	if !ok {
		t.Fatal("no TTFT gap for the adapter")
	}
	if math.Abs(gap-(probeMean-server)) > 1e-9 {
		t.Errorf("gap = %g, want probes %g − base model's server TTFT %g", gap, probeMean, server)
	}
	for id, base := range map[string]string{"base/model": "base/model", "lora-a": "base/model", "lora-b": "base/model"} {
		if _, ok := gathered(t, reg, "vllm_server_served_model_info", map[string]string{"target": "a", "model": id, "base_model": base}); !ok {
			t.Errorf("no vllm_server_served_model_info{model=%q, base_model=%q}", id, base)
		}
	}
}
