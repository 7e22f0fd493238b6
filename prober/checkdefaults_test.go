package prober

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
)

// TestCheckedModulesSendGreedySeededRequests: a module with an expect sends
// temperature 0 and the fixed seed unless it sets its own; a plain module
// sends no seed.
func TestCheckedModulesSendGreedySeededRequests(t *testing.T) {
	f, ts := newFake(t, "m")
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(loadConfig(t, `
modules:
  checked: {prober: completions, prompt: "2+2=", max_tokens: 5, expect: {regex: "t0"}}
  own: {prober: completions, prompt: "2+2=", max_tokens: 5, expect: {regex: "t0"}, temperature: 0.5, seed: 7}
  plain: {prober: completions, prompt: "hi", max_tokens: 5}
targets:
  - {name: t, url: `+ts.URL+`, model: m, probe_interval: 1h}
`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		module string
		temp   float64
		seed   any
	}{
		{"checked", 0, float64(config.DefaultCheckSeed)},
		{"own", 0.5, float64(7)},
		{"plain", 0, nil},
	} {
		res, _, err := m.ProbeNow(context.Background(), "t", tc.module)
		if err != nil || !res.Success {
			t.Fatalf("%s: %v %+v", tc.module, err, res)
		}
		f.mu.Lock()
		last := f.bodies[len(f.bodies)-1]
		f.mu.Unlock()
		var body map[string]any
		if err := json.Unmarshal([]byte(last), &body); err != nil {
			t.Fatal(err)
		}
		if body["temperature"] != tc.temp || body["seed"] != tc.seed {
			t.Errorf("%s: temperature %v seed %v, want %v and %v (body %s)", tc.module, body["temperature"], body["seed"], tc.temp, tc.seed, last)
		}
	}
}
