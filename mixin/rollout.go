package mixin

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/model"
)

// Rollout is the canary-versus-stable section of the SLO file: two targets
// share a value of GroupLabel and differ in TrackLabel (Canary, Stable), and
// the recording rules compare their probes over each of Windows.
type Rollout struct {
	GroupLabel string `yaml:"group_label"`
	TrackLabel string `yaml:"track_label"`
	Canary     string `yaml:"canary"`
	Stable     string `yaml:"stable"`
	// Windows are the analysis windows rules are written for.
	Windows []model.Duration `yaml:"windows"`
	// MinProbes is the no-data guard: a track with fewer successful probes
	// (attempts, for the success ratio) in a window has no ratio, so an
	// analysis reads "no data", never a pass.
	MinProbes int `yaml:"min_probes"`
}

// RolloutLatencies are the probe latencies compared between canary and
// stable, by the name used in the recorded series.
var RolloutLatencies = []struct{ Name, Metric string }{
	{"ttft", "vllm_probe_time_to_first_token_seconds"},
	{"tpot", "vllm_probe_time_per_output_token_seconds"},
	{"itl", "vllm_probe_inter_token_latency_seconds"},
	{"e2e", "vllm_probe_e2e_latency_seconds"},
}

func (r *Rollout) validate() error {
	var errs []string
	for _, l := range []struct{ key, v string }{{"group_label", r.GroupLabel}, {"track_label", r.TrackLabel}} {
		if !model.LegacyValidation.IsValidLabelName(l.v) {
			errs = append(errs, fmt.Sprintf("rollout.%s %q is not a label name", l.key, l.v))
		}
	}
	if r.GroupLabel == r.TrackLabel {
		errs = append(errs, "rollout.group_label and rollout.track_label must differ")
	}
	for _, v := range []struct{ key, v string }{{"canary", r.Canary}, {"stable", r.Stable}} {
		if v.v == "" || strings.ContainsAny(v.v, "\"\\\n|") {
			errs = append(errs, fmt.Sprintf("rollout.%s %q must be a non-empty label value without quotes, backslashes or |", v.key, v.v))
		}
	}
	if r.Canary == r.Stable {
		errs = append(errs, "rollout.canary and rollout.stable must differ")
	}
	if len(r.Windows) == 0 {
		errs = append(errs, "rollout.windows must not be empty")
	}
	for _, w := range r.Windows {
		if w <= 0 {
			errs = append(errs, fmt.Sprintf("rollout.windows: window %s must be positive", w))
		}
	}
	if r.MinProbes < 1 {
		errs = append(errs, fmt.Sprintf("rollout.min_probes must be at least 1, got %d", r.MinProbes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// RolloutRatioRecord is the name of the canary/stable ratio of latency
// name ("ttft", "tpot", "itl", "e2e") over nominal window w.
func RolloutRatioRecord(name string, w model.Duration) string {
	return "group_module:vllm_probe_" + name + "_seconds:canary_stable_ratio" + w.String()
}

// RolloutSuccessRecord is the name of each track's probe success ratio over
// nominal window w.
func RolloutSuccessRecord(w model.Duration) string {
	return "group_module_track:vllm_probe_success:ratio" + w.String()
}

// RolloutGroups returns the canary-versus-stable recording rules, one group
// per window. Per track and vantage: the successful probes, the mean of each
// latency and the success ratio; per group, module and vantage, the
// canary/stable ratio of each latency (above 1: the canary is slower). The
// verdicts an analysis reads take the best vantage: the highest success
// ratio of each track and the lowest latency ratio, so that a fault seen
// from one vantage only (its path: network, DNS, a proxy, the prober
// replica) fails no canary, while one every vantage sees does (docs/rollouts.md,
// "Vantages"). Without vantages the series have no vantage label and the best
// vantage is the only one. A track with fewer than min_probes successful
// probes (attempts, for the success ratio) in the window gets no series, so
// an analysis that reads them sees no data rather than a ratio of one or two
// probes.
func (s *Spec) RolloutGroups() []Group {
	r := s.Rollout
	if len(r.Windows) == 0 {
		return nil
	}
	by := fmt.Sprintf("%s, module, %s, %s", r.GroupLabel, r.TrackLabel, VantageLabel)
	sel := fmt.Sprintf("%s, %s=~%q", s.jobSel(), r.TrackLabel, r.Canary+"|"+r.Stable)
	track := func(v string) string { return fmt.Sprintf("{%s=%q}", r.TrackLabel, v) }
	// The track label exists only while a canary and a stable target are
	// configured: pint's promql/series would report every selector on it.
	trackMatcher := fmt.Sprintf("{%s=~%q}", r.TrackLabel, r.Canary+"|"+r.Stable)
	optional := func(rule Rule) Rule {
		return withComment(rule, lines(
			"The "+r.TrackLabel+" label exists only while canary and stable targets are configured.",
			"pint disable promql/series("+trackMatcher+")",
		))
	}
	var groups []Group
	for _, nominal := range r.Windows {
		w := nominal.String()
		rng := s.window(nominal).String()
		successes := "group_module_track_vantage:vllm_probe_successes:increase" + w
		attempts := "group_module_track_vantage:vllm_probe_attempts:increase" + w
		successRatio := "group_module_track_vantage:vllm_probe_success:ratio" + w
		rules := []Rule{
			// Probe histograms in classic form `or` native form (docs/runbook.md, "Histogram modes").
			optional(eitherHistogramForm(Rule{Record: successes, Expr: lines(
				fmt.Sprintf("sum by (%s) (increase(vllm_probe_time_to_first_token_seconds_count{%s}[%s]))", by, sel, rng),
				"or",
				fmt.Sprintf("histogram_count(sum by (%s) (increase(vllm_probe_time_to_first_token_seconds{%s}[%s])))", by, sel, rng),
			)}, "vllm_probe_time_to_first_token_seconds_count", "vllm_probe_time_to_first_token_seconds")),
			optional(Rule{Record: attempts, Expr: fmt.Sprintf("sum by (%s) (increase(vllm_probe_attempts_total{%s}[%s]))", by, sel, rng)}),
			optional(Rule{Record: successRatio, Expr: lines(
				"clamp(",
				fmt.Sprintf("  1 - (sum by (%s) (increase(vllm_probe_failures_total{%s}[%s])) or 0 * %s)", by, sel, rng, attempts),
				fmt.Sprintf("    / (%s >= %d),", attempts, r.MinProbes),
				"  0, 1",
				")",
			)}),
			// The best vantage's: a track fails only where every vantage sees it fail.
			Rule{Record: RolloutSuccessRecord(nominal), Expr: fmt.Sprintf("max without (%s) (%s)", VantageLabel, successRatio)},
		}
		for _, l := range RolloutLatencies {
			mean := "group_module_track_vantage:vllm_probe_" + l.Name + "_seconds:mean" + w
			perVantage := "group_module_vantage:vllm_probe_" + l.Name + "_seconds:canary_stable_ratio" + w
			guarded := func(v string) string {
				return fmt.Sprintf("%s%s\n    and on (%s, module, %s) (%s%s >= %d)", mean, track(v), r.GroupLabel, VantageLabel, successes, track(v), r.MinProbes)
			}
			rules = append(rules,
				optional(eitherHistogramForm(Rule{Record: mean, Expr: lines(
					fmt.Sprintf("sum by (%s) (rate(%s_sum{%s}[%s]))", by, l.Metric, sel, rng),
					fmt.Sprintf("  / (sum by (%s) (rate(%s_count{%s}[%s])) > 0)", by, l.Metric, sel, rng),
					"or",
					fmt.Sprintf("histogram_sum(sum by (%s) (rate(%s{%s}[%s])))", by, l.Metric, sel, rng),
					fmt.Sprintf("  / (histogram_count(sum by (%s) (rate(%s{%s}[%s]))) > 0)", by, l.Metric, sel, rng),
				)}, l.Metric+"_sum", l.Metric+"_count", l.Metric)),
				Rule{Record: perVantage, Expr: lines(
					"(",
					"  "+guarded(r.Canary),
					")",
					"/ ignoring ("+r.TrackLabel+")",
					"(",
					"  "+guarded(r.Stable),
					")",
				)},
				// The best vantage's: the canary is slower only where every vantage sees it.
				Rule{Record: RolloutRatioRecord(l.Name, nominal), Expr: fmt.Sprintf("min without (%s) (%s)", VantageLabel, perVantage)},
			)
		}
		groups = append(groups, Group{Name: "vllm_prober.rollout.rules." + w, Rules: rules, Comment: lines(
			fmt.Sprintf("Canary versus stable over %s (docs/rollouts.md): targets sharing %s, with", w, r.GroupLabel),
			fmt.Sprintf("%s %q and %q. A track with fewer than %d successful probes in the", r.TrackLabel, r.Canary, r.Stable, r.MinProbes),
			"window has no ratio: an analysis reads no data, never a pass. Each vantage is",
			"judged apart and the best vantage decides: a fault of one vantage's path fails no canary.",
		)})
	}
	return groups
}
