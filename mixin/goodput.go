package mixin

import "fmt"

// Goodput (docs/metrics.md, "Goodput"): the share of probes that succeeded
// and met every latency objective the prober's configuration sets for their
// module (`slos` there: ttft, tpot, itl_p99, e2e), as vLLM's bench
// --goodput, GuideLLM's slo_attainment, AIPerf and inference-perf define it.
// The prober judges each probe and counts it in
// vllm_probe_goodput_probes_total{result="good"|"bad"}; these rules only
// count. Modules without objectives export no such series: no SLI, no alert.

// Goodput recording rule name prefixes (the SLI window is appended).
const (
	GoodputRatioRecord  = "target_module:vllm_probe_goodput:ratio_rate"
	GoodputBadRecord    = "target_module:vllm_probe_goodput_bad:increase"
	GoodputProbesRecord = "target_module:vllm_probe_goodput_probes:increase"
	goodputMetric       = "vllm_probe_goodput_probes_total"
	objectiveMetric     = "vllm_probe_objective_misses_total"
)

// goodputSLIs is the goodput SLO, when slo.yml sets one.
func (s *Spec) goodputSLIs() []sli {
	if s.SLOs.Goodput == nil {
		return nil
	}
	return []sli{{SLOGoodput, "VLLMGoodputBudgetBurn", "probes succeed and meet every latency objective of their module",
		*s.SLOs.Goodput, GoodputRatioRecord, GoodputBadRecord}}
}

func (s *Spec) validateGoodput() []error {
	g := s.SLOs.Goodput
	if g == nil {
		return nil
	}
	var errs []error
	if g.Objective <= 0 || g.Objective >= 100 {
		errs = append(errs, fmt.Errorf("slos.goodput.objective must be a percentage between 0 and 100 (exclusive), got %v", g.Objective))
	}
	if g.ThresholdSeconds != 0 {
		errs = append(errs, fmt.Errorf("slos.goodput.threshold_seconds is not used: the latency objectives are the prober's (slos in its configuration)"))
	}
	if g.ShedIsFailure {
		errs = append(errs, fmt.Errorf("slos.goodput.shed_is_failure is used by the availability SLO only"))
	}
	return errs
}

// goodputIncrease is the increase of the goodput counter with result
// selector sel over window r, summed over the prober replicas and the
// vantages (like the latency SLIs: every vantage's probes count).
func (s *Spec) goodputIncrease(sel, r string) string {
	return acrossReplicas("result, "+VantageLabel, fmt.Sprintf("increase(%s{%s%s}[%s])", goodputMetric, s.jobSel(), sel, r))
}

// GoodputGroups returns the goodput recording rules, per SLI window: the
// probes judged, the bad ones, and the attainment (good / judged).
func (s *Spec) GoodputGroups() []Group {
	if s.SLOs.Goodput == nil {
		return nil
	}
	var rules []Rule
	why := "Only modules with goodput objectives (slos in the prober's configuration) export it."
	for _, nominal := range s.Windows {
		w := nominal.String()
		r := s.window(nominal).String()
		rules = append(rules,
			optionalSeries(goodputMetric, why, Rule{
				Record: GoodputProbesRecord + w,
				Expr:   s.goodputIncrease("", r),
			}),
			optionalSeries(goodputMetric, why, Rule{
				Record: GoodputBadRecord + w,
				Expr:   s.goodputIncrease(`,result="bad"`, r),
			}),
			Rule{
				Record: GoodputRatioRecord + w,
				Expr: lines(
					"clamp(",
					"  1 - "+GoodputBadRecord+w,
					"    / ("+GoodputProbesRecord+w+" > 0),",
					"  0, 1",
					")",
				),
			},
		)
	}
	return []Group{{Name: "vllm_prober.goodput.rules", Rules: rules, Comment: lines(
		"Goodput: a probe is good when it succeeded and met every latency objective",
		"the prober's configuration sets for its module (slos: ttft, tpot, itl_p99, e2e);",
		"a failed probe is bad. The prober judges, these rules count (summing the prober",
		"replicas and the vantages away). Modules without objectives have no series.",
	)}}
}

// ratioCounters are the error and total counters of a counter-ratio SLO
// (availability, goodput) as Pyrra reads them.
func (s *Spec) ratioCounters(slo string) (errors, total string) {
	if slo == SLOGoodput {
		return fmt.Sprintf(`%s{%s,result="bad"}`, goodputMetric, s.jobSel()), fmt.Sprintf("%s{%s}", goodputMetric, s.jobSel())
	}
	return fmt.Sprintf("vllm_probe_failures_total{%s}", s.failureSel()), fmt.Sprintf("vllm_probe_attempts_total{%s}", s.jobSel())
}

// goodputSloth is the goodput SLO's Sloth error and total queries.
func (s *Spec) goodputSloth() (errorQuery, totalQuery string) {
	rate := func(sel string) string {
		return acrossReplicas("result, "+VantageLabel, fmt.Sprintf("rate(%s{%s%s}[%s])", goodputMetric, s.jobSel(), sel, slothWindow))
	}
	return rate(`,result="bad"`), rate("")
}

// goodputOpenSLO is the goodput SLO's OpenSLO bad and total counter queries.
func (s *Spec) goodputOpenSLO() (bad, total string) {
	sum := func(sel string) string {
		return fmt.Sprintf("sum without (instance, pod, result, %s) (%s{%s%s})", VantageLabel, goodputMetric, s.jobSel(), sel)
	}
	return sum(`,result="bad"`), sum("")
}
