package mixin

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Dashboard file names in dashboards/, keyed to their builders in Dashboards.
const (
	FleetDashboard     = "vllm-fleet-overview.json"
	EndpointDashboard  = "vllm-endpoint-detail.json"
	BaselinesDashboard = "vllm-baselines-vs-live.json"
)

// ds is the datasource reference every panel and target uses: the `datasource`
// template variable, never a hard-coded uid.
var ds = map[string]string{"type": "prometheus", "uid": "${datasource}"}

// Selectors shared by the dashboard queries.
//
// Server panels select by target only, never by model: vLLM counts the traffic
// of a LoRA adapter under its base model's model_name, so the vllm_server_*
// series of a target probing an adapter carry the base model (or, once the
// collector joins them to the target, the target's model), while $model lists
// the models the probes use. Selecting server series by $model would empty
// every server panel when an adapter is chosen; a target is one server, so
// target alone is the join key.
const (
	probeSel  = `job=~"$job", target=~"$target", model=~"$model"`
	serverSel = `job=~"$job", target=~"$target"`
	// baselineSel selects the baseline curves. Every prober replica (shard)
	// exports every baseline, so baseline queries always deduplicate them with
	// max without (instance, pod) (see baselineQuery).
	baselineSel = `job=~"$job", baseline=~"$baseline"`
)

// baselineQuery deduplicates a baseline series across prober replicas.
func baselineQuery(metric, extra string) string {
	sel := baselineSel
	if extra != "" {
		sel += ", " + extra
	}
	return fmt.Sprintf("max without (%s) (%s{%s})", replicaLabels, metric, sel)
}

type target struct {
	Expr    string
	Legend  string
	Instant bool
	// Exemplar asks Grafana for the exemplars of the query's histogram: each
	// probe's record_id, which links to its record (README, "Exemplars").
	Exemplar bool
	// Hint marks a "signal not exported by this server" series: drawn grey and
	// dashed, so that a missing signal does not read as an empty panel or zero.
	Hint bool
}

type panel struct {
	Type        string // timeseries | stat | table
	Title       string
	Description string
	Unit        string
	W, H        int
	Targets     []target
	Max         *float64
	Min         *float64
	Thresholds  []threshold // for stat panels
	// Mappings are Grafana value mappings: value → text (and colour).
	Mappings []mapping
	// NoValue is shown instead of "No data".
	NoValue string
}

type mapping struct {
	Value, Text, Color string
}

type threshold struct {
	Color string
	Value *float64
}

type row struct {
	Title  string
	Repeat string // template variable to repeat the row for
	Panels []panel
}

type dashboard struct {
	UID, Title, Description string
	Variables               []map[string]any
	Rows                    []row
}

func f64(v float64) *float64 { return &v }

func (p panel) json(id, x, y int) map[string]any {
	defaults := map[string]any{"unit": p.Unit}
	if p.Max != nil {
		defaults["max"] = *p.Max
	}
	if p.Min != nil {
		defaults["min"] = *p.Min
	}
	if len(p.Thresholds) > 0 {
		var steps []map[string]any
		for _, t := range p.Thresholds {
			steps = append(steps, map[string]any{"color": t.Color, "value": t.Value})
		}
		defaults["thresholds"] = map[string]any{"mode": "absolute", "steps": steps}
	}
	if p.NoValue != "" {
		defaults["noValue"] = p.NoValue
	}
	if len(p.Mappings) > 0 {
		opts := map[string]any{}
		for i, m := range p.Mappings {
			opts[m.Value] = map[string]any{"text": m.Text, "color": m.Color, "index": i}
		}
		defaults["mappings"] = []any{map[string]any{"type": "value", "options": opts}}
	}
	overrides := []any{}
	var targets []map[string]any
	for i, t := range p.Targets {
		if t.Hint {
			overrides = append(overrides, map[string]any{
				"matcher": map[string]any{"id": "byFrameRefID", "options": string(rune('A' + i))},
				"properties": []any{
					map[string]any{"id": "color", "value": map[string]any{"mode": "fixed", "fixedColor": "text"}},
					map[string]any{"id": "custom.lineStyle", "value": map[string]any{"fill": "dash", "dash": []int{10, 10}}},
					map[string]any{"id": "unit", "value": "none"},
					// A stat panel shows the value, not the legend: the hint's 0
					// must read as the fact, not as a zero.
					map[string]any{"id": "mappings", "value": []any{map[string]any{"type": "value", "options": map[string]any{
						"0": map[string]any{"text": "not exported by this server", "color": "text", "index": 0},
					}}}},
				},
			})
		}
		tj := map[string]any{
			"datasource":   ds,
			"expr":         t.Expr,
			"legendFormat": t.Legend,
			"refId":        string(rune('A' + i)),
		}
		if t.Exemplar {
			tj["exemplar"] = true
		}
		if t.Instant {
			tj["instant"] = true
			tj["range"] = false
			tj["format"] = "table"
		}
		targets = append(targets, tj)
	}
	out := map[string]any{
		"id":          id,
		"type":        p.Type,
		"title":       p.Title,
		"description": p.Description,
		"datasource":  ds,
		"gridPos":     map[string]int{"h": p.H, "w": p.W, "x": x, "y": y},
		"fieldConfig": map[string]any{"defaults": defaults, "overrides": overrides},
		"targets":     targets,
	}
	switch p.Type {
	case "timeseries":
		out["options"] = map[string]any{
			"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		}
	case "stat":
		out["options"] = map[string]any{
			"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode":     "background",
			"graphMode":     "area",
			"textMode":      "auto",
		}
	case "table":
		out["options"] = map[string]any{"showHeader": true}
	}
	return out
}

func (d dashboard) json() map[string]any {
	var panels []any
	id, y := 1, 0
	for _, r := range d.Rows {
		rj := map[string]any{
			"id": id, "type": "row", "title": r.Title, "collapsed": false,
			"gridPos": map[string]int{"h": 1, "w": 24, "x": 0, "y": y}, "panels": []any{},
		}
		if r.Repeat != "" {
			rj["repeat"] = r.Repeat
		}
		panels = append(panels, rj)
		id++
		y++
		x, rowH := 0, 0
		for _, p := range r.Panels {
			if x+p.W > 24 {
				x, y, rowH = 0, y+rowH, 0
			}
			panels = append(panels, p.json(id, x, y))
			id++
			x += p.W
			rowH = max(rowH, p.H)
		}
		y += rowH
	}
	return map[string]any{
		"uid":           d.UID,
		"title":         d.Title,
		"description":   d.Description,
		"tags":          []string{"vllm", "vllm-prober-mixin"},
		"editable":      true,
		"graphTooltip":  1,
		"schemaVersion": 39,
		"version":       1,
		"refresh":       "30s",
		"time":          map[string]string{"from": "now-6h", "to": "now"},
		"timezone":      "",
		"annotations":   map[string]any{"list": []any{}},
		"links": []any{map[string]any{
			"type": "dashboards", "tags": []string{"vllm-prober-mixin"}, "title": "vLLM dashboards",
			"asDropdown": true, "includeVars": true, "keepTime": true,
			// Required by Grafana's dashboard schema (@grafana/schema DashboardLink);
			// Grafana's defaults.
			"icon": "external link", "targetBlank": false, "tooltip": "", "url": "",
		}},
		"templating": map[string]any{"list": d.Variables},
		"panels":     panels,
	}
}

func datasourceVar() map[string]any {
	return map[string]any{
		"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
		"current": map[string]any{}, "hide": 0, "refresh": 1, "regex": "", "options": []any{},
	}
}

func queryVar(name, label, query string) map[string]any {
	return map[string]any{
		"name": name, "label": label, "type": "query", "datasource": ds,
		"query":      map[string]string{"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
		"definition": query,
		"refresh":    2, "sort": 1, "multi": true, "includeAll": true, "allValue": ".+",
		"current": map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		"hide":    0, "regex": "", "options": []any{},
	}
}

// singleVar is a query variable that takes exactly one value, the first option
// by default.
func singleVar(name, label, query string) map[string]any {
	v := queryVar(name, label, query)
	v["multi"], v["includeAll"] = false, false
	delete(v, "allValue")
	v["current"] = map[string]any{}
	return v
}

// commonVars are the datasource, job, target and model variables, bound to the
// prober's own series so they list its endpoints only: the probed ones
// (vllm_probe_attempts_total) and the scraped ones (vllm_server_up), so that a
// scrape-only target (probe: false) can be chosen too. With singleTarget the
// target variable takes one value (a dashboard about one endpoint).
func commonVars(singleTarget bool) []map[string]any {
	targetVar := queryVar
	if singleTarget {
		targetVar = singleVar
	}
	// The engine variable narrows the targets: its "All" (.*) also matches
	// the series without an engine label, so probe-only targets stay listed;
	// one engine keeps the targets whose /metrics it reads. Every panel then
	// works on one engine or a mix through the target variable.
	engine := queryVar("engine", "Engine", `label_values(vllm_server_engine_recognized{job=~"$job"}, engine)`)
	engine["allValue"] = ".*"
	return []map[string]any{
		datasourceVar(),
		queryVar("job", "Job", `label_values({__name__=~"vllm_probe_attempts_total|vllm_server_up"}, job)`),
		engine,
		targetVar("target", "Target", `label_values({__name__=~"vllm_probe_attempts_total|vllm_server_up|vllm_server_engine_recognized", job=~"$job", engine=~"$engine"}, target)`),
		queryVar("model", "Model", `label_values(vllm_probe_attempts_total{job=~"$job", target=~"$target"}, model)`),
	}
}

// notExported is the hint series of a server panel whose signal the server may
// not export (vllm_server_signal_available{signal} == 0, from the collector):
// a dashed line named "<signal>: not exported by this server" instead of an
// empty panel that reads as zero.
func notExported(signal string) target {
	return target{
		Expr:   `max by (target, signal) (vllm_server_signal_available{` + serverSel + `, signal="` + signal + `"}) == 0`,
		Legend: "{{target}} {{signal}}: not exported by this server",
		Hint:   true,
	}
}

// serverMean is the server's mean of a latency over the collector's window.
func serverMean(metric string) string {
	return `avg by (target) (` + metric + `{` + serverSel + `, stat="mean"})`
}

// quantile and mean read a probe histogram in its classic form `or` its native
// form (the bare name, ingested natively or as NHCB), so the panels show data
// whichever way Prometheus ingests it (docs/runbook.md, "Histogram modes").
func quantile(q, metric, by string) string {
	return fmt.Sprintf(`histogram_quantile(%[1]s, sum by (%[3]s, le) (rate(%[2]s_bucket{%[4]s}[$__rate_interval])))`+
		` or histogram_quantile(%[1]s, sum by (%[3]s) (rate(%[2]s{%[4]s}[$__rate_interval])))`, q, metric, by, probeSel)
}

func mean(metric, by string) string {
	return fmt.Sprintf(`sum by (%[2]s) (rate(%[1]s_sum{%[3]s}[$__rate_interval])) / (sum by (%[2]s) (rate(%[1]s_count{%[3]s}[$__rate_interval])) > 0)`+
		` or histogram_sum(sum by (%[2]s) (rate(%[1]s{%[3]s}[$__rate_interval]))) / (histogram_count(sum by (%[2]s) (rate(%[1]s{%[3]s}[$__rate_interval]))) > 0)`, metric, by, probeSel)
}

func fleetDashboard() dashboard {
	return dashboard{
		UID:         "vllm-prober-fleet",
		Title:       "vLLM / Fleet overview",
		Description: "One row per probed vLLM endpoint: SLIs, latency, throughput, headroom, regressions and firing alerts (vllm_prober mixin).",
		Variables:   commonVars(false),
		Rows: []row{{
			Title:  "$target",
			Repeat: "target",
			Panels: []panel{
				{Type: "stat", Title: "Probe success (1h)", W: 3, H: 6, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Share of probes that succeeded over the last hour, worst module (recording rule target_module:vllm_probe_success:ratio_rate1h, summed over prober replicas); the availability SLI.",
					Thresholds:  []threshold{{"red", nil}, {"orange", f64(0.99)}, {"green", f64(0.995)}},
					Targets:     []target{{Expr: `min by (target) (target_module:vllm_probe_success:ratio_rate1h{` + probeSel + `})`, Legend: "{{target}}"}}},
				{Type: "timeseries", Title: "TTFT mean / p99", W: 5, H: 6, Unit: "s",
					Description: "Client-side time to first token of the probes (vllm_probe_time_to_first_token_seconds): mean, and 99th percentile from the probe histogram.",
					Targets: []target{
						{Expr: mean("vllm_probe_time_to_first_token_seconds", "target"), Legend: "{{target}} mean"},
						{Expr: quantile("0.99", "vllm_probe_time_to_first_token_seconds", "target"), Exemplar: true, Legend: "{{target}} p99"},
					}},
				{Type: "timeseries", Title: "TPOT mean", W: 4, H: 6, Unit: "s",
					Description: "Mean time per output token of the probes: (E2E − TTFT) / (output tokens − 1).",
					Targets:     []target{{Expr: mean("vllm_probe_time_per_output_token_seconds", "target"), Legend: "{{target}} mean"}}},
				{Type: "timeseries", Title: "Output tokens/s", W: 4, H: 6, Unit: "short",
					Description: "Generation throughput of the whole server (vllm_server_generation_tokens_per_second) and the speed of the last probe (vllm_probe_output_tokens_per_second), in tokens per second.",
					Targets: []target{
						{Expr: `sum by (target) (vllm_server_generation_tokens_per_second{` + serverSel + `})`, Legend: "{{target}} server"},
						{Expr: `avg by (target) (vllm_probe_output_tokens_per_second{` + probeSel + `})`, Legend: "{{target}} probe"},
					}},
				{Type: "stat", Title: "Headroom", W: 2, H: 6, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Overall capacity headroom (vllm_server_headroom_ratio{resource=\"overall\"}): the share of capacity still free.",
					Thresholds:  []threshold{{"red", nil}, {"orange", f64(0.1)}, {"green", f64(0.25)}},
					Targets:     []target{{Expr: `min by (target) (vllm_server_headroom_ratio{` + serverSel + `, resource="overall"})`, Legend: "{{target}}"}}},
				{Type: "timeseries", Title: "Regression ratio", W: 3, H: 6, Unit: "short",
					Description: "Live value ÷ baseline per metric, worst module and baseline (vllm_probe_regression_ratio); above 1 is worse than the baseline.",
					Targets:     []target{{Expr: `max by (target, metric) (vllm_probe_regression_ratio{` + probeSel + `})`, Legend: "{{target}} {{metric}}"}}},
				{Type: "stat", Title: "Firing alerts", W: 3, H: 6, Unit: "short",
					Description: "Number of vLLM alerts firing for this target (ALERTS{alertstate=\"firing\"}).",
					Thresholds:  []threshold{{"green", nil}, {"red", f64(1)}},
					Targets:     []target{{Expr: `count(ALERTS{alertstate="firing", alertname=~"VLLM.*", job=~"$job", target=~"$target"}) or vector(0)`, Legend: "alerts"}}},
			},
		}, goodputFleetRow(), {
			Title: "Firing alerts",
			Panels: []panel{{Type: "table", Title: "Firing vLLM alerts", W: 24, H: 8, Unit: "none",
				Description: "Every firing VLLM* alert with its labels (ALERTS{alertstate=\"firing\"}).",
				Targets:     []target{{Expr: `ALERTS{alertstate="firing", alertname=~"VLLM.*"}`, Instant: true}}}},
		}},
	}
}

// The endpoint dashboard is about one endpoint: its target variable takes a
// single value, and the legends name what varies within one target (module,
// baseline, metric, stat).
func endpointDashboard() dashboard {
	return dashboard{
		UID:         "vllm-prober-endpoint",
		Title:       "vLLM / Endpoint detail",
		Description: "Client (probe) versus server view of one vLLM endpoint, with baseline overlays, saturation, failures and probe cost (vllm_prober mixin).",
		Variables:   commonVars(true),
		Rows: []row{
			{Title: "Service level", Panels: []panel{
				{Type: "timeseries", Title: "Probe success ratio", W: 6, H: 7, Unit: "percentunit", Max: f64(1),
					Description: "Share of probes that succeeded over 5m and 1h windows, per module, worst model (recording rules target_module:vllm_probe_success:ratio_rate5m / 1h, summed over prober replicas).",
					Targets: []target{
						{Expr: `min by (module) (target_module:vllm_probe_success:ratio_rate5m{` + probeSel + `})`, Legend: "5m {{module}}"},
						{Expr: `min by (module) (target_module:vllm_probe_success:ratio_rate1h{` + probeSel + `})`, Legend: "1h {{module}}"},
					}},
				{Type: "timeseries", Title: "Latency SLIs", W: 6, H: 7, Unit: "percentunit", Max: f64(1),
					Description: "Share of successful probes within the TTFT and E2E thresholds of mixin/slo.yml, over 1h, per module, worst model.",
					Targets: []target{
						{Expr: `min by (module) (target_module:vllm_probe_ttft_within_slo:ratio_rate1h{` + probeSel + `})`, Legend: "TTFT {{module}}"},
						{Expr: `min by (module) (target_module:vllm_probe_e2e_within_slo:ratio_rate1h{` + probeSel + `})`, Legend: "E2E {{module}}"},
					}},
				{Type: "timeseries", Title: "Answer correctness", W: 6, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Share of answer checks that were correct (vllm_probe_answer_checks_total{result}), per module with an expect: or questions:, and the last probe's verdict (vllm_probe_answer_correct). VLLMWrongAnswers fires when more than the slo.yml threshold is wrong.",
					NoValue:     "no module checks answers",
					Targets: []target{
						{Expr: `sum by (module) (rate(vllm_probe_answer_checks_total{` + probeSel + `, result="correct"}[$__rate_interval])) / (sum by (module) (rate(vllm_probe_answer_checks_total{` + probeSel + `}[$__rate_interval])) > 0)`, Legend: "{{module}} correct share"},
						{Expr: `min by (module) (vllm_probe_answer_correct{` + probeSel + `})`, Legend: "{{module}} last probe"},
					}},
				{Type: "timeseries", Title: "Failures by reason", W: 6, H: 7, Unit: "reqps",
					Description: "Failed probes per second by module and reason (vllm_probe_failures_total).",
					Targets:     []target{{Expr: `sum by (module, reason) (rate(vllm_probe_failures_total{` + probeSel + `}[$__rate_interval]))`, Legend: "{{module}} {{reason}}"}}},
			}},
			{Title: "Latency: client vs server", Panels: []panel{
				{Type: "timeseries", Title: "TTFT: probe vs server vs baseline", W: 12, H: 8, Unit: "s",
					Description: "Mean time to first token seen by the probes next to the server's own mean TTFT (vllm_server_time_to_first_token_seconds{stat=\"mean\"}), the probes' p99 and the baseline's expected TTFT. Means are compared, not quantiles: vLLM's coarse histogram buckets make server quantiles unreliable at low latencies.",
					Targets: []target{
						{Expr: mean("vllm_probe_time_to_first_token_seconds", "target"), Legend: "probe mean"},
						{Expr: quantile("0.99", "vllm_probe_time_to_first_token_seconds", "target"), Exemplar: true, Legend: "probe p99"},
						{Expr: serverMean("vllm_server_time_to_first_token_seconds"), Legend: "server mean"},
						{Expr: `avg by (target, baseline) (vllm_probe_expected_time_to_first_token_seconds{` + probeSel + `})`, Legend: "baseline {{baseline}}"},
						notExported("ttft"),
					}},
				{Type: "timeseries", Title: "TTFT gap (probe − server)", W: 12, H: 8, Unit: "s",
					Description: "Probe mean TTFT minus server mean TTFT over the same window (vllm_probe_server_ttft_gap_seconds): network and proxies before vLLM counts the request (docs/metrics.md).",
					Targets: []target{
						{Expr: `max by (target, module) (vllm_probe_server_ttft_gap_seconds{` + serverSel + `})`, Legend: "{{module}}"},
						notExported("ttft"),
					}},
				{Type: "timeseries", Title: "Inter-token latency: means", W: 8, H: 8, Unit: "s",
					Description: "Gaps between consecutive streamed tokens: probe mean (vllm_probe_inter_token_latency_seconds) next to the server mean (vllm_server_inter_token_latency_seconds{stat=\"mean\"}), and the probes' p99. No server quantile: when every gap falls in vLLM's lowest bucket, a server p50 reads half the bucket and invents a client/server gap.",
					Targets: []target{
						{Expr: mean("vllm_probe_inter_token_latency_seconds", "target"), Legend: "probe mean"},
						{Expr: serverMean("vllm_server_inter_token_latency_seconds"), Legend: "server mean"},
						{Expr: quantile("0.99", "vllm_probe_inter_token_latency_seconds", "target"), Legend: "probe p99"},
						notExported("itl"),
					}},
				{Type: "timeseries", Title: "TPOT vs baseline", W: 8, H: 8, Unit: "s",
					Description: "Time per output token of the probes (mean, p99) with the baseline's expected TPOT.",
					Targets: []target{
						{Expr: mean("vllm_probe_time_per_output_token_seconds", "target"), Legend: "probe mean"},
						{Expr: quantile("0.99", "vllm_probe_time_per_output_token_seconds", "target"), Exemplar: true, Legend: "probe p99"},
						{Expr: `avg by (target, baseline) (vllm_probe_expected_time_per_output_token_seconds{` + probeSel + `})`, Legend: "baseline {{baseline}}"},
					}},
				{Type: "timeseries", Title: "End-to-end latency: means", W: 8, H: 8, Unit: "s",
					Description: "Request sent to last token: probe mean (vllm_probe_e2e_latency_seconds) next to the server mean (vllm_server_e2e_latency_seconds{stat=\"mean\"}), and the probes' p99.",
					Targets: []target{
						{Expr: mean("vllm_probe_e2e_latency_seconds", "target"), Legend: "probe mean"},
						{Expr: serverMean("vllm_server_e2e_latency_seconds"), Legend: "server mean"},
						{Expr: quantile("0.99", "vllm_probe_e2e_latency_seconds", "target"), Exemplar: true, Legend: "probe p99"},
						notExported("e2e"),
					}},
				{Type: "timeseries", Title: "Regression ratios", W: 12, H: 7, Unit: "short",
					Description: "Live ÷ baseline per module, metric and baseline, worst model (vllm_probe_regression_ratio); above 1 is worse. VLLMLatencyRegression / VLLMThroughputRegression fire above the slo.yml thresholds.",
					Targets:     []target{{Expr: `max by (module, metric, baseline) (vllm_probe_regression_ratio{` + probeSel + `})`, Legend: "{{module}} {{metric}} vs {{baseline}}"}}},
				{Type: "timeseries", Title: "Queue time", W: 12, H: 7, Unit: "s",
					Description: "Time requests wait in the vLLM queue, server-side mean and p99 (vllm_server_queue_time_seconds).",
					Targets: []target{
						{Expr: `avg by (target, stat) (vllm_server_queue_time_seconds{` + serverSel + `, stat=~"mean|p99"})`, Legend: "{{stat}}"},
						notExported("queue_time"),
					}},
			}},
			{Title: "Seasonal baselines and vantages", Panels: []panel{
				{Type: "timeseries", Title: "Latency p90: live vs seasonal expectation vs benchmark", W: 12, H: 8, Unit: "s",
					Description: "The probes' p90 TTFT, TPOT and E2E over 1h (target_module:vllm_probe_latency_seconds:quantile_rate1h), the seasonal expectation (the median of the same hour 1, 2 and 3 weeks ago; absent until three weeks of history exist) and the benchmark's expected TTFT and TPOT at the live load. docs/metrics.md, \"Seasonal baselines\".",
					Targets: []target{
						{Expr: `max by (metric) (target_module:vllm_probe_latency_seconds:quantile_rate1h{` + probeSel + `})`, Legend: "live {{metric}}"},
						{Expr: `max by (metric) (target_module:vllm_probe_latency_seconds:quantile_rate1h_seasonal{` + probeSel + `})`, Legend: "seasonal {{metric}}"},
						{Expr: `avg by (baseline) (vllm_probe_expected_time_to_first_token_seconds{` + probeSel + `})`, Legend: "benchmark ttft ({{baseline}})"},
						{Expr: `avg by (baseline) (vllm_probe_expected_time_per_output_token_seconds{` + probeSel + `})`, Legend: "benchmark tpot ({{baseline}})"},
					}},
				{Type: "timeseries", Title: "Seasonal z-scores", W: 12, H: 8, Unit: "short",
					Description: "(value − seasonal expectation) ÷ the last week's standard deviation, for the p90 latencies and the probe success ratio over 1h. VLLMLatencyUnusualForThisHour fires when a latency's is above 3 for 30m and its regression ratio is above 1. A success ratio below its usual level reads negative.",
					Targets: []target{
						{Expr: `max by (metric) (target_module:vllm_probe_latency_seconds:quantile_rate1h_seasonal_zscore{` + probeSel + `})`, Legend: "{{metric}}"},
						{Expr: `min by (module) (target_module:vllm_probe_success:ratio_rate1h_seasonal_zscore{` + probeSel + `})`, Legend: "success {{module}}"},
					}},
				{Type: "timeseries", Title: "Health by vantage", W: 12, H: 7, Unit: "bool_on_off", Min: f64(0), Max: f64(1),
					Description: "/health as each vantage sees it (vllm_probe_health_up by vantage; docs/vantages.md). Every vantage down: VLLMEndpointDown; some down: VLLMEndpointUnreachableFromVantage, a path fault. One line without a vantage name with a single prober vantage.",
					Targets:     []target{{Expr: `min by (vantage) (vllm_probe_health_up{` + serverSel + `})`, Legend: "{{vantage}}"}}},
				{Type: "timeseries", Title: "TTFT: path share by vantage", W: 12, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Share of each vantage's mean probe TTFT that the fastest vantage does not pay: 1 − fastest mean ÷ this vantage's mean. The fastest vantage reads 0; a vantage at 0.4 spends 40 % of its TTFT on its path (network, proxies), not in the endpoint. 0 for every line with a single vantage.",
					Targets:     []target{{Expr: `1 - scalar(min(` + mean("vllm_probe_time_to_first_token_seconds", "vantage") + `)) / (` + mean("vllm_probe_time_to_first_token_seconds", "vantage") + `)`, Legend: "{{vantage}}"}}},
			}},
			{Title: "Throughput and saturation", Panels: []panel{
				{Type: "timeseries", Title: "Tokens/s vs expected", W: 12, H: 8, Unit: "short",
					Description: "Server generation and prompt throughput in tokens per second, against the baseline's expected generation throughput at this load.",
					Targets: []target{
						{Expr: `sum by (target) (vllm_server_generation_tokens_per_second{` + serverSel + `})`, Legend: "generation"},
						{Expr: `sum by (target) (vllm_server_prompt_tokens_per_second{` + serverSel + `})`, Legend: "prompt"},
						{Expr: `avg by (target, baseline) (vllm_server_expected_generation_tokens_per_second{` + serverSel + `})`, Legend: "expected ({{baseline}})"},
					}},
				{Type: "timeseries", Title: "Requests running / waiting", W: 12, H: 8, Unit: "short",
					Description: "Requests in the running batch and in the waiting queue (vllm_server_requests by state).",
					Targets: []target{
						{Expr: `sum by (state) (vllm_server_requests{` + serverSel + `})`, Legend: "{{state}}"},
						notExported("running"),
						notExported("waiting"),
					}},
				{Type: "timeseries", Title: "KV cache usage", W: 8, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Share of the GPU KV cache in use (vllm_server_kv_cache_usage_ratio); VLLMKVCacheSaturated fires above the slo.yml threshold.",
					Targets: []target{
						{Expr: `max by (target) (vllm_server_kv_cache_usage_ratio{` + serverSel + `})`, Legend: "usage"},
						notExported("kv_cache_usage"),
					}},
				{Type: "timeseries", Title: "Preemptions", W: 8, H: 7, Unit: "reqps",
					Description: "Requests preempted per second (vllm_server_preemptions_per_second): sustained preemption means the KV cache is too small for the load. A server that does not export preemptions shows a dashed hint, and VLLMPreemptionsHigh is blind on it.",
					Targets: []target{
						{Expr: `sum by (target) (vllm_server_preemptions_per_second{` + serverSel + `})`, Legend: "preemptions"},
						notExported("preemptions"),
					}},
				{Type: "timeseries", Title: "Speculative decoding", W: 8, H: 7, Unit: "percentunit", Min: f64(0),
					Description: "Draft acceptance rate (vllm_server_spec_decode_acceptance_ratio, left) and mean draft tokens accepted per draft (vllm_server_spec_decode_accepted_tokens_per_draft, right axis) over the collector's window. A falling acceptance rate is a throughput regression; vllm_server_spec_decode_regression_ratio compares it with a baseline whose runs had speculative decoding.",
					Targets: []target{
						{Expr: `avg by (target) (vllm_server_spec_decode_acceptance_ratio{` + serverSel + `})`, Legend: "{{target}} acceptance rate"},
						{Expr: `avg by (target) (vllm_server_spec_decode_accepted_tokens_per_draft{` + serverSel + `})`, Legend: "{{target}} accepted per draft"},
						notExported("spec_decode"),
					}},
				{Type: "timeseries", Title: "Sleep mode", W: 8, H: 7, Unit: "none", Min: f64(0), Max: f64(2),
					Description: "vLLM's sleep level (vllm_server_sleep_level): 0 awake, 1 weights offloaded, 2 weights and KV cache discarded. A sleeping engine fails probes with reason sleeping, VLLMEndpointDown does not page it, VLLMEngineSleeping fires when it sleeps too long.",
					Targets: []target{
						{Expr: `max by (target) (vllm_server_sleep_level{` + serverSel + `})`, Legend: "{{target}}"},
						notExported("sleep_state"),
					}},
				{Type: "timeseries", Title: "Headroom by resource", W: 8, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Capacity still free per resource (KV cache, batch slots, throughput) and overall (vllm_server_headroom_ratio).",
					Targets:     []target{{Expr: `min by (resource) (vllm_server_headroom_ratio{` + serverSel + `})`, Legend: "{{resource}}"}}},
			}},
			costRow(),
			goodputRow(),
			{Title: "Gateway", Panels: []panel{
				{Type: "timeseries", Title: "Load shed", W: 8, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Share of probes a gateway refused by load shedding (failure reason shed), per module, over 5m and 1h (target_module:vllm_probe_shed:ratio_rate5m / 1h). Not a failure of the availability SLO by default (slos.availability.shed_is_failure); VLLMGatewayShedding fires above the slo.yml threshold.",
					NoValue:     "no shedding",
					Targets: []target{
						{Expr: `max by (module) (target_module:vllm_probe_shed:ratio_rate5m{` + probeSel + `})`, Legend: "5m {{module}}"},
						{Expr: `max by (module) (target_module:vllm_probe_shed:ratio_rate1h{` + probeSel + `})`, Legend: "1h {{module}}"},
					}},
				{Type: "timeseries", Title: "Gateway overhead", W: 8, H: 7, Unit: "s",
					Description: "TTFT through the gateway minus TTFT of its members' direct probes, median and p90, per module (vllm_gateway_overhead_seconds): the time the gateway adds. Only on a gateway target (CONFIGURATION.md, <gateway>).",
					NoValue:     "not a gateway target",
					Targets:     []target{{Expr: `max by (module, stat) (vllm_gateway_overhead_seconds{` + serverSel + `})`, Legend: "{{module}} {{stat}}"}}},
				{Type: "timeseries", Title: "Member spread", W: 8, H: 7, Unit: "short",
					Description: "The slowest member's median TTFT over the median of the members' (vllm_gateway_member_spread_ratio), naming the slowest member: 1 is no outlier, 2 a member twice as slow, which routed probes show only as a share of slow probes.",
					NoValue:     "not a gateway target",
					Targets:     []target{{Expr: `max by (module, member) (vllm_gateway_member_spread_ratio{` + serverSel + `})`, Legend: "{{module}} slowest: {{member}}"}}},
				{Type: "timeseries", Title: "Gateway probes served by member", W: 8, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Share of the gateway's answered probes each member served, by its member header (vllm_gateway_member_share_ratio); _gateway: answered by the gateway itself (shed, queue timeout), _other: a backend outside the members. A member at 0 gets no traffic.",
					NoValue:     "not a gateway target",
					Targets:     []target{{Expr: `max by (module, member) (vllm_gateway_member_share_ratio{` + serverSel + `})`, Legend: "{{module}} {{member}}"}}},
				{Type: "timeseries", Title: "Gateway's own view: requests", W: 8, H: 7, Unit: "reqps",
					Description: "The gateway's /metrics, read by its profile: requests admitted and rejected by reason per second, and the true total (admitted + rejected; the EPP's own counter counts admitted requests only). docs/metrics.md, \"Gateways\".",
					NoValue:     "not a gateway target",
					Targets: []target{
						{Expr: `max by (target) (rate(vllm_gateway_admitted_requests_total{` + serverSel + `}[$__rate_interval]))`, Legend: "admitted"},
						{Expr: `max by (target, reason) (rate(vllm_gateway_rejected_requests_total{` + serverSel + `}[$__rate_interval]))`, Legend: "rejected {{reason}}"},
						{Expr: `max by (target) (rate(vllm_gateway_requests_total{` + serverSel + `}[$__rate_interval]))`, Legend: "total"},
					}},
				{Type: "timeseries", Title: "Gateway's own view: endpoints and queue", W: 8, H: 7, Unit: "short",
					Description: "Endpoints the gateway may route to (vllm_gateway_ready_endpoints) and requests in its own queue (vllm_gateway_queue_requests).",
					NoValue:     "not a gateway target",
					Targets: []target{
						{Expr: `max by (target) (vllm_gateway_ready_endpoints{` + serverSel + `})`, Legend: "ready endpoints"},
						{Expr: `max by (target) (vllm_gateway_queue_requests{` + serverSel + `})`, Legend: "queue"},
					}},
				{Type: "timeseries", Title: "Prefill/decode: routing decisions", W: 12, H: 7, Unit: "reqps",
					Description: "A disaggregating gateway's decisions per second (vllm_gateway_disagg_decisions_total, llm-d's llm_d_epp_disagg_decision_total): prefill-decode requests went through the prefill pool and a KV transfer, decode-only ones ran on a decode pod alone. A probe module with prefill_tokens above the router's threshold takes the prefill-decode path. docs/runbook.md, \"Where did it break\".",
					NoValue:     "no disaggregation decisions",
					Targets:     []target{{Expr: `max by (target, decision) (rate(vllm_gateway_disagg_decisions_total{` + serverSel + `}[$__rate_interval]))`, Legend: "{{decision}}"}}},
				{Type: "timeseries", Title: "Prefill/decode: KV transfer", W: 12, H: 7, Unit: "s",
					Description: "The KV cache transfers of prefill/decode disaggregation on a pod (vllm_server_kv_transfer_seconds: vLLM's NIXL, SGLang's), mean and p99,, next to the failed transfers per second (vllm_server_kv_transfer_failures_per_second). VLLMKVTransferSlow and VLLMKVTransferFailing page the pool.",
					NoValue:     "no KV connector",
					Targets: []target{
						{Expr: `avg by (target, stat) (vllm_server_kv_transfer_seconds{` + serverSel + `, stat=~"mean|p99"})`, Legend: "transfer {{stat}}"},
						{Expr: `sum by (target) (vllm_server_kv_transfer_failures_per_second{` + serverSel + `})`, Legend: "failures/s"},
					}},
			}},
			{Title: "Probe health and cost", Panels: []panel{
				{Type: "timeseries", Title: "Endpoint and scrape status", W: 6, H: 7, Unit: "bool_on_off",
					Description: "/health answers 200 (vllm_probe_health_up), /v1/models lists the model (vllm_probe_models_up) and /metrics scrapes (vllm_server_up).",
					Targets: []target{
						{Expr: `max by (target) (vllm_probe_health_up{` + probeSel + `})`, Legend: "health"},
						{Expr: `max by (target) (vllm_probe_models_up{` + probeSel + `})`, Legend: "models"},
						{Expr: `max by (target) (vllm_server_up{` + serverSel + `})`, Legend: "metrics scrape"},
					}},
				{Type: "timeseries", Title: "Time since last success", W: 6, H: 7, Unit: "s",
					Description: "Seconds since the last successful probe per module (time() − vllm_probe_last_success_timestamp_seconds): how long a failing target has been failing, kept across the prober's history eviction.",
					Targets:     []target{{Expr: `time() - max by (module) (vllm_probe_last_success_timestamp_seconds{` + probeSel + `})`, Legend: "{{module}}"}}},
				{Type: "timeseries", Title: "Probe duration", W: 6, H: 7, Unit: "s",
					Description: "Duration of the last probe per module, failures included (vllm_probe_duration_seconds, as blackbox_exporter's probe_duration_seconds): a stalled or timed-out probe shows its real elapsed time here, not in the latency histograms.",
					Targets:     []target{{Expr: `max by (module) (vllm_probe_duration_seconds{` + probeSel + `})`, Legend: "{{module}}"}}},
				{Type: "stat", Title: "Signals exported", W: 6, H: 7, Unit: "none",
					Description: "Which signals the server's /metrics exports (vllm_server_signal_available). A signal marked \"not exported by this server\" leaves its panels with a dashed hint and the alerts built on it blind (docs/runbook.md, \"Blind alerts\").",
					NoValue:     "unknown (prober without signal availability)",
					Mappings:    []mapping{{"0", "not exported by this server", "orange"}, {"1", "exported", "green"}},
					Targets:     []target{{Expr: `max by (signal) (vllm_server_signal_available{` + serverSel + `})`, Legend: "{{signal}}"}}},
				{Type: "timeseries", Title: "Probe cost", W: 12, H: 7, Unit: "short",
					Description: "Tokens spent by probes per second by kind (vllm_probe_tokens_total); multiply by 86400 for tokens per day.",
					Targets:     []target{{Expr: `sum by (kind) (rate(vllm_probe_tokens_total{` + probeSel + `}[$__rate_interval]))`, Legend: "{{kind}}"}}},
				{Type: "timeseries", Title: "Probes started and skipped", W: 12, H: 7, Unit: "reqps",
					Description: "Probes started per second by module (vllm_probe_attempts_total) and probes not started, by reason (vllm_probe_skipped_total).",
					Targets: []target{
						{Expr: `sum by (module) (rate(vllm_probe_attempts_total{` + probeSel + `}[$__rate_interval]))`, Legend: "started {{module}}"},
						{Expr: `sum by (module, reason) (rate(vllm_probe_skipped_total{` + probeSel + `}[$__rate_interval]))`, Legend: "skipped {{module}}: {{reason}}"},
					}},
				{Type: "table", Title: "Server facts", W: 24, H: 5, Unit: "none",
					Description: "vllm_server_info of the target: vLLM version, metrics_schema (which metric names the server uses: legacy, transition or v1, docs/metrics.md; a schema, not a version) and whether its TTFT includes queue time.",
					Targets:     []target{{Expr: `max without (` + replicaLabels + `) (vllm_server_info{` + serverSel + `})`, Instant: true}}},
			}},
		},
	}
}

func baselinesDashboard() dashboard {
	baselineQ := `label_values(vllm_baseline_output_throughput_tokens_per_second{job=~"$job"}, baseline)`
	vars := append(commonVars(false), queryVar("baseline", "Baseline", baselineQ))
	curve := func(title, unit, desc, baselineExpr, liveExpr, liveLegend string, hints ...target) panel {
		return panel{Type: "timeseries", Title: title, W: 12, H: 8, Unit: unit, Description: desc,
			Targets: append([]target{
				{Expr: baselineExpr, Legend: "{{baseline}} {{load_type}}={{load}}"},
				{Expr: liveExpr, Legend: liveLegend},
			}, hints...)}
	}
	latency := func(metric, title, live string) panel {
		return curve(title+" by load vs live", "s",
			"Each line is one point of the baseline curve (benchmark "+metric+" mean at one concurrency or request rate); the live series is each target's probe mean: means against means, as quantiles from coarse histogram buckets are not comparable. Where the live line falls between baseline lines is the live operating point.",
			baselineQuery("vllm_baseline_latency_seconds", `metric="`+metric+`", stat="mean"`), live, "live {{target}}")
	}
	return dashboard{
		UID:         "vllm-prober-baselines",
		Title:       "vLLM / Baselines vs live",
		Description: "Benchmark baseline curves (one series per load point, deduplicated across prober replicas) with the live operating point of each endpoint (vllm_prober mixin).",
		Variables:   vars,
		Rows: []row{
			{Title: "Live operating point", Panels: []panel{
				{Type: "stat", Title: "Running requests", W: 6, H: 5, Unit: "short",
					Description: "Requests in the batch now: the live concurrency to read the baseline curves at.",
					Targets: []target{
						{Expr: `sum by (target) (vllm_server_requests{` + serverSel + `, state="running"})`, Legend: "{{target}}"},
						notExported("running"),
					}},
				{Type: "stat", Title: "Finished requests/s", W: 6, H: 5, Unit: "reqps",
					Description: "Requests finished per second now: the live request rate to read request-rate baselines at.",
					Targets: []target{
						{Expr: `sum by (target) (vllm_server_request_success_per_second{` + serverSel + `})`, Legend: "{{target}}"},
						notExported("request_success"),
					}},
				{Type: "stat", Title: "Saturation throughput", W: 6, H: 5, Unit: "short",
					Description: "Output tokens per second at which each baseline saturates (vllm_baseline_saturation_output_tokens_per_second).",
					Targets:     []target{{Expr: baselineQuery("vllm_baseline_saturation_output_tokens_per_second", ""), Legend: "{{baseline}}"}}},
				{Type: "stat", Title: "Live share of saturation", W: 6, H: 5, Unit: "percentunit",
					Description: "Live generation throughput divided by the saturation throughput of the target's own baseline (the baseline of vllm_server_expected_generation_tokens_per_second).",
					Targets: []target{{Expr: `sum by (target, baseline) (vllm_server_generation_tokens_per_second{` + serverSel + `} * on (job, target) group_left (baseline) max by (job, target, baseline) (vllm_server_expected_generation_tokens_per_second{` + serverSel + `, baseline=~"$baseline"} * 0 + 1)) / on (baseline) group_left () ` + baselineQuery("vllm_baseline_saturation_output_tokens_per_second", ""),
						Legend: "{{target}} vs {{baseline}}"}}},
			}},
			{Title: "Curves", Panels: []panel{
				curve("Output throughput by load vs live", "short",
					"Each line is one point of the baseline throughput curve (output tokens/s at one concurrency or request rate); the live series is the server's generation throughput.",
					baselineQuery("vllm_baseline_output_throughput_tokens_per_second", ""),
					`sum by (target) (vllm_server_generation_tokens_per_second{`+serverSel+`})`, "live {{target}}"),
				curve("Request throughput by load vs live", "reqps",
					"Each line is one point of the baseline request-throughput curve; the live series is finished requests per second.",
					baselineQuery("vllm_baseline_request_throughput_requests_per_second", ""),
					`sum by (target) (vllm_server_request_success_per_second{`+serverSel+`})`, "live {{target}}",
					notExported("request_success")),
				latency("ttft", "TTFT", mean("vllm_probe_time_to_first_token_seconds", "target")),
				latency("tpot", "TPOT", mean("vllm_probe_time_per_output_token_seconds", "target")),
				latency("itl", "ITL", mean("vllm_probe_inter_token_latency_seconds", "target")),
				latency("e2e", "E2E", mean("vllm_probe_e2e_latency_seconds", "target")),
				{Type: "table", Title: "Baseline curve points", W: 24, H: 8, Unit: "none",
					Description: "Every point of the selected baselines: load type, load and median latencies.",
					Targets:     []target{{Expr: baselineQuery("vllm_baseline_latency_seconds", `stat="median"`), Instant: true}}},
			}},
		},
	}
}

// LintFile is grafana/dashboard-linter's configuration, next to the dashboards:
// the rules the dashboards deliberately do not follow, each with its reason,
// so that `dashboard-linter lint dashboards/*.json` runs clean.
const LintFile = ".lint"

const lintConfig = `# grafana/dashboard-linter exclusions for the vllm_prober mixin's dashboards,
# generated by mixin/dashboards.go (go test ./mixin/ -update). Each deviation is
# deliberate; the reason says why.
exclusions:
  template-instance-rule:
    reason: >-
      Here instance is the vllm_prober replica that scraped a series, not the
      monitored endpoint; the endpoint is the target label, which every
      dashboard has a variable for. A restart or reshard changes instance, so
      an instance variable would select a prober pod, not a vLLM server.
  target-instance-rule:
    reason: >-
      Queries select the endpoint by target=~"$target" and aggregate the prober
      replica away (by target, or max without (instance, pod) for baselines),
      so that a series keeps one line when it moves between prober replicas.
  uneditable-dashboard:
    reason: >-
      The dashboards are generated (mixin/dashboards.go) and provisioned, so
      edits in the UI do not persist anyway; they stay editable so an operator
      can explore a panel's query in place.
  target-job-rule:
    reason: >-
      The firing-alerts table reads ALERTS without job=~"$job" on purpose, and
      selects alertname=~"VLLM.*" instead: VLLMProberAbsent, the alert that
      fires when no prober is scraped at all, is absent() of an expression and
      carries no job label, so a job matcher would hide it exactly when every
      other vLLM alert is silent.
    entries:
      - panel: Firing vLLM alerts
`

// Dashboards returns the Grafana dashboards, keyed by file name, as indented
// JSON, and the dashboard-linter configuration (LintFile).
func Dashboards() (map[string][]byte, error) {
	out := map[string][]byte{LintFile: []byte(lintConfig)}
	for name, d := range map[string]dashboard{
		FleetDashboard:     fleetDashboard(),
		EndpointDashboard:  endpointDashboard(),
		BaselinesDashboard: baselinesDashboard(),
	} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d.json()); err != nil {
			return nil, fmt.Errorf("encoding dashboard %s: %w", name, err)
		}
		out[name] = b.Bytes()
	}
	return out, nil
}
