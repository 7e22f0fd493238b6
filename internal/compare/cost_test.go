package compare

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/vllm-prober/vllm_prober/collector"
)

var update = flag.Bool("update", false, "rewrite testdata/cost.golden")

// The worked example of docs/metrics.md ("Cost"): the Lambda report's
// 1xH100 running Llama 3.1 8B FP8 saturates at 3400.4 output tokens/s; the
// price, $2.50 an hour, is an assumption.
const (
	h100Saturation = 3400.4
	h100Price      = 2.50
)

func TestComputeCostFormulas(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name                                string
		price, output, tokens, sat, satTok  float64
		out, tok, outSat, tokSat, unusedVal float64
	}{
		// 2.50 / (3400.4 × 3600) × 1e6 = 0.2042243...; a quarter of the
		// saturation rate costs four times as much per token, 3/4 unused.
		{"h100 quarter load", h100Price, 850.1, 1700.2, h100Saturation, 0,
			0.8168973584807017, 0.40844867924035083, 0.20422433962017542, nan, 0.75},
		{"h100 saturated", h100Price, 3400.4, nan, h100Saturation, 0,
			0.20422433962017542, nan, 0.20422433962017542, nan, 0},
		// Beyond the benchmark's saturation: nothing unused, not a negative share.
		{"above saturation", h100Price, 4000, 4000, h100Saturation, 0,
			0.1736111111111111, 0.1736111111111111, 0.20422433962017542, nan, 0},
		// An idle server: no current cost (never +Inf), all capacity unused.
		{"idle", h100Price, 0, 0, h100Saturation, 0, nan, nan, 0.20422433962017542, nan, 1},
		// Rates unknown (first scrape of a window): only the saturation cost.
		{"no rate yet", h100Price, nan, nan, h100Saturation, 0, nan, nan, 0.20422433962017542, nan, nan},
		// No baseline: the current costs only.
		{"no baseline", 3.6, 1000, 4000, 0, 0, 1, 0.25, nan, nan, nan},
		{"total at saturation", 3.6, 500, 1500, 1000, 3000, 2, 0.6666666666666666, 1, 0.3333333333333333, 0.5},
	} {
		c := ComputeCost(tc.price, tc.output, tc.tokens, tc.sat, tc.satTok)
		for _, f := range []struct {
			what      string
			got, want float64
		}{{"per million output", c.PerMillionOutput, tc.out}, {"per million tokens", c.PerMillionTokens, tc.tok},
			{"per million output at saturation", c.PerMillionOutputAtSaturation, tc.outSat},
			{"per million tokens at saturation", c.PerMillionTokensAtSaturation, tc.tokSat}, {"unused", c.Unused, tc.unusedVal}} {
			// The wants are computed apart (in decimal, by hand and Python):
			// equal to the last bits or so.
			if !(math.Abs(f.got-f.want) <= 1e-12*math.Abs(f.want) || math.IsNaN(f.got) && math.IsNaN(f.want)) {
				t.Errorf("%s: %s = %v, want %v", tc.name, f.what, f.got, f.want)
			}
		}
	}
}

// TestCostSeries: the exposition of the cost series (golden file), from the
// servers' live rates summed over models and the baselines' saturation; a
// target without a price exports no cost series at all.
func TestCostSeries(t *testing.T) {
	rates := func(prompt, gen float64) *collector.Derived {
		return &collector.Derived{PromptTokensPerSecond: prompt, GenerationTokensPerSecond: gen}
	}
	model := func(name string, d *collector.Derived) collector.ModelView {
		return collector.ModelView{Name: name, Model: &collector.Model{Running: 1, Waiting: 0, KVUsage: math.NaN()}, Derived: d}
	}
	server := &fakeServer{views: map[string]collector.View{
		// Two models on one priced H100: their rates add up.
		"h100":      {Models: []collector.ModelView{model("a", rates(500, 600.1)), model("b", rates(350, 250))}},
		"idle":      {Models: []collector.ModelView{model("m", rates(0, 0))}},
		"nobase":    {Models: []collector.ModelView{model("m", rates(3000, 1000))}},
		"withinput": {Models: []collector.ModelView{model("m", rates(1000, 500))}},
		"unpriced":  {Models: []collector.ModelView{model("m", rates(100, 100))}},
	}}
	reg := prometheus.NewPedanticRegistry()
	c := New(Options{Registerer: reg, Probes: &fakeProbes{}, Server: server})
	if err := c.Apply(loadConfig(t, `
modules: {m1: {prober: completions, prompt: hi}}
baselines:
  - {name: lambda-1xh100, file: cost.yaml}
  - {name: with-input, file: cost.yaml}
targets:
  - {name: h100, url: "http://127.0.0.1:1", baseline: lambda-1xh100, price_per_hour: 2.5, labels: {gpu: h100}}
  - {name: idle, url: "http://127.0.0.1:2", baseline: lambda-1xh100, price_per_hour: 2.5}
  - {name: nobase, url: "http://127.0.0.1:3", price_per_hour: 3.6}
  - {name: withinput, url: "http://127.0.0.1:4", baseline: with-input, price_per_hour: 3.6}
  - {name: unpriced, url: "http://127.0.0.1:5", baseline: lambda-1xh100}
`)); err != nil {
		t.Fatal(err)
	}
	names := []string{mPrice, mCostOutput, mCostTokens, mCostOutputSat, mCostTokensSat, mUnused}
	golden := filepath.Join("testdata", "cost.golden")
	if *update {
		var b strings.Builder
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, n := range names {
				if mf.GetName() == n {
					if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(string(want)), names...); err != nil {
		t.Error(err)
	}
	// The target without a price: no cost series, not even a zero.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "target" && l.GetValue() == "unpriced" && (strings.HasPrefix(mf.GetName(), "vllm_cost_") || mf.GetName() == mPrice || mf.GetName() == mUnused) {
					t.Errorf("the target without a price exports %s = %v", mf.GetName(), m.GetGauge().GetValue())
				}
			}
		}
	}
}
