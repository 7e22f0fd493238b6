package compare

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// specBaselines are two baselines of one load point: "spec" from runs with
// speculative decoding (vllm bench serve's spec_decode_acceptance_length
// 3.4: 2.4 draft tokens accepted per draft, plus the one the target model
// adds), "plain" from runs without.
const specBaselines = `version: 1
baselines:
  - name: spec
    model: m
    source: {tool: vllm bench serve, format: vllm-serve-json, files: [spec.json]}
    points:
      - concurrency: 1
        request_throughput: 2
        output_throughput: 128
        ttft_seconds: {mean: 0.05}
        tpot_seconds: {mean: 0.01}
        spec_decode_acceptance_length: 3.4
  - name: plain
    model: m
    source: {tool: vllm bench serve, format: vllm-serve-json, files: [plain.json]}
    points:
      - concurrency: 1
        request_throughput: 2
        output_throughput: 128
        ttft_seconds: {mean: 0.05}
        tpot_seconds: {mean: 0.01}
`

// TestSpecDecodeRegression runs the prober, the collector and the
// regression series on simulators with speculative decoding:
// vllm_server_spec_decode_regression_ratio is the baseline's accepted
// tokens per draft over the live one (vllm_server_spec_decode_accepted_tokens_per_draft,
// from the simulator's counters): about 1 where the simulator accepts as
// many draft tokens as the baseline's runs (4 proposed, 60 % accepted),
// about 2 where it accepts half as many, and absent where either side has
// no speculative decoding.
func TestSpecDecodeRegression(t *testing.T) {
	sim := func(specTokens int, rate float64) string {
		_, srv, _ := simtest.Start(t, func(c *simulator.Config) {
			c.Model, c.TTFT, c.ITL = "m", 5*time.Millisecond, time.Millisecond
			c.SpecDecodeTokens, c.SpecAcceptRate = specTokens, rate
		})
		return srv.URL
	}
	same, half, none := sim(4, 0.6), sim(4, 0.3), sim(0, 0)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "baselines.yaml"), []byte(specBaselines), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {probe_interval: 300ms, scrape_interval: 200ms, scrape_timeout: 150ms, rate_window: 2s, stall_timeout: 5s}
modules:
  gen: {prober: completions, prompt: "hello there", max_tokens: 40, ignore_eos: true}
baselines:
  - {name: spec, file: baselines.yaml}
  - {name: plain, file: baselines.yaml}
targets:
  - {name: same, url: %[1]q, baseline: spec}
  - {name: half, url: %[2]q, baseline: spec}
  - {name: none, url: %[3]q, baseline: spec}
  - {name: plain, url: %[1]q, baseline: plain}
`, same, half, none)), dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := startStack(t, cfg, 5*time.Second, 2*time.Second)

	// values gathers, in one pass, each target's regression ratio and live
	// accepted tokens per draft.
	values := func() (ratio, live map[string]float64) {
		ratio, live = map[string]float64{}, map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			var into map[string]float64
			switch mf.GetName() {
			case "vllm_server_spec_decode_regression_ratio":
				into = ratio
			case "vllm_server_spec_decode_accepted_tokens_per_draft":
				into = live
			default:
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "target" {
						into[l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		return ratio, live
	}
	var ratio, live map[string]float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		ratio, live = values()
		_, plainLive := live["plain"]
		consistent := len(ratio) == 2 && plainLive
		for _, target := range []string{"same", "half"} {
			r, ok := ratio[target]
			consistent = consistent && ok && math.Abs(r-2.4/live[target]) < 1e-9
		}
		if consistent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never the baseline's 2.4 accepted tokens per draft over the live value for same and half, no other ratio, and a live value for plain: ratios %v, live %v", ratio, live)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("ratios %v, live accepted per draft %v", ratio, live)
	if r := ratio["same"]; r < 0.9 || r > 1.1 {
		t.Errorf("same acceptance as the baseline: ratio %.3f, want about 1", r)
	}
	if r := ratio["half"]; r < 1.8 || r > 2.2 {
		t.Errorf("half the baseline's acceptance: ratio %.3f, want about 2", r)
	}
	if _, ok := live["none"]; ok {
		t.Errorf("a simulator without speculative decoding has accepted tokens per draft %g", live["none"])
	}
}
