package compare

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-prober/vllm_prober/prober"
)

const goodputCfg = `
global: {probe_interval: 10s, rate_window: 1m}
modules:
  same: {prober: completions, prompt: hi, slos: {ttft: 200ms, tpot: 50ms}}
  other: {prober: completions, prompt: hi, slos: {ttft: 500ms}}
  none: {prober: completions, prompt: hi}
baselines:
  - {name: good, file: goodput.yaml}
  - {name: unknown, file: goodput.yaml}
targets:
  - {name: t1, url: "http://127.0.0.1:1", model: m, baseline: good, modules: [same, other, none]}
  - {name: t2, url: "http://127.0.0.1:2", model: m, baseline: unknown, modules: [same]}
`

// vllm_probe_expected_goodput_ratio is the baseline's attainment at the live
// load, and only for a module whose goodput objectives equal the
// baseline's: not for other objectives, none, or a baseline whose
// objectives are unknown.
func TestExpectedGoodputOnlyWithTheBaselinesObjectives(t *testing.T) {
	for _, pushed := range []bool{false, true} {
		t.Run(fmt.Sprintf("pushed=%v", pushed), func(t *testing.T) { expectedGoodputOnlyWithTheBaselinesObjectives(t, pushed) })
	}
}

func expectedGoodputOnlyWithTheBaselinesObjectives(t *testing.T, pushed bool) {
	probes := &fakeProbes{means: map[string]prober.Means{}, models: map[string]string{"t1": "m", "t2": "m"}}
	server := &fakeServer{running: 1, waiting: 1, loadOK: true}
	reg := prometheus.NewRegistry()
	c := New(Options{Registerer: reg, Probes: probes, Server: server, Pushed: pushed})
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	if err := c.Apply(loadConfig(t, goodputCfg)); err != nil {
		t.Fatal(err)
	}
	c.Scraped("t1")
	c.Scraped("t2")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vllm_probe_expected_goodput_ratio Goodput attainment (good / all requests, failed ones counted against it) the baseline predicts at the live load (running + waiting + 1). Only where the baseline's goodput objectives equal the module's.
# TYPE vllm_probe_expected_goodput_ratio gauge
vllm_probe_expected_goodput_ratio{baseline="good",model="m",module="same",target="t1"} 0.75
`), "vllm_probe_expected_goodput_ratio"); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct{ target, module, why string }{
		{"t1", "other", "differ from the module's (ttft:500)"},
		{"t1", "none", "the module sets no goodput objectives"},
		{"t2", "same", "no slo_attainment measured against stated objectives"},
	} {
		cmp, ok := c.Compare(tc.target, tc.module)
		if !ok {
			t.Fatalf("Compare(%s, %s): no comparison", tc.target, tc.module)
		}
		if !math.IsNaN(cmp.Goodput) || !strings.Contains(cmp.GoodputWhy, tc.why) {
			t.Errorf("Compare(%s, %s): goodput %v, why %q; want none because %q", tc.target, tc.module, cmp.Goodput, cmp.GoodputWhy, tc.why)
		}
	}
	if cmp, _ := c.Compare("t1", "same"); cmp.Goodput != 0.75 || cmp.GoodputWhy != "" {
		t.Errorf("Compare(t1, same): goodput %v (%q), want 0.75", cmp.Goodput, cmp.GoodputWhy)
	}
	// Probes that met a load of 5 compare with the baseline there.
	probes.means["t1/same"] = prober.Means{TTFT: 0.1, TPOT: 0.01, ITL: 0.01, E2E: 1, OutputTokens: 10, Load: 5, N: 4}
	if cmp, _ := c.Compare("t1", "same"); cmp.Goodput != 0.5 {
		t.Errorf("at the probes' load 5: goodput %v, want 0.5", cmp.Goodput)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
