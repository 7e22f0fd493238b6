package prober

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestOutputTokensEstimatedSeries: vllm_probe_output_tokens_estimated is 1
// for a probe of an engine that sends no usage chunk (the simulator's
// Triton: the tokens are counted from the content events) and 0 for vLLM's
// usage and llama.cpp's timings, and the output token count is right on
// each.
func TestOutputTokensEstimatedSeries(t *testing.T) {
	for _, tc := range []struct {
		engine    string
		estimated float64
	}{
		{simulator.EngineTriton, 1},
		{simulator.EngineVLLM, 0},
		{simulator.EngineLlamaCpp, 0},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			_, ts, cfg := startSim(t, func(c *simulator.Config) { c.Engine = tc.engine })
			conf := loadConfig(t, fmt.Sprintf(`
global: {probe_interval: 1h}
modules:
  short: {prober: chat, messages: [{role: user, content: hi}], max_tokens: 7, ignore_eos: true}
targets:
  - {name: t, url: %s, model: %s}
`, ts.URL, cfg.Model))
			m := NewManager(testOptions(prometheus.NewPedanticRegistry(), nil))
			if err := m.Apply(conf); err != nil {
				t.Fatal(err)
			}
			// /probe's registry: the series a scrape of /probe?target=t&module=short gets.
			res, reg, err := m.ProbeNow(context.Background(), "t", "short")
			if err != nil || !res.Success {
				t.Fatalf("probe: %+v, %v", res, err)
			}
			if res.OutputTokens != 7 {
				t.Errorf("output tokens %d, want 7", res.OutputTokens)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			for _, mf := range mfs {
				if mf.GetName() == "vllm_probe_output_tokens_estimated" {
					for _, mt := range mf.GetMetric() {
						got = append(got, mt.GetGauge().GetValue())
					}
				}
			}
			if len(got) != 1 || got[0] != tc.estimated {
				t.Errorf("vllm_probe_output_tokens_estimated = %v, want [%g]", got, tc.estimated)
			}
		})
	}
}
