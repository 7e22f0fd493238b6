package compare

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// TestJoinsPerEngine runs the prober, the collector and the regression
// series on vllm_sim speaking each engine, every target with a baseline and
// max_num_seqs: the TTFT gap (the probes' model joined with the one the
// server reports: Triton's model name, Dynamo's lower case, llama.cpp's
// unlabelled model), the expected values, the regression ratios and the
// headroom exist for every engine whose /metrics has the signals; the KV
// cache headroom is absent for Dynamo's frontend, which reports no KV
// cache, the throughput headroom for Triton, which counts no tokens.
func TestJoinsPerEngine(t *testing.T) {
	const model = "Org/Sim-7B"
	var targets strings.Builder
	for _, engine := range simulator.EngineNames() {
		_, srv, _ := simtest.Start(t, func(c *simulator.Config) {
			c.Engine, c.Model, c.TTFT, c.ITL = engine, model, 20*time.Millisecond, 2*time.Millisecond
		})
		fmt.Fprintf(&targets, "  - {name: %s, url: %q, model: %q, baseline: llama, max_num_seqs: 8}\n", engine, srv.URL, model)
	}
	cfg := loadConfig(t, `
global: {probe_interval: 500ms, scrape_interval: 250ms, scrape_timeout: 250ms, rate_window: 2s, stall_timeout: 5s}
modules:
  short: {prober: completions, prompt: "hello there", max_tokens: 8, ignore_eos: true}
baselines: [{name: llama, file: llama.yaml}]
targets:
`+targets.String())
	reg, _ := startStack(t, cfg, 5*time.Second, 2*time.Second)

	type series struct {
		name   string
		labels map[string]string
	}
	want := func(engine string) []series {
		out := []series{
			{"vllm_probe_server_ttft_gap_seconds", map[string]string{"model": model}},
			{"vllm_probe_expected_time_to_first_token_seconds", map[string]string{"module": "short"}},
			{"vllm_probe_regression_ratio", map[string]string{"metric": "ttft"}},
			{"vllm_server_expected_generation_tokens_per_second", nil},
			{"vllm_server_headroom_ratio", map[string]string{"resource": "batch_slots"}},
		}
		if engine != simulator.EngineDynamo {
			out = append(out, series{"vllm_server_headroom_ratio", map[string]string{"resource": "kv_cache"}})
		}
		if engine != simulator.EngineTriton {
			out = append(out, series{"vllm_server_headroom_ratio", map[string]string{"resource": "throughput"}})
		}
		return out
	}
	missing := func() []string {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, engine := range simulator.EngineNames() {
			for _, s := range want(engine) {
				if !hasSeries(mfs, s.name, engine, s.labels) {
					out = append(out, fmt.Sprintf("%s %s%v", engine, s.name, s.labels))
				}
			}
		}
		return out
	}
	var left []string
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if left = missing(); len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("joined series never exported:\n%s", strings.Join(left, "\n"))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if hasSeries(mfs, "vllm_server_headroom_ratio", simulator.EngineDynamo, map[string]string{"resource": "kv_cache"}) {
		t.Error("KV cache headroom for Dynamo's frontend, which reports no KV cache")
	}
	if hasSeries(mfs, "vllm_server_headroom_ratio", simulator.EngineTriton, map[string]string{"resource": "throughput"}) {
		t.Error("throughput headroom for Triton, which counts no tokens")
	}
}

// hasSeries reports whether family name has a series of target with every
// label value of want.
func hasSeries(mfs []*dto.MetricFamily, name, target string, want map[string]string) bool {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["target"] != target {
				continue
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			return true
		}
	}
	return false
}
