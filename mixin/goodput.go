package mixin

import (
	"fmt"
	"slices"
	"strconv"
)

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
	// GoodputShortfallRecord is the baseline's expected attainment at the
	// live load minus the live attainment over the window of the
	// goodput_below_baseline alert (appended): above 0 is below the baseline.
	GoodputShortfallRecord = "target_module:vllm_probe_goodput_baseline_shortfall:ratio_rate"
	expectedGoodputMetric  = "vllm_probe_expected_goodput_ratio"
	goodputMetric          = "vllm_probe_goodput_probes_total"
	objectiveMetric        = "vllm_probe_objective_misses_total"
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
	a := s.Alerts.GoodputBelowBaseline
	if w := a.Window; w != 0 && !slices.Contains(s.Windows, w) {
		errs = append(errs, fmt.Errorf("alerts.goodput_below_baseline.window %s must be one of the SLI windows (windows: %v): it reads %s<window>", w, s.Windows, GoodputRatioRecord))
	}
	if t := a.Threshold; t != nil && !(*t >= 0 && *t < 1) {
		errs = append(errs, fmt.Errorf("alerts.goodput_below_baseline.threshold %v must be a ratio in [0, 1): how far below the baseline's attainment (0.05: 5 points)", *t))
	}
	return errs
}

// goodputShortfall is the shortfall record: the baseline's expected
// attainment (vllm_probe_expected_goodput_ratio, exported by every prober
// replica and vantage for the pairs whose module's objectives equal the
// baseline's; their max, they agree up to their probes' loads) minus the
// live attainment over the alert's window. The baseline label is kept.
func (s *Spec) goodputShortfall() Rule {
	w := s.Alerts.GoodputBelowBaseline.Window.String()
	return optionalSeries(expectedGoodputMetric,
		"The expected attainment exists only for targets with a baseline whose goodput objectives equal the module's (docs/baselines.md).",
		Rule{
			Record: GoodputShortfallRecord + w,
			Expr: lines(
				fmt.Sprintf("max without (%s, %s) (%s{%s})", replicaLabels, VantageLabel, expectedGoodputMetric, s.jobSel()),
				"  - ignoring (baseline) group_left ()",
				GoodputRatioRecord+w,
			),
		})
}

// goodputBelowBaselineAlert fires when the live attainment is below the
// baseline's expected attainment at the live load by more than the
// threshold for `for`, and at least min_bad_probes probes of the window
// were bad: a handful of probes cannot fire it.
func (s *Spec) goodputBelowBaselineAlert() []Rule {
	if s.SLOs.Goodput == nil {
		return nil
	}
	a := s.Alerts.GoodputBelowBaseline
	w := a.Window.String()
	th := formatFloat(*a.Threshold)
	// pint accepts a directive only for a selector of the query: the
	// alert reads the shortfall record, not the expected series.
	return []Rule{optionalSeries(GoodputShortfallRecord+w,
		"The shortfall exists only for targets with a baseline whose goodput objectives equal the module's (docs/baselines.md).",
		s.alert("VLLMGoodputBelowBaseline", a,
			lines(
				GoodputShortfallRecord+w+"{"+s.jobSel()+"} > "+th,
				"and ignoring (baseline)",
				GoodputBadRecord+w+"{"+s.jobSel()+"} >= "+strconv.Itoa(s.MinBadProbes),
			),
			"vLLM goodput is below its baseline's at the same load.",
			`The goodput attainment of `+whoM+` over `+w+` is `+value+` below what baseline {{ $labels.baseline }} attained at the same load, against the same objectives (threshold `+th+`) for `+a.For.String()+`: fewer requests are good than the benchmark promised.`))}
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
		if nominal == s.Alerts.GoodputBelowBaseline.Window {
			rules = append(rules, s.goodputShortfall())
		}
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

// goodputJudged is the probes of each module judged over the last hour.
const goodputJudged = `sum by (module) (increase(` + goodputMetric + `{` + probeSel + `}[1h]))`

// goodputRow is the endpoint dashboard's goodput row: the attainment per
// module, and per objective (like the TTFT/TPOT attainment tiles of vLLM's
// own overview dashboard, but from the probes, whatever the objective).
func goodputRow() row {
	return row{Title: "Goodput", Panels: []panel{
		{Type: "stat", Title: "Goodput attainment (1h)", W: 6, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
			Description: "Share of the probes of each module that were good over the last hour: succeeded and met every latency objective of the module (slos in the prober's configuration: ttft, tpot, itl_p99, e2e), worst model (" + GoodputRatioRecord + "1h). GuideLLM calls it slo_attainment. VLLMGoodputBudgetBurn burns on it against slos.goodput of mixin/slo.yml.",
			NoValue:     "no module has goodput objectives",
			Thresholds:  []threshold{{"red", nil}, {"orange", f64(0.95)}, {"green", f64(0.99)}},
			Targets:     []target{{Expr: `min by (module) (` + GoodputRatioRecord + `1h{` + probeSel + `})`, Legend: "{{module}}"}}},
		{Type: "stat", Title: "Attainment per objective (1h)", W: 9, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
			Description: "Per module and objective, the share of the hour's judged probes that did not miss it (1 − vllm_probe_objective_misses_total ÷ vllm_probe_goodput_probes_total): which objective costs the goodput. A failed probe misses no objective here; it is bad in the goodput attainment.",
			NoValue:     "no module has goodput objectives",
			Thresholds:  []threshold{{"red", nil}, {"orange", f64(0.95)}, {"green", f64(0.99)}},
			Targets: []target{{Expr: `1 - sum by (module, objective) (increase(` + objectiveMetric + `{` + probeSel + `}[1h])) / on (module) group_left () (` + goodputJudged + ` > 0)`,
				Legend: "{{module}} {{objective}}"}}},
		{Type: "timeseries", Title: "Goodput attainment", W: 9, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
			Description: "Goodput attainment per module over 5m and 1h (" + GoodputRatioRecord + "5m / 1h), worst model.",
			NoValue:     "no module has goodput objectives",
			Targets: []target{
				{Expr: `min by (module) (` + GoodputRatioRecord + `5m{` + probeSel + `})`, Legend: "5m {{module}}"},
				{Expr: `min by (module) (` + GoodputRatioRecord + `1h{` + probeSel + `})`, Legend: "1h {{module}}"},
			}},
	}}
}

// goodputFleetRow is the fleet dashboard's goodput row: every target's
// attainment per module, one tile each.
func goodputFleetRow() row {
	return row{Title: "Goodput", Panels: []panel{
		{Type: "stat", Title: "Goodput attainment (1h)", W: 24, H: 6, Unit: "percentunit", Min: f64(0), Max: f64(1),
			Description: "Per target and module with goodput objectives (slos in the prober's configuration), the share of the last hour's probes that succeeded and met every objective (" + GoodputRatioRecord + "1h), worst model.",
			NoValue:     "no module has goodput objectives",
			Thresholds:  []threshold{{"red", nil}, {"orange", f64(0.95)}, {"green", f64(0.99)}},
			Targets:     []target{{Expr: `min by (target, module) (` + GoodputRatioRecord + `1h{` + probeSel + `})`, Legend: "{{target}} {{module}}"}}},
	}}
}
