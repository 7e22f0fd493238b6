package daemon

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// histMean is the mean of the probe histogram family name for (target,
// module) between two expositions: (Δsum / Δcount), and Δcount.
func histMean(before, after map[string][]*model.Sample, name, target, module string) (float64, float64) {
	pick := func(ss map[string][]*model.Sample, suffix string) float64 {
		for _, s := range ss[name] {
			if string(s.Metric[model.MetricNameLabel]) == name+suffix &&
				string(s.Metric["target"]) == target && string(s.Metric["module"]) == module {
				return float64(s.Value)
			}
		}
		return 0
	}
	n := pick(after, "_count") - pick(before, "_count")
	if n <= 0 {
		return 0, 0
	}
	return (pick(after, "_sum") - pick(before, "_sum")) / n, n
}

// TestDisaggregatedTransferSlow: a prefill/decode pair of vllm_sim behind
// llm-d's decision (simtest.PDProxy: prompts over 256 tokens go prefill, KV
// transfer, decode), probed through the proxy with a short module and a
// long one (prefill_tokens 1024), and each pod directly. A KV transfer made
// slow on the decode pod (500 ms) raises the long module's TTFT through the
// gateway by about that much, while the short module's TTFT and TPOT stay
// where they were and each pod's own probes stay healthy: only the
// disaggregated path's TTFT tells it, next to the gateway's prefill-decode
// decisions, the gateway's overhead on the long module (its TTFT minus the
// decode pod's own) and the decode pod's own KV transfer time (vLLM's NIXL
// families, as vllm_sim serves them).
func TestDisaggregatedTransferSlow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs probes for 25 s")
	}
	nixl := func(role string) func(*simulator.Config) {
		return func(c *simulator.Config) {
			c.Model = "sim-model"
			c.TTFT, c.ITL = 60*time.Millisecond, 5*time.Millisecond
			c.KVTransfer = simulator.KVTransferConfig{Connector: simulator.KVConnectorNixl, Role: role}
		}
	}
	prefill := startPlainSim(t, nixl(simulator.KVRoleProducer))
	decode := startPlainSim(t, nixl(simulator.KVRoleConsumer))
	pd := simtest.StartPD(t, prefill.URL, decode.URL, 256)

	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "vllm_prober.yml")}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 1500ms, probe_timeout: 1400ms, scrape_interval: 1s, rate_window: 6s}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 8, ignore_eos: true}
  long: {prober: completions, prompt: "Say hello.", max_tokens: 8, ignore_eos: true, prefill_tokens: 1024}
targets:
  - {name: prefill, url: %q, role: prefill, modules: [short]}
  - {name: decode, url: %q, role: decode, modules: [short, long]}
  - name: pd
    url: %q
    modules: [short, long]
    gateway: {members: [prefill, decode]}
`, prefill.URL, decode.URL, pd.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5, ProbeWindow: 15 * time.Second})

	const ttft, tpot = "vllm_probe_time_to_first_token_seconds", "vllm_probe_time_per_output_token_seconds"
	scrape := func() map[string][]*model.Sample {
		code, body := f.get("/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: HTTP %d", code)
		}
		return parseMetrics(t, body)
	}
	window := func(d time.Duration) (before, after map[string][]*model.Sample) {
		before = scrape()
		time.Sleep(d)
		return before, scrape()
	}
	b0, a0 := window(8 * time.Second)
	b1, a1 := func() (map[string][]*model.Sample, map[string][]*model.Sample) {
		resp, err := http.Post(decode.URL+"/admin/config", "application/json", strings.NewReader(`{"kv_transfer_delay":"500ms"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		time.Sleep(1500 * time.Millisecond) // let the probes in flight finish
		return window(8 * time.Second)
	}()

	type row struct{ series, target, module string }
	rows := []row{{ttft, "pd", "long"}, {ttft, "pd", "short"}, {tpot, "pd", "short"}, {ttft, "decode", "short"}, {ttft, "prefill", "short"}}
	means := map[row][2]float64{}
	for _, r := range rows {
		m0, n0 := histMean(b0, a0, r.series, r.target, r.module)
		m1, n1 := histMean(b1, a1, r.series, r.target, r.module)
		if n0 == 0 || n1 == 0 {
			t.Fatalf("%s{target=%q,module=%q}: no probe in a window (%v, %v)", r.series, r.target, r.module, n0, n1)
		}
		means[r] = [2]float64{m0, m1}
		t.Logf("%s{target=%q,module=%q}: mean %.3fs (%v probes) then %.3fs (%v probes)", r.series, r.target, r.module, m0, n0, m1, n1)
	}
	if l := means[rows[0]]; l[1]-l[0] < 0.4 {
		t.Errorf("the long module's TTFT through the gateway rose by %.3fs with a 500ms transfer, want about 0.5s", l[1]-l[0])
	}
	for _, r := range rows[1:] {
		if m := means[r]; m[1] > m[0]*1.5+0.05 {
			t.Errorf("%s{target=%q,module=%q} rose from %.3fs to %.3fs: only the disaggregated path should", r.series, r.target, r.module, m[0], m[1])
		}
	}
	// The gateway's own view: its decisions say the long probes were disaggregated.
	decided := map[string]float64{}
	for _, s := range a1["vllm_gateway_disagg_decisions_total"] {
		if s.Metric["target"] == "pd" {
			decided[string(s.Metric["decision"])] = float64(s.Value)
		}
	}
	if decided["prefill-decode"] == 0 || decided["decode-only"] == 0 {
		t.Errorf("vllm_gateway_disagg_decisions_total of pd: %v, want both decisions counted", decided)
	}
	// The gateway's overhead on the long module: its TTFT minus the decode
	// pod's own for the same prompt (which the pod prefills itself), the
	// transfer and routing share.
	var overhead float64
	for _, s := range a1["vllm_gateway_overhead_seconds"] {
		if s.Metric["target"] == "pd" && s.Metric["module"] == "long" && s.Metric["stat"] == "median" {
			overhead = float64(s.Value)
		}
	}
	t.Logf("vllm_gateway_overhead_seconds{target=\"pd\",module=\"long\",stat=\"median\"} %.3fs", overhead)
	if overhead < 0.4 {
		t.Errorf("the gateway's overhead on the long module is %.3fs, want the 500ms transfer", overhead)
	}
	// The decode pod's own NIXL view: its transfers now take 500 ms.
	var transfer float64
	for _, s := range a1["vllm_server_kv_transfer_seconds"] {
		if s.Metric["target"] == "decode" && s.Metric["stat"] == "mean" {
			transfer = float64(s.Value)
		}
	}
	t.Logf("vllm_server_kv_transfer_seconds{target=\"decode\",stat=\"mean\"} %.3fs", transfer)
	if transfer < 0.4 {
		t.Errorf("the decode pod's mean KV transfer is %.3fs, want the 500ms pull", transfer)
	}
}
