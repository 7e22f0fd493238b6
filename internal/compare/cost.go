package compare

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/internal/safemetric"
)

// The cost series of a target with a price_per_hour (docs/metrics.md,
// "Cost"): what a million tokens cost at the server's live token rates and
// at its baseline's saturation throughput, and the share of the paid
// capacity the live rate leaves unused. A target without a price exports
// none of them.

// Cost metric names.
const (
	mPrice         = "vllm_price_per_hour"
	mCostOutput    = "vllm_cost_per_million_output_tokens"
	mCostTokens    = "vllm_cost_per_million_tokens"
	mCostOutputSat = "vllm_cost_per_million_output_tokens_at_saturation"
	mCostTokensSat = "vllm_cost_per_million_tokens_at_saturation"
	mUnused        = "vllm_capacity_unused_ratio"
)

func costDescs(d map[string]*prometheus.Desc, static []string) {
	l := append([]string{labelTarget}, static...)
	for name, help := range map[string]string{
		mPrice:         "The target's price_per_hour as configured: what one hour of its hardware costs, in the currency the configuration states.",
		mCostOutput:    "Cost of a million output tokens at the server's live generation rate: price_per_hour / (generation tokens/s × 3600) × 1e6. Absent while the server generates nothing.",
		mCostTokens:    "Cost of a million tokens in all (prompt + output) at the server's live rates: price_per_hour / ((prompt + generation tokens/s) × 3600) × 1e6. Absent while the server processes nothing.",
		mCostOutputSat: "Cost of a million output tokens at the baseline's saturation output throughput: price_per_hour / (saturation output tokens/s × 3600) × 1e6.",
		mCostTokensSat: "Cost of a million tokens in all at the baseline's saturation point: price_per_hour / (its prompt + output tokens/s × 3600) × 1e6. Absent when the baseline gives output throughput only.",
		mUnused:        "Share (0-1) of the paid output capacity unused: 1 − live generation tokens/s ÷ the baseline's saturation output tokens/s, clamped to [0,1].",
	} {
		d[name] = prometheus.NewDesc(name, help, l, nil)
	}
}

// Cost holds the cost series of one target; NaN means absent.
type Cost struct {
	// PerMillionOutput and PerMillionTokens are at the live rates.
	PerMillionOutput, PerMillionTokens float64
	// ...AtSaturation are at the baseline's saturation throughput.
	PerMillionOutputAtSaturation, PerMillionTokensAtSaturation float64
	// Unused is the share of the saturation output throughput the live
	// generation rate leaves unused.
	Unused float64
}

// ComputeCost derives a target's cost series from its price per hour, the
// server's live output and prompt + output token rates (tokens/s, NaN when
// unknown) and the baseline's saturation output and prompt + output
// throughputs (tokens/s, 0 when unknown):
//
//	per million output tokens = price / (output rate × 3600) × 1e6   (absent at a rate of 0: never +Inf)
//	per million tokens        = price / (token rate × 3600) × 1e6    (likewise)
//	... at saturation         = the same at the saturation throughputs
//	unused                    = clamp01(1 − output rate / saturation output)   (1 at a rate of 0)
func ComputeCost(price, outputRate, tokenRate, satOutput, satTokens float64) Cost {
	perMillion := func(rate float64) float64 {
		if math.IsNaN(rate) || rate <= 0 {
			return math.NaN()
		}
		return price / (rate * 3600) * 1e6
	}
	c := Cost{
		PerMillionOutput: perMillion(outputRate), PerMillionTokens: perMillion(tokenRate),
		PerMillionOutputAtSaturation: perMillion(satOutput), PerMillionTokensAtSaturation: perMillion(satTokens),
		Unused: math.NaN(),
	}
	if satOutput > 0 && !math.IsNaN(outputRate) {
		c.Unused = clamp01(1 - outputRate/satOutput)
	}
	return c
}

// liveRates sums the server's output and prompt + output token rates over
// its models: the price is the whole server's. NaN while no model has a rate
// (the first scrape of a window).
func liveRates(v *collector.View) (output, tokens float64) {
	output, tokens = math.NaN(), math.NaN()
	for _, mv := range v.Models {
		dv := mv.Derived
		if dv == nil || math.IsNaN(dv.GenerationTokensPerSecond) {
			continue
		}
		if math.IsNaN(output) {
			output = 0
		}
		output += dv.GenerationTokensPerSecond
		if !math.IsNaN(dv.PromptTokensPerSecond) {
			if math.IsNaN(tokens) {
				tokens = 0
			}
			tokens += dv.PromptTokensPerSecond + dv.GenerationTokensPerSecond
		}
	}
	return output, tokens
}

// collectCost sends the cost series of t, which has a price.
func collectCost(ch chan<- prometheus.Metric, errs *safemetric.Errors, st *state, v *collector.View, t scraped) {
	lv := append([]string{t.name}, t.static...)
	satOutput, satTokens := 0.0, 0.0
	if l, ok := st.byTarget[t.name]; ok {
		satOutput, satTokens = l.b.SaturationOutputThroughput(), l.b.SaturationTotalTokenThroughput()
	}
	output, tokens := liveRates(v)
	c := ComputeCost(*t.price, output, tokens, satOutput, satTokens)
	for _, s := range []struct {
		name string
		v    float64
	}{{mPrice, *t.price}, {mCostOutput, c.PerMillionOutput}, {mCostTokens, c.PerMillionTokens},
		{mCostOutputSat, c.PerMillionOutputAtSaturation}, {mCostTokensSat, c.PerMillionTokensAtSaturation}, {mUnused, c.Unused}} {
		if !math.IsNaN(s.v) && !math.IsInf(s.v, 0) {
			errs.Send(ch, t.name, st.descs[s.name], prometheus.GaugeValue, s.v, lv...)
		}
	}
}
