package mixin

import "fmt"

// Fleet cost recording rules (docs/metrics.md, "Cost"): the price of every
// priced target the fleet scrapes, its generation rate, and what a million
// output tokens cost the fleet at that rate. Each input is deduplicated
// over the prober replicas and the vantages first: every scraping vantage
// exports the same server and price series.

// Cost recording rule names.
const (
	FleetPriceRecord = "job:vllm_price_per_hour:sum"
	FleetRateRecord  = "job:vllm_server_generation_tokens_per_second:sum_priced"
	FleetCostRecord  = "job:vllm_cost_per_million_output_tokens:ratio"
)

// CostGroups returns the fleet cost recording rules.
func (s *Spec) CostGroups() []Group {
	job := s.jobSel()
	dedup := func(metric string) string {
		return fmt.Sprintf("max without (%s, %s) (%s{%s})", replicaLabels, VantageLabel, metric, job)
	}
	why := "Only targets with a price_per_hour export it: a fleet without prices has none."
	return []Group{{Name: "vllm_prober.cost.rules", Comment: lines(
		"Fleet cost: every priced target's price and generation rate, deduplicated over",
		"the prober replicas and vantages, and what a million output tokens cost the",
		"fleet now. No series while nothing is priced or nothing generates (never +Inf).",
	), Rules: []Rule{
		optionalSeries("vllm_price_per_hour", why, Rule{
			Record: FleetPriceRecord,
			Expr:   fmt.Sprintf("sum by (job) (%s)", dedup("vllm_price_per_hour")),
		}),
		optionalSeries("vllm_price_per_hour", why, Rule{
			Record: FleetRateRecord,
			Expr: lines(
				"sum by (job) (",
				"  "+dedup("vllm_server_generation_tokens_per_second"),
				fmt.Sprintf("  and on (job, target) vllm_price_per_hour{%s}", job),
				")",
			),
		}),
		{
			Record: FleetCostRecord,
			Expr:   fmt.Sprintf("%s / on (job) (%s > 0) / 3600 * 1e6", FleetPriceRecord, FleetRateRecord),
		},
	}}}
}

// costRow is the endpoint dashboard's cost row.
func costRow() row {
	cost := func(metric, legend string) target {
		return target{Expr: `max by (target) (` + metric + `{` + serverSel + `})`, Legend: legend}
	}
	return row{Title: "Cost", Panels: []panel{
		{Type: "timeseries", Title: "Cost per million tokens: live vs saturation", W: 12, H: 7, Unit: "short", Min: f64(0),
			Description: "What a million tokens cost at the server's live token rates and at the baseline's saturation throughput, from the target's price_per_hour, in the currency its configuration states (vllm_cost_per_million_*; docs/metrics.md, \"Cost\"). Empty for a target without a price; the live lines break while the server generates nothing.",
			Targets: []target{
				cost("vllm_cost_per_million_output_tokens", "output, live"),
				cost("vllm_cost_per_million_output_tokens_at_saturation", "output, at saturation"),
				cost("vllm_cost_per_million_tokens", "all tokens, live"),
				cost("vllm_cost_per_million_tokens_at_saturation", "all tokens, at saturation"),
			}},
		{Type: "timeseries", Title: "Paid capacity unused", W: 6, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
			Description: "Share of the paid output capacity the live generation rate leaves idle: 1 − generation tokens/s ÷ the baseline's saturation output tokens/s (vllm_capacity_unused_ratio). Live cost ÷ saturated cost = 1 ÷ (1 − this).",
			Targets:     []target{cost("vllm_capacity_unused_ratio", "unused")}},
		{Type: "stat", Title: "Fleet cost per million output tokens", W: 6, H: 7, Unit: "short",
			Description: "Every priced target's price over their summed generation rate (" + FleetCostRecord + "), in the configuration's currency: what a million output tokens cost the fleet now.",
			Targets:     []target{{Expr: `max by (job) (` + FleetCostRecord + `{job=~"$job"})`, Legend: "{{job}}"}}},
	}}
}
