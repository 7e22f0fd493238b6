package mixin

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"go.yaml.in/yaml/v3"
)

// File names written by Render, relative to the output directory.
const (
	RulesFile  = "vllm_prober.rules.yml"
	AlertsFile = "vllm_prober.alerts.yml"
)

// Group is one Prometheus rule group.
type Group struct {
	Name string
	// Comment is written above the group in the rule file, one "# " line per
	// line: what a reader of the generated file must know about its rules.
	Comment string
	Rules   []Rule
}

// Rule is a recording rule (Record set) or an alerting rule (Alert set).
type Rule struct {
	Record      string
	Alert       string
	Expr        string
	For         model.Duration
	Labels      []Label
	Annotations []Label
	// Comment is written above the rule's expr, one "# " line per line: the
	// reason for a linter directive and the directive itself (`pint disable ...`).
	Comment string
}

// Label is an ordered key/value pair (labels and annotations keep the order they
// are written in, so the output is stable and readable).
type Label struct{ Name, Value string }

// SLO names used in the `slo` label of burn-rate alerts.
const (
	SLOAvailability = "availability"
	SLOTTFT         = "ttft"
	SLOE2E          = "e2e"
	SLOGoodput      = "goodput"
)

// sli describes one SLO for the generator.
type sli struct {
	name      string // availability | ttft | e2e
	alert     string // burn-rate alert name
	what      string // human description of a good event
	objective Objective
	ratio     string // recording-rule name prefix of the good ratio (window appended)
	bad       string // recording-rule name prefix of the bad count (window appended)
}

func (s *Spec) slis() []sli {
	return append([]sli{
		{SLOAvailability, "VLLMAvailabilityBudgetBurn", "probes succeed", s.SLOs.Availability,
			"target_module:vllm_probe_success:ratio_rate", "target_module:vllm_probe_failures:increase"},
		{SLOTTFT, "VLLMTTFTBudgetBurn", "successful probes see their first token within " + formatFloat(s.SLOs.TTFT.ThresholdSeconds) + "s",
			s.SLOs.TTFT, "target_module:vllm_probe_ttft_within_slo:ratio_rate", "target_module:vllm_probe_ttft_over_slo:increase"},
		{SLOE2E, "VLLME2EBudgetBurn", "successful probes complete within " + formatFloat(s.SLOs.E2E.ThresholdSeconds) + "s",
			s.SLOs.E2E, "target_module:vllm_probe_e2e_within_slo:ratio_rate", "target_module:vllm_probe_e2e_over_slo:increase"},
	}, s.goodputSLIs()...)
}

// replicaLabels name the prober replica a series was scraped from, never the
// probed endpoint: `instance` (the replica's address; under the chart's
// ServiceMonitor the pod's IP:port, new at every restart) and `pod` (the pod
// name the ServiceMonitor adds). The other labels the ServiceMonitor adds
// (namespace, service, endpoint, container, job) are the same on every replica,
// and sharding adds none: the shard index is only in vllm_prober_shard_info.
// Aggregating these away keeps one SLI series per (target, module) across
// prober restarts, reschedules and reshards.
const replicaLabels = "instance, pod"

// acrossReplicas sums a per-replica expression over the prober replicas.
func acrossReplicas(extra, expr string) string {
	l := replicaLabels
	if extra != "" {
		l += ", " + extra
	}
	return fmt.Sprintf("sum without (%s) (%s)", l, expr)
}

// VantageLabel names the place a prober replica probes from (--vantage). A
// deployment without it (one vantage) has no such label, and every rule reads
// as if the aggregations over it were not there.
const VantageLabel = "vantage"

// acrossVantages aggregates the per-vantage series of expr with op (min, max,
// sum) into one per target: the SLIs count what the endpoint did, not what
// each path to it saw. Over series without a vantage label it is the identity.
func acrossVantages(op, expr string) string {
	if strings.Contains(expr, "\n") {
		return fmt.Sprintf("%s without (%s) (\n%s\n)", op, VantageLabel, indent(expr, "  "))
	}
	return fmt.Sprintf("%s without (%s) (%s)", op, VantageLabel, expr)
}

// RecordingGroups returns the recording rules: per SLI window, probe attempt and
// failure counts, the probe success ratio, and for TTFT and E2E the count of probes
// over the threshold and the ratio of probes within it. Every rule aggregates the
// prober replica away (replicaLabels): increase() runs per replica series, so a
// series that moved from one replica to another mid-window counts on both sides,
// and the sum is the window's total for the (target, module).
func (s *Spec) RecordingGroups() []Group {
	job := s.jobSel()
	var rules []Rule
	for _, nominal := range s.Windows {
		w := nominal.String()
		r := s.window(nominal).String()
		attempts := acrossReplicas("", fmt.Sprintf("increase(vllm_probe_attempts_total{%s}[%s])", job, r))
		rules = append(rules,
			Rule{
				// The vantage that probed most stands for the target.
				Record: "target_module:vllm_probe_attempts:increase" + w,
				Expr:   acrossVantages("max", attempts),
			},
			Rule{
				// A probe failed only when every vantage failed: the vantage
				// that failed least stands for the target.
				Record: "target_module:vllm_probe_failures:increase" + w,
				Expr: acrossVantages("min", lines(
					acrossReplicas("reason", fmt.Sprintf("increase(vllm_probe_failures_total{%s}[%s])", s.failureSel(), r)),
					"or",
					"0 * "+attempts,
				)),
			},
			Rule{
				// When no probe ran in the window (probe interval longer than the
				// window), the last probe's result stands in, so a low probe rate
				// cannot hide an outage from the short burn-rate windows. While a
				// target moves between replicas both may export it: the worse
				// result stands.
				Record: "target_module:vllm_probe_success:ratio_rate" + w,
				Expr: lines(
					"clamp(",
					"  1 - target_module:vllm_probe_failures:increase"+w,
					"    / (target_module:vllm_probe_attempts:increase"+w+" > 0),",
					"  0, 1",
					")",
					"or",
					acrossVantages("max", fmt.Sprintf("min without (%s) (vllm_probe_success{%s})", replicaLabels, job)),
				),
			},
			Rule{
				// Probes a gateway refused by load shedding (reason "shed"),
				// counted apart whatever the availability SLO does with them.
				Record: "target_module:vllm_probe_shed:increase" + w,
				// As the failures: a probe counts as shed only when every
				// vantage's was, over the attempts of the vantage that
				// probed most.
				Expr: acrossVantages("min", lines(
					acrossReplicas("reason", fmt.Sprintf("increase(vllm_probe_failures_total{%s,reason=\"shed\"}[%s])", job, r)),
					"or",
					"0 * "+attempts,
				)),
			},
			Rule{
				Record: "target_module:vllm_probe_shed:ratio_rate" + w,
				Expr: lines(
					"clamp(",
					"  target_module:vllm_probe_shed:increase"+w,
					"    / (target_module:vllm_probe_attempts:increase"+w+" > 0),",
					"  0, 1",
					")",
				),
			},
		)
		for _, l := range []struct {
			name, metric string
			threshold    float64
		}{
			{"ttft", "vllm_probe_time_to_first_token_seconds", s.SLOs.TTFT.ThresholdSeconds},
			{"e2e", "vllm_probe_e2e_latency_seconds", s.SLOs.E2E.ThresholdSeconds},
		} {
			good := histGood(l.metric, job, l.threshold, r)
			total := histCount(l.metric, job, r)
			rules = append(rules,
				eitherHistogramForm(Rule{
					Record: "target_module:vllm_probe_" + l.name + "_over_slo:increase" + w,
					Expr:   lines("clamp_min(", indent(total, "  "), "  -", indent(good, "  ")+",", "  0", ")"),
				}, l.metric, l.metric+"_bucket", l.metric+"_count"),
				eitherHistogramForm(Rule{
					Record: "target_module:vllm_probe_" + l.name + "_within_slo:ratio_rate" + w,
					Expr:   lines("clamp(", indent(good, "  "), "  /", indent(lines("(", indent(total, "  ")+" > 0", ")"), "  ")+",", "  0, 1", ")"),
				}, l.metric, l.metric+"_bucket", l.metric+"_count"),
			)
		}
	}
	shed := "A probe a gateway refused by load shedding (reason \"shed\") or an engine refused at\n" +
		"admission (reason \"overloaded\") counts as a failure."
	if !s.SLOs.Availability.ShedIsFailure {
		shed = "A probe a gateway refused by load shedding (reason \"shed\") or an engine refused at\n" +
			"admission (reason \"overloaded\") is not a failure of the availability SLI\n" +
			"(slos.availability.shed_is_failure: false); vllm_probe_shed:* count the shed ones."
	}
	return []Group{{Name: "vllm_prober.slo.rules", Rules: rules, Comment: lines(
		"Every rule sums the prober replica away (without ("+replicaLabels+")): a prober",
		"restart, reschedule or reshard changes instance and pod, never target or",
		"module, so each SLI stays one series per (target, module) and its windows",
		"(up to 3d) keep the history from before the move (alerts/tests/restart_test.yml).",
		shed,
	)}}
}

// Histogram forms. A probe histogram reaches Prometheus as classic series
// (_bucket, _count, _sum), or, when vllm_prober exposes native buckets too
// (native_histogram_bucket_factor) and Prometheus scrapes native histograms, as
// one native histogram with no _bucket series at all; convert_classic_histograms_to_nhcb
// does the same with the classic boundaries (NHCB). Every expression on a
// histogram is the classic form `or` the native form over the bare name: the
// classic one wins where both exist, and each works alone (docs/runbook.md,
// "Histogram modes").

// histCount is the number of observations of a probe histogram in window r,
// summed over the prober replicas and the vantages (a latency SLI counts the
// probes of every vantage), in parentheses.
func histCount(metric, job, r string) string {
	return lines(
		"(",
		"  "+acrossReplicas(VantageLabel, fmt.Sprintf("increase(%s_count{%s}[%s])", metric, job, r)),
		"  or",
		"  histogram_count("+acrossReplicas(VantageLabel, fmt.Sprintf("increase(%s{%s}[%s])", metric, job, r))+")",
		")",
	)
}

// histGood is the number of observations at most threshold (a bucket boundary
// of the classic histogram and of NHCB; a native histogram interpolates within
// its bucket), in window r, summed over the prober replicas, in parentheses.
func histGood(metric, job string, threshold float64, r string) string {
	native := acrossReplicas(VantageLabel, fmt.Sprintf("increase(%s{%s}[%s])", metric, job, r))
	return lines(
		"(",
		"  "+acrossReplicas("le, "+VantageLabel, fmt.Sprintf("increase(%s_bucket{%s,%s}[%s])", metric, job, leMatcher(threshold), r)),
		"  or",
		fmt.Sprintf("  histogram_fraction(-Inf, %s, %s)", formatFloat(threshold), native),
		"    * histogram_count("+native+")",
		")",
	)
}

// indent prefixes every line of s with p.
func indent(s, p string) string {
	return p + strings.ReplaceAll(s, "\n", "\n"+p)
}

func (s *Spec) jobSel() string { return fmt.Sprintf("job=%q", s.ProberJob) }

// failureSel selects the probe failures that count against the availability
// SLO: all of them, or all but refusals by design (slos.availability.shed_is_failure):
// a gateway's load shedding (reason "shed") and an engine's admission refusal
// at its queue limit (reason "overloaded").
func (s *Spec) failureSel() string {
	if s.SLOs.Availability.ShedIsFailure {
		return s.jobSel()
	}
	return s.jobSel() + `,reason!~"shed|overloaded"`
}

func (s *Spec) runbook(alert string) string {
	return s.RunbookURL + "#" + strings.ToLower(alert)
}

// alert builds an alerting rule with the mandatory labels and annotations.
func (s *Spec) alert(name string, spec AlertSpec, expr, summary, description string, extra ...Label) Rule {
	return Rule{
		Alert:  name,
		Expr:   expr,
		For:    spec.For,
		Labels: append([]Label{{"severity", spec.Severity}}, extra...),
		Annotations: []Label{
			{"summary", summary},
			{"description", description},
			{"runbook_url", s.runbook(name)},
		},
	}
}

const (
	who   = `{{ $labels.target }} (model {{ $labels.model }})`
	whoM  = `{{ $labels.target }} (model {{ $labels.model }}, module {{ $labels.module }})`
	value = `{{ printf "%.2f" $value }}`
)

// AlertGroups returns the operational alerts and the burn-rate alerts.
func (s *Spec) AlertGroups() []Group {
	job := s.jobSel()
	a := s.Alerts
	th := func(x AlertSpec) string { return formatFloat(*x.Threshold) }
	healthDown := fmt.Sprintf("vllm_probe_health_up{%s} == 0", job)

	// The short raw-series alerts (engine hung, probes failing, scrape failing,
	// endpoint down) stay per replica: both sides of each comes from the same
	// replica's scrape, so `on (job, instance, target)` pairs the probe and the
	// health of one probing, and their windows (minutes) are short enough that a
	// restart only delays them by a window. The SLIs and burn-rate alerts, whose
	// windows reach 3d, aggregate the replica away (RecordingGroups).
	ops := []Rule{
		s.alert("VLLMEngineHung", a.EngineHung,
			lines(
				"clamp_max(",
				fmt.Sprintf("  sum without (reason) (increase(vllm_probe_failures_total{%s,reason=~\"stalled|timeout\"}[%s]))", job, a.EngineHung.Window),
				fmt.Sprintf("    / (increase(vllm_probe_attempts_total{%s}[%s]) > 0),", job, a.EngineHung.Window),
				"  1", // the two increase() extrapolate differently: a share above 1 means all of them
				") >= "+th(a.EngineHung),
				// /health answered 200 at every scrape of the window, not only
				// now: after an outage the window still holds its timeouts, and
				// a server that just came back is not hung.
				"and on (job, instance, target)",
				fmt.Sprintf("min_over_time(vllm_probe_health_up{%s}[%s]) == 1", job, a.EngineHung.Window),
			),
			"vLLM answers /health but does not generate tokens.",
			whoM+` has answered /health with 200 for the last `+a.EngineHung.Window.String()+`, yet `+value+` of its probes in that time stalled or timed out. The engine is probably hung.`),
		s.alert("VLLMEndpointDown", a.EndpointDown,
			lines(
				"(",
				// One vantage (no vantage label): each replica's view, as
				// ever. Several: one alert per target, when every vantage
				// sees /health fail.
				fmt.Sprintf("vllm_probe_health_up{%s,%s=\"\"} == 0", job, VantageLabel),
				"or",
				fmt.Sprintf("max without (%s, %s) (vllm_probe_health_up{%s,%s!=\"\"}) == 0", replicaLabels, VantageLabel, job, VantageLabel),
				")",
				// An engine that reports vLLM's sleep mode is asleep on purpose.
				"unless on (job, target)",
				fmt.Sprintf("max by (job, target) (vllm_server_sleep_level{%s}) > 0", job),
			),
			"vLLM endpoint does not answer /health.",
			who+` has not answered /health with 200 for `+a.EndpointDown.For.String()+` (health_up = `+value+`).`),
		s.alert("VLLMEndpointUnreachableFromVantage", a.EndpointUnreachableFromVantage,
			lines(
				fmt.Sprintf("vllm_probe_health_up{%s,%s!=\"\"} == 0", job, VantageLabel),
				"and on (job, target)",
				fmt.Sprintf("vllm_probe_health_up{%s,%s!=\"\"} == 1", job, VantageLabel),
			),
			"vLLM endpoint is unreachable from one vantage only.",
			who+` has not answered /health with 200 from vantage {{ $labels.vantage }} for `+a.EndpointUnreachableFromVantage.For.String()+` while another vantage reaches it: the path from {{ $labels.vantage }} (its network, DNS, proxy or the prober replica {{ $labels.instance }}) is at fault, not the endpoint (health_up = `+value+`).`),
		s.alert("VLLMProbesFailing", a.ProbesFailing,
			lines(
				"(",
				// Shedding has its own alert (VLLMGatewayShedding); a sleeping
				// engine its own (VLLMEngineSleeping), as long as it sleeps
				// for less than engine_sleeping's threshold.
				fmt.Sprintf("  increase(vllm_probe_failures_total{%s,reason!~\"shed|sleeping\"}[%s])", job, a.ProbesFailing.Window),
				"    / ignoring (reason) group_left ()",
				fmt.Sprintf("  (increase(vllm_probe_attempts_total{%s}[%s]) > 0)", job, a.ProbesFailing.Window),
				"  or",
				// A target whose probes have read sleeping for longer than
				// that, and whose /metrics does not report a sleep level
				// (VLLMEngineSleeping reads it): an unscraped target that
				// answers /is_sleeping: true is not left silent forever.
				"  (",
				fmt.Sprintf("    increase(vllm_probe_failures_total{%s,reason=\"sleeping\"}[%s])", job, a.ProbesFailing.Window),
				"      / ignoring (reason) group_left ()",
				fmt.Sprintf("    (increase(vllm_probe_attempts_total{%s}[%s]) > 0)", job, a.ProbesFailing.Window),
				"    and",
				// In every 5m of the bound, and already at its start: a
				// series younger than the bound is not.
				fmt.Sprintf("    min_over_time((increase(vllm_probe_failures_total{%s,reason=\"sleeping\"}[5m]) > bool 0)[%ss:5m]) == 1", job, th(a.EngineSleeping)),
				"    and",
				fmt.Sprintf("    increase(vllm_probe_failures_total{%s,reason=\"sleeping\"}[5m] offset %ss) > 0", job, th(a.EngineSleeping)),
				"    unless on (job, instance, target)",
				fmt.Sprintf("    vllm_server_sleep_level{%s} > 0", job),
				"  )",
				") > "+th(a.ProbesFailing),
				"unless on (job, instance, target)",
				healthDown,
			),
			"vLLM probes are failing.",
			value+` of the probes of `+whoM+` failed with reason {{ $labels.reason }} over the last `+a.ProbesFailing.Window.String()+`.`),
		s.alert("VLLMMetricsScrapeFailing", a.MetricsScrapeFailing,
			lines(
				// The share of failed scrapes, not `vllm_server_up == 0`: a
				// /metrics that fails one scrape in four flaps server_up and
				// would restart `for` at every success.
				fmt.Sprintf("1 - avg_over_time(vllm_server_up{%s}[%s]) > %s", job, a.MetricsScrapeFailing.Window, th(a.MetricsScrapeFailing)),
				"unless on (job, instance, target)",
				healthDown,
			),
			"vllm_prober cannot scrape the vLLM /metrics endpoint.",
			`vllm_prober failed `+value+` of its scrapes of /metrics of {{ $labels.target }} (model {{ $labels.model }}) over the last `+a.MetricsScrapeFailing.Window.String()+` (threshold `+th(a.MetricsScrapeFailing)+`) for `+a.MetricsScrapeFailing.For.String()+` while /health answers or is not checked (a scrape-only target); server-side panels and saturation alerts are blind or gappy. The engine itself is fine if its probes succeed (vllm_probe_success): then only /metrics fails (vLLM's multiprocess metrics directory on a network volume answers 500 while inference works), users are not affected, and the target page says so.`),
		s.alert("VLLMEngineSleeping", a.EngineSleeping,
			lines(
				// Asleep at every scrape of the last threshold seconds, and
				// already then: a series younger than the window is not.
				fmt.Sprintf("min_over_time(vllm_server_sleep_level{%s}[%ss]) > 0", job, th(a.EngineSleeping)),
				"and",
				fmt.Sprintf("vllm_server_sleep_level{%s} offset %ss > 0", job, th(a.EngineSleeping)),
			),
			"vLLM engine has been asleep for long.",
			who+` has reported vLLM's sleep mode (level `+value+`) for more than `+th(a.EngineSleeping)+`s: wake it (POST /wake_up) or take it out of rotation.`),
		s.alert("VLLMProberAbsent", a.ProberAbsent,
			fmt.Sprintf("absent(up{%s} == 1)", job),
			"vllm_prober is not being scraped.",
			fmt.Sprintf(`No target of job %q has been up for %s (absent = %s): no probe results reach Prometheus and every other vLLM alert is silent.`, s.ProberJob, a.ProberAbsent.For, value)),
		s.alert("VLLMKVCacheSaturated", a.KVCacheSaturated,
			fmt.Sprintf("last_over_time(vllm_server_kv_cache_usage_ratio{%s}[%s]) > %s", job, s.ScrapeGapWindow, th(a.KVCacheSaturated)),
			"vLLM KV cache is nearly full.",
			`The KV cache of `+who+` is `+value+` full (threshold `+th(a.KVCacheSaturated)+`) for `+a.KVCacheSaturated.For.String()+`; new requests queue and running ones get preempted.`),
		s.alert("VLLMRequestsQueueing", a.RequestsQueueing,
			fmt.Sprintf("last_over_time(vllm_server_requests{%s,state=\"waiting\"}[%s]) > %s", job, s.ScrapeGapWindow, th(a.RequestsQueueing)),
			"Requests are queueing in vLLM.",
			value+` requests have been waiting in the queue of `+who+` for `+a.RequestsQueueing.For.String()+` (threshold `+th(a.RequestsQueueing)+`).`),
		optionalSeries("vllm_server_kv_transfer_seconds",
			"Only pods of a prefill/decode disaggregated fleet with a KV connector (vLLM's NIXL, SGLang's) have this series.",
			s.alert("VLLMKVTransferSlow", a.KVTransferSlow,
				fmt.Sprintf("avg_over_time(vllm_server_kv_transfer_seconds{%s,stat=\"mean\"}[%s]) > %s", job, a.KVTransferSlow.Window, th(a.KVTransferSlow)),
				"KV cache transfers between the prefill and decode pools are slow.",
				`The KV cache transfers of `+who+` took `+value+`s on average over `+a.KVTransferSlow.Window.String()+` (threshold `+th(a.KVTransferSlow)+`s): every disaggregated request waits that long before its first token, while both pools may look healthy. Check the transport (NIXL falling back to TCP, the network between the pools).`)),
		optionalSeries("vllm_server_kv_transfer_failures_per_second",
			"Only pods of a prefill/decode disaggregated fleet with a KV connector (vLLM's NIXL, SGLang's) have this series.",
			s.alert("VLLMKVTransferFailing", a.KVTransferFailing,
				fmt.Sprintf("avg_over_time(vllm_server_kv_transfer_failures_per_second{%s}[%s]) > %s", job, a.KVTransferFailing.Window, th(a.KVTransferFailing)),
				"KV cache transfers between the prefill and decode pools fail.",
				who+` failed `+value+` KV cache transfers per second on average over `+a.KVTransferFailing.Window.String()+` (threshold `+th(a.KVTransferFailing)+`): each failed request is recomputed on the decode pod, a slow path users see as TTFT.`)),
		optionalSeries("vllm_server_preemptions_per_second",
			"vLLM servers that do not export a preemption counter never have this series (vllm_server_signal_available{signal=\"preemptions\"} is 0 there).",
			s.alert("VLLMPreemptionsHigh", a.PreemptionsHigh,
				fmt.Sprintf("avg_over_time(vllm_server_preemptions_per_second{%s}[%s]) > %s", job, a.PreemptionsHigh.Window, th(a.PreemptionsHigh)),
				"vLLM is preempting requests.",
				who+` preempted `+value+` requests per second on average over `+a.PreemptionsHigh.Window.String()+` (threshold `+th(a.PreemptionsHigh)+`); the KV cache is too small for the load.`)),
		s.alert("VLLMHeadroomLow", a.HeadroomLow,
			fmt.Sprintf("last_over_time(vllm_server_headroom_ratio{%s,resource=\"overall\"}[%s]) < %s", job, s.ScrapeGapWindow, th(a.HeadroomLow)),
			"vLLM capacity headroom is low.",
			who+` has `+value+` capacity headroom left (threshold `+th(a.HeadroomLow)+`); see headroom by resource on the endpoint dashboard.`),
		optionalSeries("vllm_probe_regression_ratio", "The ratio exists only for targets compared with a baseline (`baseline:` in the target configuration).",
			s.alert("VLLMThroughputRegression", a.ThroughputRegression,
				fmt.Sprintf("vllm_probe_regression_ratio{%s,metric=\"output_throughput\"} > %s", job, th(a.ThroughputRegression)),
				"vLLM output throughput regressed against its baseline.",
				`Output throughput of `+whoM+` is `+value+` times worse than baseline {{ $labels.baseline }} (threshold `+th(a.ThroughputRegression)+`) for `+a.ThroughputRegression.For.String()+`.`)),
		optionalSeries("vllm_probe_regression_ratio", "The ratio exists only for targets compared with a baseline (`baseline:` in the target configuration).",
			s.alert("VLLMLatencyRegression", a.LatencyRegression,
				fmt.Sprintf("vllm_probe_regression_ratio{%s,metric=~\"ttft|tpot|itl|e2e\"} > %s", job, th(a.LatencyRegression)),
				"vLLM latency regressed against its baseline.",
				`{{ $labels.metric }} of `+whoM+` is `+value+` times the baseline {{ $labels.baseline }} (threshold `+th(a.LatencyRegression)+`) for `+a.LatencyRegression.For.String()+`.`)),
		s.alert("VLLMProbeBudgetExhausted", a.ProbeBudgetExhausted,
			fmt.Sprintf("increase(vllm_probe_skipped_total{%s,reason=\"budget\"}[%s]) > 0", job, a.ProbeBudgetExhausted.Window),
			"vllm_prober skips probes: token budget exhausted.",
			value+` probes of `+whoM+` were skipped in the last `+a.ProbeBudgetExhausted.Window.String()+` because its token budget is spent; the endpoint is not being checked.`),
		s.alert("VLLMProberConfigReloadFailed", a.ConfigReloadFailed,
			fmt.Sprintf("vllm_prober_config_last_reload_successful{%s} == 0", job),
			"vllm_prober failed to reload its configuration.",
			`vllm_prober {{ $labels.instance }} failed to reload its configuration (last_reload_successful = `+value+`) and still runs the previous one.`),
		optionalSeries("vllm_probe_answer_checks_total",
			"The counter exists only where a module checks answers (`expect:` in the probe configuration).",
			s.alert("VLLMWrongAnswers", a.WrongAnswers,
				lines(
					"(",
					"  "+acrossReplicas("result", fmt.Sprintf("increase(vllm_probe_answer_checks_total{%s,result=\"wrong\"}[%s])", job, a.WrongAnswers.Window)),
					"    / ("+acrossReplicas("result", fmt.Sprintf("increase(vllm_probe_answer_checks_total{%s}[%s])", job, a.WrongAnswers.Window))+" > 0)",
					") > "+th(a.WrongAnswers),
					"and",
					acrossReplicas("result", fmt.Sprintf("increase(vllm_probe_answer_checks_total{%s,result=\"wrong\"}[%s])", job, a.WrongAnswers.Window))+" >= "+strconv.Itoa(s.MinBadProbes),
				),
				"vLLM answers are wrong.",
				value+` of the answer checks of `+whoM+` were wrong over the last `+a.WrongAnswers.Window.String()+` (threshold `+th(a.WrongAnswers)+`): the endpoint is fast but its output is wrong (bad deploy, quantization, tokenizer or chat template).`)),
		optionalSeries("vllm_probe_failures_total",
			"Only probes through a gateway that sheds load ever fail with reason=\"shed\".",
			s.alert("VLLMGatewayShedding", a.GatewayShedding,
				s.shedRatioAbove(a.GatewayShedding),
				"A gateway is shedding load.",
				value+` of the probes of `+whoM+` were refused by load shedding over the last `+a.GatewayShedding.Window.String()+` (threshold `+th(a.GatewayShedding)+`): the pool behind the gateway is saturated; add capacity or lower the sheddable load.`)),
		// Shedding nearly everything for a sustained window is an outage to
		// the gateway's users: it pages, whatever shed_is_failure says.
		optionalSeries("vllm_probe_failures_total",
			"Only probes through a gateway that sheds load ever fail with reason=\"shed\".",
			s.alert("VLLMGatewaySheddingOutage", a.GatewaySheddingOutage,
				s.shedRatioAbove(a.GatewaySheddingOutage),
				"A gateway sheds nearly every request: an outage to its users.",
				value+` of the probes of `+whoM+` were refused by load shedding over the last `+a.GatewaySheddingOutage.Window.String()+` (threshold `+th(a.GatewaySheddingOutage)+`): the gateway is up but serves almost nobody; treat it as an outage (docs/runbook.md, VLLMGatewaySheddingOutage).`)),
	}

	var slo []Rule
	for _, x := range s.slis() {
		budget := "(1 - " + objectiveRatio(x.objective.Objective) + ")"
		for _, br := range s.BurnRates {
			long, short := br.LongWindow.String(), br.ShortWindow.String()
			factor := formatFloat(br.Factor)
			r := s.alert(x.alert, AlertSpec{Severity: br.Severity, For: br.For},
				// The layer (endpoint, or for a gateway target gateway or
				// pool) from what its members show: layers.go.
				s.layeredBurn(x, br, budget, lines(
					"(",
					"  (1 - "+x.ratio+long+") / "+budget+" > "+factor,
					"  and",
					"  (1 - "+x.ratio+short+") / "+budget+" > "+factor,
					")",
					"and",
					x.bad+long+" >= "+strconv.Itoa(s.MinBadProbes),
				)),
				fmt.Sprintf("vLLM %s error budget is burning too fast.", map[string]string{SLOAvailability: "availability", SLOTTFT: "time-to-first-token", SLOE2E: "end-to-end latency", SLOGoodput: "goodput"}[x.name]),
				whoM+` is burning its `+x.name+` error budget `+value+` times faster than sustainable over `+long+` (and over `+short+`); objective: `+formatFloat(x.objective.Objective)+`% of `+x.what+`.`,
				Label{"slo", x.name}, Label{"long_window", long}, Label{"short_window", short},
			)
			// The layer's gateway test reads the members' shares, which only
			// gateway targets export: absent in a fleet without gateways.
			r = withComment(r, lines(
				"Only gateway targets export vllm_gateway_member_share_ratio, which decides the layer: it is legitimately absent without gateways.",
				"pint disable promql/series(vllm_gateway_member_share_ratio)",
			))
			slo = append(slo, r)
		}
	}
	ops = append(ops, s.goodputBelowBaselineAlert()...)
	groups := []Group{
		{Name: "vllm_prober.alerts", Rules: ops, Comment: lines(
			"The short raw-series alerts (VLLMEngineHung, VLLMProbesFailing,",
			"VLLMMetricsScrapeFailing, VLLMEndpointDown) and the gauge alerts stay per prober",
			"replica: both sides of each condition come from one replica's scrape (joined",
			"on job, instance, target), and their windows of minutes resume on the new",
			"replica after a move. VLLMWrongAnswers sums the replicas away like the SLIs.",
		)},
		{Name: "vllm_prober.slo.alerts", Rules: slo, Comment: lines(
			"Burn-rate alerts on the SLI recording rules, which sum the prober replica",
			"away: they carry no instance or pod label and survive a prober restart.",
		)},
	}
	groups = append(groups, Group{Name: "vllm_prober.layer.alerts", Rules: s.layerAlerts(), Comment: lines(
		"Where did it break (docs/runbook.md): a member behind a gateway slower than the",
		"others or failing while the gateway answers (layer endpoint, naming the member),",
		"and the gateway's own overhead (layer gateway). Every alert carries a layer label.",
	)})
	if z := s.seasonalAlerts(); len(z) > 0 {
		groups = append(groups, Group{Name: "vllm_prober.seasonal.alerts", Rules: z, Comment: lines(
			"On the seasonal recording rules: a latency unusual for this hour of the week",
			"(z-score against the median of the same hour in past weeks) that is also worse",
			"than its benchmark.",
		)})
	}
	var burns []string
	for _, x := range s.slis() {
		burns = append(burns, x.alert)
	}
	return withLayers(groups, burns)
}

func lines(l ...string) string { return strings.Join(l, "\n") }

// optionalSeries marks a rule whose metric exists only on some deployments: a
// comment with the reason and pint's directive, so that `pint ci` against a
// Prometheus where the metric is legitimately absent does not report
// promql/series ("nonexistent series"). The rule itself is silent without the
// metric, which is the intended behaviour.
func optionalSeries(metric, why string, r Rule) Rule {
	r.Comment = lines(
		why,
		"pint disable promql/series("+metric+")",
	)
	return r
}

// eitherHistogramForm marks a rule that reads a probe histogram in its classic
// form `or` its native form: a Prometheus stores one of them (or both), so
// pint's promql/series check would report the other as a nonexistent series.
// series are the names the rule selects (pint rejects a directive that matches
// no selector of the query).
func eitherHistogramForm(r Rule, series ...string) Rule {
	l := []string{"A Prometheus stores the classic series or the native histogram (or both): the other form is legitimately absent."}
	for _, m := range series {
		l = append(l, "pint disable promql/series("+m+")")
	}
	return withComment(r, lines(l...))
}

// withComment adds lines to a rule's comment.
func withComment(r Rule, c string) Rule {
	if r.Comment != "" {
		c = r.Comment + "\n" + c
	}
	r.Comment = c
	return r
}

// generatedFile is one generated rule file and the builders of its groups, in order.
type generatedFile struct {
	name   string
	groups []func(*Spec) []Group
}

// ruleFiles lists every generated rule file. A new rule group is one more
// builder here: a method on Spec (for a new section of slo.yml) in a new file.
func ruleFiles() []generatedFile {
	return []generatedFile{
		{RulesFile, []func(*Spec) []Group{(*Spec).RecordingGroups, (*Spec).RolloutGroups, (*Spec).SeasonalGroups, (*Spec).CostGroups, (*Spec).GoodputGroups}},
		{AlertsFile, []func(*Spec) []Group{(*Spec).AlertGroups}},
	}
}

// RuleFileNames returns the names of the generated rule files, in order.
func RuleFileNames() []string {
	var names []string
	for _, f := range ruleFiles() {
		names = append(names, f.name)
	}
	return names
}

// Groups returns every rule group of the mixin, in file order.
func (s *Spec) Groups() []Group {
	var gs []Group
	for _, f := range ruleFiles() {
		for _, b := range f.groups {
			gs = append(gs, b(s)...)
		}
	}
	return gs
}

// Render returns the rule files for the spec, keyed by file name (RulesFile, AlertsFile).
func Render(s *Spec, source string) (map[string][]byte, error) {
	header := "Generated by `vllm_prober rules generate` from " + source + ". DO NOT EDIT.\n" +
		"Change the objectives and thresholds in " + source + " and regenerate.\n"
	out := map[string][]byte{}
	for _, f := range ruleFiles() {
		var groups []Group
		for _, b := range f.groups {
			groups = append(groups, b(s)...)
		}
		b, err := renderGroups(header, groups)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		out[f.name] = b
	}
	return out, nil
}

// renderGroups renders rule groups through Prometheus' own rule-file types
// (model/rulefmt) encoded as yaml.v3 nodes: the library does the quoting. The
// only additions to what rulefmt encodes are comments: the header above the
// document, each group's Comment above it, and each rule's Comment above its
// expr (where pint reads `# pint disable ...`).
func renderGroups(header string, groups []Group) ([]byte, error) {
	rg := rulefmt.RuleGroups{Groups: make([]rulefmt.RuleGroup, len(groups))}
	for i, g := range groups {
		rg.Groups[i] = rulefmt.RuleGroup{Name: g.Name, Rules: make([]rulefmt.Rule, len(g.Rules))}
		for j, r := range g.Rules {
			rg.Groups[i].Rules[j] = rulefmt.Rule{
				Record: r.Record, Alert: r.Alert, Expr: r.Expr,
				Labels: pairMap(r.Labels), Annotations: pairMap(r.Annotations),
			}
			if r.Alert != "" {
				rg.Groups[i].Rules[j].For = r.For
			}
		}
	}
	var doc yaml.Node
	if err := doc.Encode(&rg); err != nil {
		return nil, fmt.Errorf("encoding rule groups: %w", err)
	}
	doc.HeadComment = strings.TrimSuffix(header, "\n")
	groupSeq := mappingValue(&doc, "groups")
	if groupSeq == nil || len(groupSeq.Content) != len(groups) {
		return nil, fmt.Errorf("encoding rule groups: unexpected document shape")
	}
	for i, gn := range groupSeq.Content {
		gn.HeadComment = groups[i].Comment
		rules := mappingValue(gn, "rules")
		for j, rn := range rules.Content {
			if c := groups[i].Rules[j].Comment; c != "" {
				if k := mappingKey(rn, "expr"); k != nil {
					k.HeadComment = c
				}
			}
			if e := mappingValue(rn, "expr"); e != nil && strings.Contains(e.Value, "\n") {
				e.Style = yaml.LiteralStyle
			}
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encoding rule file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding rule file: %w", err)
	}
	return b.Bytes(), nil
}

// pairMap turns ordered labels into the map rulefmt holds (encoded sorted by key).
func pairMap(ls []Label) map[string]string {
	if len(ls) == 0 {
		return nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}

// mappingKey returns the key node of key in a mapping node (or the mapping a
// document node holds), nil when absent.
func mappingKey(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}

// mappingValue returns the value node of key, nil when absent.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// Options control Generate.
type Options struct {
	// SLOFile is the SLO file to read; its path (slash-separated) is named in the
	// generated header, so use "mixin/slo.yml" from the repository root to
	// reproduce the committed files byte for byte.
	SLOFile string
	// OutDir receives the generated files.
	OutDir string
	// ForScale multiplies every `for` duration and evaluation window (see
	// Spec.Scaled); 0 means 1. Prometheus format only.
	ForScale float64
	// Format is one of Formats; "" means FormatPrometheus.
	Format string
	// NativeHistograms makes the Pyrra latency SLOs read native histograms
	// (latencyNative) instead of classic buckets.
	NativeHistograms bool
}

// Generate reads the SLO file, renders the files of the format and writes them
// to OutDir. It returns the paths written.
func Generate(o Options) ([]string, error) {
	spec, err := LoadSpec(o.SLOFile)
	if err != nil {
		return nil, err
	}
	var files map[string][]byte
	switch o.Format {
	case "", FormatPrometheus:
		files, err = RenderScaled(spec, filepath.ToSlash(o.SLOFile), o.ForScale)
	default:
		if o.ForScale != 0 && o.ForScale != 1 {
			return nil, fmt.Errorf("--for-scale applies to the prometheus format only, not %s", o.Format)
		}
		files, err = RenderFormat(spec, filepath.ToSlash(o.SLOFile), o.Format, o.NativeHistograms)
	}
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	names := slices.Sorted(maps.Keys(files))
	if o.Format == "" || o.Format == FormatPrometheus {
		names = RuleFileNames()
	}
	var written []string
	for _, name := range names {
		p := filepath.Join(o.OutDir, name)
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return written, fmt.Errorf("writing %s: %w", name, err)
		}
		written = append(written, p)
	}
	return written, nil
}

// RenderScaled is Render after Spec.Scaled(factor); a factor of 0 or 1 renders the
// spec unchanged, and the header records any other factor.
func RenderScaled(s *Spec, source string, factor float64) (map[string][]byte, error) {
	if factor == 0 || factor == 1 {
		return Render(s, source)
	}
	scaled, err := s.Scaled(factor)
	if err != nil {
		return nil, err
	}
	return Render(scaled, source+" with --for-scale "+formatFloat(factor)+" (for testing only)")
}

// shedRatioAbove is the condition of the shedding alerts: the share of a
// pair's probes refused by load shedding over the alert's window above its
// threshold, with at least MinBadProbes of them.
func (s *Spec) shedRatioAbove(x AlertSpec) string {
	job := s.jobSel()
	shed := acrossReplicas("reason", fmt.Sprintf("increase(vllm_probe_failures_total{%s,reason=\"shed\"}[%s])", job, x.Window))
	return lines(
		"(",
		"  "+shed,
		"    / ("+acrossReplicas("", fmt.Sprintf("increase(vllm_probe_attempts_total{%s}[%s])", job, x.Window))+" > 0)",
		") > "+formatFloat(*x.Threshold),
		"and",
		shed+" >= "+strconv.Itoa(s.MinBadProbes),
	)
}
