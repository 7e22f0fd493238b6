package compare

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/prober"
)

// TestJoinedSeries: the TTFT gap joins the probes with the server's window,
// the headroom the server with the baseline's saturation throughput; the
// probes of a LoRA adapter are joined with its base model's server figures,
// under the adapter's name; a target the collector does not scrape, or whose
// last scrape failed, has neither.
func TestJoinedSeries(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	window := func(ttft, queue float64) *collector.Derived {
		lat := map[string]collector.Latency{"ttft": {Mean: ttft}}
		if queue > 0 {
			lat["queue"] = collector.Latency{Mean: queue}
		}
		return &collector.Derived{Start: start, End: start.Add(2 * time.Second), GenerationTokensPerSecond: 200, Latencies: lat}
	}
	server := &fakeServer{views: map[string]collector.View{
		// Over the window: server TTFT 0.3; 4 running of max_num_seqs 4 and
		// 2 waiting; KV cache 80 % used; 200 tokens/s of the baseline's 384.
		"t1": {MaxNumSeqs: 4, Models: []collector.ModelView{{Name: "m", TTFTIncludesQueue: true,
			Model: &collector.Model{Running: 4, Waiting: 2, KVUsage: 0.8, Engines: 1}, Derived: window(0.3, 0.1)}}},
		// Its TTFT excludes the 0.5 s queue: the gap subtracts it. The
		// probes ask for the adapter, counted under the base model.
		"t2": {Base: map[string]string{"base": "base", "lora-a": "base"}, Models: []collector.ModelView{{Name: "base", TTFTIncludesQueue: false,
			Model: &collector.Model{Running: 0, Waiting: 0, KVUsage: 0.25, Engines: 1}, Derived: window(0.2, 0.5)}}},
	}}
	probes := &fakeProbes{
		means:  map[string]prober.Means{"t1/m1": {TTFT: 0.5, N: 3}, "t2/m1": {TTFT: 0.75, N: 2}},
		models: map[string]string{"t1": "m", "t2": "lora-a"},
	}
	reg := prometheus.NewPedanticRegistry()
	c := New(Options{Registerer: reg, Probes: probes, Server: server})
	if err := c.Apply(loadConfig(t, `
modules: {m1: {prober: completions, prompt: hi}}
baselines: [{name: llama, file: llama.yaml}]
targets:
  - {name: t1, url: "http://127.0.0.1:1", baseline: llama, labels: {preset: small}}
  - {name: t2, url: "http://127.0.0.1:2", labels: {preset: big}}
  - {name: t3, url: "http://127.0.0.1:3", labels: {preset: big}}
  - {name: t4, url: "http://127.0.0.1:4", scrape_metrics: false}
`)); err != nil {
		t.Fatal(err)
	}
	// t1: gap 0.5 − 0.3; headroom kv 1 − 0.8, batch slots 0 (requests wait),
	// throughput 1 − 200/384, overall their minimum. t2: gap 0.75 − 0.2 −
	// 0.5 under the adapter's name; no baseline, no throughput headroom.
	want := `
# HELP vllm_probe_server_ttft_gap_seconds Mean TTFT of the probes minus the server's mean TTFT (plus its mean queue time when its TTFT excludes queueing) over the same window.
# TYPE vllm_probe_server_ttft_gap_seconds gauge
vllm_probe_server_ttft_gap_seconds{model="m",preset="small",target="t1"} 0.2
vllm_probe_server_ttft_gap_seconds{model="lora-a",preset="big",target="t2"} 0.050000000000000044
# HELP vllm_server_headroom_ratio Remaining capacity (0-1) by resource: kv_cache, batch_slots, throughput and overall (their minimum).
# TYPE vllm_server_headroom_ratio gauge
vllm_server_headroom_ratio{model="base",preset="big",resource="kv_cache",target="t2"} 0.75
vllm_server_headroom_ratio{model="base",preset="big",resource="overall",target="t2"} 0.75
vllm_server_headroom_ratio{model="m",preset="small",resource="batch_slots",target="t1"} 0
vllm_server_headroom_ratio{model="m",preset="small",resource="kv_cache",target="t1"} 0.19999999999999996
vllm_server_headroom_ratio{model="m",preset="small",resource="overall",target="t1"} 0
vllm_server_headroom_ratio{model="m",preset="small",resource="throughput",target="t1"} 0.47916666666666663
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm_probe_server_ttft_gap_seconds", "vllm_server_headroom_ratio"); err != nil {
		t.Error(err)
	}
	// The gap compares the same window: the probes are asked from its start.
	if !probes.since.Equal(start) {
		t.Errorf("MeanTTFT since %v, want the window start %v", probes.since, start)
	}
}
