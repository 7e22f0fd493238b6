// Package mixin renders the vLLM monitoring mixin: the recording rules and alerts in
// alerts/ are generated from the objectives in mixin/slo.yml, and the Grafana
// dashboards in dashboards/ are generated from the panel lists in this package.
//
// The committed files are the generator's default output; tests keep them in sync
// (go test ./mixin/... -update rewrites them).
package mixin

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	yaml "go.yaml.in/yaml/v2"
)

// Spec is the content of mixin/slo.yml: every objective, threshold, window and
// `for` duration the generated rules use. Nothing else in the generator is tunable.
type Spec struct {
	// ProberJob is the Prometheus job name vllm_prober is scraped under.
	ProberJob string `yaml:"prober_job"`
	// RunbookURL is the address of docs/runbook.md; each alert links to
	// RunbookURL + "#" + lower-cased alert name.
	RunbookURL string `yaml:"runbook_url"`
	// Buckets are the probe histogram boundaries (seconds) the prober exports.
	// Latency SLO thresholds must be one of them.
	Buckets []float64 `yaml:"histogram_buckets"`
	// Windows are the SLI windows recording rules are written for.
	Windows []model.Duration `yaml:"sli_windows"`
	// MinBadProbes is the minimum-probes guard of the burn-rate alerts: a burn-rate
	// alert fires only when at least this many probes were bad (failed, or slower
	// than the threshold) in its long window.
	MinBadProbes int `yaml:"min_bad_probes"`
	// ScrapeGapWindow is how long the alerts on vllm_server_* gauges hold a
	// gauge's last value across failed /metrics scrapes (during which the prober
	// exports no vllm_server_* series): last_over_time(gauge[ScrapeGapWindow]).
	ScrapeGapWindow model.Duration `yaml:"scrape_gap_window"`
	// SLOPeriod is the error-budget period of the objectives (the burn-rate rows
	// below are for it); the SLO specs for Pyrra, Sloth and OpenSLO carry it.
	SLOPeriod model.Duration `yaml:"slo_period"`
	// BurnRates are the multi-window multi-burn-rate rows (SRE workbook table 5-8).
	BurnRates []BurnRate `yaml:"burn_rates"`
	// SLOs are the availability and latency objectives.
	SLOs SLOs `yaml:"slos"`
	// Alerts holds the thresholds of the alerts that are not burn-rate alerts.
	Alerts Alerts `yaml:"alerts"`
	// Rollout is the canary-versus-stable comparison (rollout.go); without
	// it no rollout rules are written.
	Rollout Rollout `yaml:"rollout,omitempty"`
	// Seasonal is the seasonal baseline (seasonal.go); without it no seasonal
	// rules and no VLLMLatencyUnusualForThisHour are written.
	Seasonal Seasonal `yaml:"seasonal,omitempty"`

	// scale maps nominal SLI windows to the windows evaluated; set by Scaled.
	scale map[model.Duration]model.Duration
}

// BurnRate is one row of the multi-window, multi-burn-rate table.
type BurnRate struct {
	Severity    string         `yaml:"severity"`
	LongWindow  model.Duration `yaml:"long_window"`
	ShortWindow model.Duration `yaml:"short_window"`
	Factor      float64        `yaml:"factor"`
	For         model.Duration `yaml:"for"`
}

// SLOs are the three service level objectives of a probed endpoint.
type SLOs struct {
	// Availability: share of probes that succeed.
	Availability Objective `yaml:"availability"`
	// TTFT: share of successful probes whose time to first token is at most ThresholdSeconds.
	TTFT Objective `yaml:"ttft"`
	// E2E: share of successful probes whose end-to-end latency is at most ThresholdSeconds.
	E2E Objective `yaml:"e2e"`
	// Goodput: share of probes that are good (succeeded and met every
	// latency objective the prober's configuration sets for the module);
	// nil: no goodput SLO (goodput.go).
	Goodput *Objective `yaml:"goodput,omitempty"`
}

// Objective is a target percentage (99.5 means 99.5 %) and, for latency SLOs, the
// latency threshold (a histogram bucket boundary).
type Objective struct {
	Objective        float64 `yaml:"objective"`
	ThresholdSeconds float64 `yaml:"threshold_seconds,omitempty"`
	// ShedIsFailure (availability only): whether a probe a gateway refused by
	// load shedding (reason "shed"), or an engine refused at admission at its
	// queue limit (reason "overloaded"), counts against the objective. When false
	// (the default) a shed probe is not a failure of the SLI; the
	// gateway_shedding alert watches the share of shed probes instead.
	ShedIsFailure bool `yaml:"shed_is_failure,omitempty"`
}

// Alerts holds one AlertSpec per non-SLO alert.
type Alerts struct {
	EngineHung   AlertSpec `yaml:"engine_hung"`
	EndpointDown AlertSpec `yaml:"endpoint_down"`
	// EndpointUnreachableFromVantage: some vantages fail /health, others reach it.
	EndpointUnreachableFromVantage AlertSpec `yaml:"endpoint_unreachable_from_vantage"`
	ProbesFailing                  AlertSpec `yaml:"probes_failing"`
	MetricsScrapeFailing           AlertSpec `yaml:"metrics_scrape_failing"`
	ProberAbsent                   AlertSpec `yaml:"prober_absent"`
	KVCacheSaturated               AlertSpec `yaml:"kv_cache_saturated"`
	RequestsQueueing               AlertSpec `yaml:"requests_queueing"`
	PreemptionsHigh                AlertSpec `yaml:"preemptions_high"`
	HeadroomLow                    AlertSpec `yaml:"headroom_low"`
	ThroughputRegression           AlertSpec `yaml:"throughput_regression"`
	LatencyRegression              AlertSpec `yaml:"latency_regression"`
	ProbeBudgetExhausted           AlertSpec `yaml:"probe_budget_exhausted"`
	ConfigReloadFailed             AlertSpec `yaml:"config_reload_failed"`
	WrongAnswers                   AlertSpec `yaml:"wrong_answers"`
	GatewayShedding                AlertSpec `yaml:"gateway_shedding"`
	EngineSleeping                 AlertSpec `yaml:"engine_sleeping"`
	// The layer alerts of a gateway target (layers.go): a member slower than
	// the others, a member failing behind a gateway that still answers, the
	// gateway's own overhead.
	GatewayMemberSlow    AlertSpec `yaml:"gateway_member_slow"`
	GatewayMemberFailing AlertSpec `yaml:"gateway_member_failing"`
	GatewayOverheadHigh  AlertSpec `yaml:"gateway_overhead_high"`
	// GatewaySheddingOutage: a gateway shedding nearly every probe (above
	// its threshold) for a sustained window is an outage to its users,
	// whatever shed_is_failure says.
	GatewaySheddingOutage AlertSpec `yaml:"gateway_shedding_outage"`
	// The KV transfer of prefill/decode disaggregation, between the prefill
	// and the decode pool: slow (its mean above threshold seconds over
	// window) or failing (failures per second above threshold over window).
	KVTransferSlow    AlertSpec `yaml:"kv_transfer_slow"`
	KVTransferFailing AlertSpec `yaml:"kv_transfer_failing"`
	// GoodputBelowBaseline (goodput.go): the live goodput attainment over
	// window (one of the SLI windows) below the baseline's expected
	// attainment at the live load by more than threshold (a ratio: 0.05 is 5
	// points). Required only with a goodput SLO.
	GoodputBelowBaseline AlertSpec `yaml:"goodput_below_baseline,omitempty"`
	// LatencyUnusualForThisHour is the seasonal alert (seasonal.go); its
	// threshold is a z-score. Required only with a seasonal section.
	LatencyUnusualForThisHour AlertSpec `yaml:"latency_unusual_for_this_hour,omitempty"`
}

// AlertSpec is the tunable part of one alert. Which of Threshold and Window an
// alert uses is documented next to it in mixin/slo.yml; validation checks them.
type AlertSpec struct {
	Severity  string         `yaml:"severity"`
	For       model.Duration `yaml:"for"`
	Threshold *float64       `yaml:"threshold,omitempty"`
	Window    model.Duration `yaml:"window,omitempty"`
}

// LoadSpec reads and validates an SLO file.
func LoadSpec(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading SLO file: %w", err)
	}
	s, err := ParseSpec(b)
	if err != nil {
		return nil, fmt.Errorf("SLO file %s: %w", path, err)
	}
	return s, nil
}

// ParseSpec decodes an SLO document strictly (unknown keys are errors) and validates it.
func ParseSpec(b []byte) (*Spec, error) {
	var s Spec
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

var validSeverities = []string{"critical", "warning", "info"}

// Validate checks every field the generator relies on.
func (s *Spec) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if !model.LabelValue(s.ProberJob).IsValid() || s.ProberJob == "" || strings.ContainsAny(s.ProberJob, "\"\\\n") {
		add("prober_job %q must be a non-empty job name without quotes or backslashes", s.ProberJob)
	}
	if !strings.HasPrefix(s.RunbookURL, "https://") && !strings.HasPrefix(s.RunbookURL, "http://") {
		add("runbook_url %q must be an http(s) URL", s.RunbookURL)
	}
	if strings.Contains(s.RunbookURL, "#") {
		add("runbook_url %q must not contain a fragment; the alert name is appended", s.RunbookURL)
	}
	if len(s.Buckets) == 0 {
		add("histogram_buckets must not be empty")
	}
	if !slices.IsSorted(s.Buckets) {
		add("histogram_buckets must be sorted ascending")
	}
	if len(s.Windows) == 0 {
		add("sli_windows must not be empty")
	}
	for _, w := range s.Windows {
		if w <= 0 {
			add("sli_windows: window %s must be positive", w)
		}
	}
	if s.ScrapeGapWindow <= 0 {
		add("scrape_gap_window must be positive")
	}
	if s.SLOPeriod <= 0 {
		add("slo_period must be positive")
	}
	if s.MinBadProbes < 1 {
		add("min_bad_probes must be at least 1, got %d", s.MinBadProbes)
	}
	if len(s.BurnRates) == 0 {
		add("burn_rates must not be empty")
	}
	for i, br := range s.BurnRates {
		if !slices.Contains(validSeverities, br.Severity) {
			add("burn_rates[%d]: severity %q must be one of %s", i, br.Severity, strings.Join(validSeverities, ", "))
		}
		if !slices.Contains(s.Windows, br.LongWindow) {
			add("burn_rates[%d]: long_window %s is not one of sli_windows", i, br.LongWindow)
		}
		if !slices.Contains(s.Windows, br.ShortWindow) {
			add("burn_rates[%d]: short_window %s is not one of sli_windows", i, br.ShortWindow)
		}
		if br.ShortWindow >= br.LongWindow {
			add("burn_rates[%d]: short_window %s must be shorter than long_window %s", i, br.ShortWindow, br.LongWindow)
		}
		if br.Factor <= 0 {
			add("burn_rates[%d]: factor must be positive", i)
		}
	}
	for _, o := range []struct {
		name    string
		obj     Objective
		latency bool
	}{{"availability", s.SLOs.Availability, false}, {"ttft", s.SLOs.TTFT, true}, {"e2e", s.SLOs.E2E, true}} {
		if o.obj.Objective <= 0 || o.obj.Objective >= 100 {
			add("slos.%s.objective must be a percentage between 0 and 100 (exclusive), got %v", o.name, o.obj.Objective)
		}
		if o.latency && !slices.Contains(s.Buckets, o.obj.ThresholdSeconds) {
			add("slos.%s.threshold_seconds %v must be one of histogram_buckets", o.name, o.obj.ThresholdSeconds)
		}
		if !o.latency && o.obj.ThresholdSeconds != 0 {
			add("slos.%s.threshold_seconds is not used by an availability SLO", o.name)
		}
		if o.latency && o.obj.ShedIsFailure {
			add("slos.%s.shed_is_failure is used by the availability SLO only", o.name)
		}
	}
	errs = append(errs, s.validateGoodput()...)
	for _, a := range s.alertSpecs() {
		if !slices.Contains(validSeverities, a.spec.Severity) {
			add("alerts.%s.severity %q must be one of %s", a.key, a.spec.Severity, strings.Join(validSeverities, ", "))
		}
		if a.spec.For <= 0 {
			add("alerts.%s.for must be positive", a.key)
		}
		switch {
		case a.threshold && a.spec.Threshold == nil:
			add("alerts.%s.threshold is required", a.key)
		case !a.threshold && a.spec.Threshold != nil:
			add("alerts.%s.threshold is not used by this alert", a.key)
		}
		switch {
		case a.window && a.spec.Window <= 0:
			add("alerts.%s.window is required", a.key)
		case !a.window && a.spec.Window != 0:
			add("alerts.%s.window is not used by this alert", a.key)
		}
	}
	if s.seasonalEnabled() {
		if err := s.Seasonal.validate(s.Windows); err != nil {
			errs = append(errs, err)
		}
	}
	if r := s.Rollout; len(r.Windows) > 0 || r.GroupLabel != "" || r.TrackLabel != "" || r.Canary != "" || r.Stable != "" || r.MinProbes != 0 {
		if err := s.Rollout.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

type namedAlertSpec struct {
	key       string
	spec      *AlertSpec
	threshold bool // the alert needs Threshold
	window    bool // the alert needs Window
}

func (s *Spec) alertSpecs() []namedAlertSpec {
	a := &s.Alerts
	specs := []namedAlertSpec{
		{"engine_hung", &a.EngineHung, true, true},
		{"endpoint_down", &a.EndpointDown, false, false},
		{"endpoint_unreachable_from_vantage", &a.EndpointUnreachableFromVantage, false, false},
		{"probes_failing", &a.ProbesFailing, true, true},
		{"metrics_scrape_failing", &a.MetricsScrapeFailing, true, true},
		{"prober_absent", &a.ProberAbsent, false, false},
		{"kv_cache_saturated", &a.KVCacheSaturated, true, false},
		{"requests_queueing", &a.RequestsQueueing, true, false},
		{"preemptions_high", &a.PreemptionsHigh, true, true},
		{"headroom_low", &a.HeadroomLow, true, false},
		{"throughput_regression", &a.ThroughputRegression, true, false},
		{"latency_regression", &a.LatencyRegression, true, false},
		{"probe_budget_exhausted", &a.ProbeBudgetExhausted, false, true},
		{"config_reload_failed", &a.ConfigReloadFailed, false, false},
		{"wrong_answers", &a.WrongAnswers, true, true},
		{"gateway_shedding", &a.GatewayShedding, true, true},
		{"engine_sleeping", &a.EngineSleeping, true, false},
		{"gateway_member_slow", &a.GatewayMemberSlow, true, false},
		{"gateway_member_failing", &a.GatewayMemberFailing, true, true},
		{"gateway_overhead_high", &a.GatewayOverheadHigh, true, false},
		{"gateway_shedding_outage", &a.GatewaySheddingOutage, true, true},
		{"kv_transfer_slow", &a.KVTransferSlow, true, true},
		{"kv_transfer_failing", &a.KVTransferFailing, true, true},
	}
	if s.seasonalEnabled() {
		specs = append(specs, namedAlertSpec{"latency_unusual_for_this_hour", &a.LatencyUnusualForThisHour, true, false})
	}
	if s.SLOs.Goodput != nil {
		specs = append(specs, namedAlertSpec{"goodput_below_baseline", &a.GoodputBelowBaseline, true, true})
	}
	return specs
}

// Scaled returns a copy of s with every `for` duration and every evaluation window
// multiplied by factor, rounded to whole seconds (at least 1s). Recording-rule
// names keep their nominal window (…:ratio_rate5m stays the name of the scaled 5m
// window) so dashboards and tests keep working. It exists for end-to-end tests on a
// real Prometheus: a factor of 0.02 turns 30m into 36s and 3d into 1h26m24s.
// Scaled(1) returns an identical copy.
func (s *Spec) Scaled(factor float64) (*Spec, error) {
	if factor <= 0 || math.IsNaN(factor) || math.IsInf(factor, 0) {
		return nil, fmt.Errorf("scale factor must be a positive number, got %v", factor)
	}
	c := *s
	c.Buckets = slices.Clone(s.Buckets)
	c.Windows = slices.Clone(s.Windows)
	c.BurnRates = slices.Clone(s.BurnRates)
	if factor == 1 {
		return &c, nil
	}
	scale := func(d model.Duration) model.Duration {
		if d == 0 {
			return 0
		}
		sec := math.Round(time.Duration(d).Seconds() * factor)
		return model.Duration(time.Duration(max(sec, 1)) * time.Second)
	}
	c.scale = make(map[model.Duration]model.Duration, len(s.Windows))
	for _, w := range s.Windows {
		c.scale[w] = scale(w)
	}
	for _, w := range s.Rollout.Windows {
		c.scale[w] = scale(w)
	}
	if s.seasonalEnabled() {
		c.scale[s.Seasonal.Season] = scale(s.Seasonal.Season)
	}
	for i := range c.BurnRates {
		c.BurnRates[i].For = scale(c.BurnRates[i].For)
	}
	c.ScrapeGapWindow = scale(c.ScrapeGapWindow)
	for _, a := range c.alertSpecs() {
		a.spec.For = scale(a.spec.For)
		a.spec.Window = scale(a.spec.Window)
	}
	// goodput_below_baseline's window names an SLI window (the record it
	// reads keeps its nominal name; window() scales its range).
	c.Alerts.GoodputBelowBaseline.Window = s.Alerts.GoodputBelowBaseline.Window
	return &c, nil
}

// window returns the range actually evaluated for the nominal SLI window w.
func (s *Spec) window(w model.Duration) model.Duration {
	if d, ok := s.scale[w]; ok {
		return d
	}
	return w
}

// formatFloat prints a number the way Go's Prometheus client prints bucket
// boundaries and the way PromQL accepts it ("1", "2.5", "0.005").
func formatFloat(f float64) string {
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// leMatcher returns a matcher selecting the bucket whose upper bound is f, both as
// Prometheus 2.x stores it from the Go client ("2") and as Prometheus 3.x
// normalises integral bounds on ingestion ("2.0").
func leMatcher(f float64) string {
	s := formatFloat(f)
	if strings.ContainsAny(s, ".eE") {
		return `le="` + s + `"`
	}
	return `le=~"` + s + `(\\.0)?"`
}

// parseRatio parses a ratio literal of objectiveRatio.
func parseRatio(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

// objectiveRatio turns a percentage into a ratio literal: 99.5 → "0.995".
func objectiveRatio(pct float64) string {
	// Percentages in the SLO file have a few decimals; dividing the decimal
	// representation avoids printing 0.9950000000000001.
	r, err := strconv.ParseFloat(shiftDecimal(formatFloat(pct), -2), 64)
	if err != nil {
		return formatFloat(pct / 100)
	}
	return formatFloat(r)
}

// shiftDecimal moves the decimal point of a plain decimal string by n places (n<0: left).
func shiftDecimal(s string, n int) string {
	if strings.ContainsAny(s, "eE") {
		return s
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := intPart + frac
	point := len(intPart) + n
	for point <= 0 {
		digits = "0" + digits
		point++
	}
	var b bytes.Buffer
	b.WriteString(digits[:point])
	b.WriteByte('.')
	b.WriteString(digits[point:])
	return b.String()
}
