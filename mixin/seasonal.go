package mixin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
)

// Seasonal is the seasonal-baseline section of the SLO file: the probe's
// latency quantiles and success ratio over Window, the same hour one to Seasons
// seasons (weeks) ago, their median as the seasonal expectation, and a season's
// mean and standard deviation for a z-score.
type Seasonal struct {
	// Window is the resolution of the seasonal series (an hour); one of sli_windows,
	// so that the success ratio is the SLI rule of that window.
	Window model.Duration `yaml:"window"`
	// Season is the period of the traffic's shape (a week).
	Season model.Duration `yaml:"season"`
	// Seasons is how many past seasons the expectation is the median of.
	Seasons int `yaml:"seasons"`
	// Quantile is the latency quantile recorded (0.9: the p90 of the window's probes).
	Quantile float64 `yaml:"quantile"`
	// MinStddevRatio floors the standard deviation at this share of the season's
	// mean, so that a flat week does not turn jitter into a large z-score.
	MinStddevRatio float64 `yaml:"min_stddev_ratio"`
}

// SeasonalLatencies are the probe latencies with a seasonal baseline, by the
// value of the `metric` label (as in vllm_probe_regression_ratio).
var SeasonalLatencies = []struct{ Name, Metric string }{
	{"ttft", "vllm_probe_time_to_first_token_seconds"},
	{"tpot", "vllm_probe_time_per_output_token_seconds"},
	{"e2e", "vllm_probe_e2e_latency_seconds"},
}

func (z *Seasonal) validate(windows []model.Duration) error {
	var errs []string
	if !slices.Contains(windows, z.Window) {
		errs = append(errs, fmt.Sprintf("seasonal.window %s is not one of sli_windows", z.Window))
	}
	if z.Season <= z.Window {
		errs = append(errs, fmt.Sprintf("seasonal.season %s must be longer than seasonal.window %s", z.Season, z.Window))
	}
	if z.Seasons < 2 {
		errs = append(errs, fmt.Sprintf("seasonal.seasons must be at least 2, got %d", z.Seasons))
	}
	if z.Quantile <= 0 || z.Quantile >= 1 {
		errs = append(errs, fmt.Sprintf("seasonal.quantile must be between 0 and 1 (exclusive), got %v", z.Quantile))
	}
	if z.MinStddevRatio <= 0 || z.MinStddevRatio >= 1 {
		errs = append(errs, fmt.Sprintf("seasonal.min_stddev_ratio must be between 0 and 1 (exclusive), got %v", z.MinStddevRatio))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// SeasonalLatencyRecord is the latency quantile over the seasonal window, one
// series per `metric` (ttft, tpot, e2e), with the quantile in label `quantile`.
func (s *Spec) SeasonalLatencyRecord() string {
	return "target_module:vllm_probe_latency_seconds:quantile_rate" + s.Seasonal.Window.String()
}

// SeasonalSuccessRecord is the probe success ratio over the seasonal window
// (the SLI rule of that window).
func (s *Spec) SeasonalSuccessRecord() string {
	return "target_module:vllm_probe_success:ratio_rate" + s.Seasonal.Window.String()
}

// Suffixes of the series derived from a seasonal source.
const (
	SeasonalAgoSuffix      = "_seasons_ago"   // the same hour N seasons ago, label seasons_ago="N"
	SeasonalExpectedSuffix = "_seasonal"      // the median of those: the seasonal expectation
	SeasonalMeanSuffix     = "_season_avg"    // the mean over the last season
	SeasonalStddevSuffix   = "_season_stddev" // the standard deviation over the last season
	SeasonalZScoreSuffix   = "_seasonal_zscore"
)

// seasonalEnabled reports whether the SLO file has a seasonal section.
func (s *Spec) seasonalEnabled() bool { return s.Seasonal.Window != 0 }

// SeasonalGroups returns the seasonal recording rules: the latency quantiles
// over the window, and for them and the success ratio the same hour one to
// Seasons seasons ago, the median of those (the expectation), the season's mean
// and standard deviation, and the z-score (value − expectation) ÷ stddev. The
// expectation exists only once every past season has data: until then the
// z-score yields nothing rather than noise.
func (s *Spec) SeasonalGroups() []Group {
	if !s.seasonalEnabled() {
		return nil
	}
	z := s.Seasonal
	job := s.jobSel()
	r := s.window(z.Window).String()
	q := formatFloat(z.Quantile)
	base := s.SeasonalLatencyRecord()
	var rules []Rule
	for _, l := range SeasonalLatencies {
		rules = append(rules, eitherHistogramForm(Rule{
			Record: base,
			Expr: lines(
				fmt.Sprintf("histogram_quantile(%s, %s)", q, acrossReplicas("", fmt.Sprintf("rate(%s_bucket{%s}[%s])", l.Metric, job, r))),
				"or",
				fmt.Sprintf("histogram_quantile(%s, %s)", q, acrossReplicas("", fmt.Sprintf("rate(%s{%s}[%s])", l.Metric, job, r))),
			),
			Labels: []Label{{"metric", l.Name}, {"quantile", q}},
		}, l.Metric+"_bucket", l.Metric))
	}
	season := s.window(z.Season)
	for _, src := range []string{base, s.SeasonalSuccessRecord()} {
		ago := src + SeasonalAgoSuffix
		for n := 1; n <= z.Seasons; n++ {
			rules = append(rules, Rule{
				Record: ago,
				Expr:   fmt.Sprintf("%s offset %s", src, model.Duration(int64(season)*int64(n))),
				Labels: []Label{{"seasons_ago", strconv.Itoa(n)}},
			})
		}
		mean, stddev := src+SeasonalMeanSuffix, src+SeasonalStddevSuffix
		minRatio := formatFloat(z.MinStddevRatio)
		rules = append(rules,
			Rule{
				Record: src + SeasonalExpectedSuffix,
				Expr: lines(
					fmt.Sprintf("quantile without (seasons_ago) (0.5, %s)", ago),
					"and",
					fmt.Sprintf("count without (seasons_ago) (%s) == %d", ago, z.Seasons),
				),
			},
			Rule{Record: mean, Expr: fmt.Sprintf("avg_over_time(%s[%s])", src, season)},
			Rule{Record: stddev, Expr: fmt.Sprintf("stddev_over_time(%s[%s])", src, season)},
			Rule{
				Record: src + SeasonalZScoreSuffix,
				Expr: lines(
					"("+src+" - "+src+SeasonalExpectedSuffix+")",
					"/ (",
					"  ("+stddev+" > "+minRatio+" * "+mean+")",
					"  or",
					"  ("+minRatio+" * "+mean+" > 0)",
					")",
				),
			},
		)
	}
	return []Group{{Name: "vllm_prober.seasonal.rules", Rules: rules, Comment: lines(
		fmt.Sprintf("Seasonal baselines (docs/metrics.md, \"Seasonal baselines\"): the p%s latencies and the", percentile(z.Quantile)),
		fmt.Sprintf("success ratio over %s, the same hour 1 to %d seasons (%s) ago, their median (the", z.Window, z.Seasons, z.Season),
		"seasonal expectation), the season's mean and standard deviation, and the z-score",
		"(value - expectation) / stddev, the stddev floored at "+formatFloat(z.MinStddevRatio)+" of the mean. The expectation",
		fmt.Sprintf("needs all %d past seasons: Prometheus must retain %s + %s, and until then", z.Seasons, model.Duration(int64(z.Season)*int64(z.Seasons)), z.Window),
		"the z-score is absent, not noise.",
	)}}
}

// seasonalAlerts returns VLLMLatencyUnusualForThisHour: a latency's z-score
// against its seasonal expectation above the threshold and the benchmark
// regression ratio of that latency above 1, so that a load the benchmark
// predicts stays quiet and an hour that is merely busier than the benchmark,
// as it is every week, does not open a ticket.
func (s *Spec) seasonalAlerts() []Rule {
	if !s.seasonalEnabled() {
		return nil
	}
	a := s.Alerts.LatencyUnusualForThisHour
	th := formatFloat(*a.Threshold)
	names := make([]string, len(SeasonalLatencies))
	for i, l := range SeasonalLatencies {
		names[i] = l.Name
	}
	return []Rule{optionalSeries("vllm_probe_regression_ratio",
		"The regression ratio exists only for targets compared with a baseline; the z-score only after "+strconv.Itoa(s.Seasonal.Seasons)+" seasons of history.",
		s.alert("VLLMLatencyUnusualForThisHour", a,
			lines(
				s.SeasonalLatencyRecord()+SeasonalZScoreSuffix+" > "+th,
				"and on (job, target, module, metric)",
				fmt.Sprintf("vllm_probe_regression_ratio{%s,metric=~%q} > 1", s.jobSel(), strings.Join(names, "|")),
			),
			"vLLM latency is unusual for this hour of the week.",
			`The p`+percentile(s.Seasonal.Quantile)+` {{ $labels.metric }} of `+whoM+` over the last `+s.Seasonal.Window.String()+` is `+value+` standard deviations above its seasonal expectation (the median of the same hour 1 to `+strconv.Itoa(s.Seasonal.Seasons)+` weeks ago) and worse than its benchmark: this hour is slow for this hour, not merely busy.`),
	)}
}

// percentile prints a quantile as a percentile: 0.9 → "90", 0.995 → "99.5".
func percentile(q float64) string { return strconv.FormatFloat(q*100, 'g', 10, 64) }
