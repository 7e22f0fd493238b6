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
const (
	probeSel  = `job=~"$job", target=~"$target", model=~"$model"`
	serverSel = `job=~"$job", target=~"$target", model=~"$model"`
)

type target struct {
	Expr    string
	Legend  string
	Instant bool
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
	var targets []map[string]any
	for i, t := range p.Targets {
		tj := map[string]any{
			"datasource":   ds,
			"expr":         t.Expr,
			"legendFormat": t.Legend,
			"refId":        string(rune('A' + i)),
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
		"fieldConfig": map[string]any{"defaults": defaults, "overrides": []any{}},
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
		"refresh":    2, "sort": 1, "multi": true, "includeAll": true, "allValue": ".*",
		"current": map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		"hide":    0, "regex": "", "options": []any{},
	}
}

// commonVars are the datasource, job, target and model variables, bound to the
// prober's own series so they list probed endpoints only.
func commonVars() []map[string]any {
	return []map[string]any{
		datasourceVar(),
		queryVar("job", "Job", `label_values(vllm_probe_attempts_total, job)`),
		queryVar("target", "Target", `label_values(vllm_probe_attempts_total{job=~"$job"}, target)`),
		queryVar("model", "Model", `label_values(vllm_probe_attempts_total{job=~"$job", target=~"$target"}, model)`),
	}
}

func quantile(q, metric, by string) string {
	return fmt.Sprintf(`histogram_quantile(%s, sum by (%s, le) (rate(%s_bucket{%s}[$__rate_interval])))`, q, by, metric, probeSel)
}

func mean(metric, by string) string {
	return fmt.Sprintf(`sum by (%[2]s) (rate(%[1]s_sum{%[3]s}[$__rate_interval])) / (sum by (%[2]s) (rate(%[1]s_count{%[3]s}[$__rate_interval])) > 0)`, metric, by, probeSel)
}

func fleetDashboard() dashboard {
	return dashboard{
		UID:         "vllm-prober-fleet",
		Title:       "vLLM / Fleet overview",
		Description: "One row per probed vLLM endpoint: SLIs, latency, throughput, headroom, regressions and firing alerts (vllm_prober mixin).",
		Variables:   commonVars(),
		Rows: []row{{
			Title:  "$target",
			Repeat: "target",
			Panels: []panel{
				{Type: "stat", Title: "Probe success (1h)", W: 3, H: 6, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Share of probes that succeeded over the last hour (recording rule target_module:vllm_probe_success:ratio_rate1h); the availability SLI.",
					Thresholds:  []threshold{{"red", nil}, {"orange", f64(0.99)}, {"green", f64(0.995)}},
					Targets:     []target{{Expr: `min by (target) (target_module:vllm_probe_success:ratio_rate1h{` + probeSel + `})`, Legend: "{{target}}"}}},
				{Type: "timeseries", Title: "TTFT p50 / p99", W: 5, H: 6, Unit: "s",
					Description: "Client-side time to first token of the probes (vllm_probe_time_to_first_token_seconds), 50th and 99th percentile.",
					Targets: []target{
						{Expr: quantile("0.5", "vllm_probe_time_to_first_token_seconds", "target"), Legend: "p50"},
						{Expr: quantile("0.99", "vllm_probe_time_to_first_token_seconds", "target"), Legend: "p99"},
					}},
				{Type: "timeseries", Title: "TPOT p50", W: 4, H: 6, Unit: "s",
					Description: "Median time per output token of the probes: (E2E − TTFT) / (output tokens − 1).",
					Targets:     []target{{Expr: quantile("0.5", "vllm_probe_time_per_output_token_seconds", "target"), Legend: "p50"}}},
				{Type: "timeseries", Title: "Output tokens/s", W: 4, H: 6, Unit: "short",
					Description: "Generation throughput of the whole server (vllm_server_generation_tokens_per_second) and the speed of the last probe (vllm_probe_output_tokens_per_second), in tokens per second.",
					Targets: []target{
						{Expr: `sum by (target) (vllm_server_generation_tokens_per_second{` + serverSel + `})`, Legend: "server"},
						{Expr: `avg by (target) (vllm_probe_output_tokens_per_second{` + probeSel + `})`, Legend: "probe"},
					}},
				{Type: "stat", Title: "Headroom", W: 2, H: 6, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Overall capacity headroom (vllm_server_headroom_ratio{resource=\"overall\"}): the share of capacity still free.",
					Thresholds:  []threshold{{"red", nil}, {"orange", f64(0.1)}, {"green", f64(0.25)}},
					Targets:     []target{{Expr: `min by (target) (vllm_server_headroom_ratio{` + serverSel + `, resource="overall"})`, Legend: "{{target}}"}}},
				{Type: "timeseries", Title: "Regression ratio", W: 3, H: 6, Unit: "short",
					Description: "Live value ÷ baseline per metric (vllm_probe_regression_ratio); above 1 is worse than the baseline.",
					Targets:     []target{{Expr: `max by (metric) (vllm_probe_regression_ratio{` + probeSel + `})`, Legend: "{{metric}}"}}},
				{Type: "stat", Title: "Firing alerts", W: 3, H: 6, Unit: "short",
					Description: "Number of vLLM alerts firing for this target (ALERTS{alertstate=\"firing\"}).",
					Thresholds:  []threshold{{"green", nil}, {"red", f64(1)}},
					Targets:     []target{{Expr: `count(ALERTS{alertstate="firing", alertname=~"VLLM.*", target=~"$target"}) or vector(0)`, Legend: "alerts"}}},
			},
		}, {
			Title: "Firing alerts",
			Panels: []panel{{Type: "table", Title: "Firing vLLM alerts", W: 24, H: 8, Unit: "none",
				Description: "Every firing VLLM* alert with its labels (ALERTS{alertstate=\"firing\"}).",
				Targets:     []target{{Expr: `ALERTS{alertstate="firing", alertname=~"VLLM.*"}`, Instant: true}}}},
		}},
	}
}

func endpointDashboard() dashboard {
	return dashboard{
		UID:         "vllm-prober-endpoint",
		Title:       "vLLM / Endpoint detail",
		Description: "Client (probe) versus server view of one vLLM endpoint, with baseline overlays, saturation, failures and probe cost (vllm_prober mixin).",
		Variables:   commonVars(),
		Rows: []row{
			{Title: "Service level", Panels: []panel{
				{Type: "timeseries", Title: "Probe success ratio", W: 8, H: 7, Unit: "percentunit", Max: f64(1),
					Description: "Share of probes that succeeded over 5m and 1h windows (recording rules target_module:vllm_probe_success:ratio_rate5m / 1h).",
					Targets: []target{
						{Expr: `target_module:vllm_probe_success:ratio_rate5m{` + probeSel + `}`, Legend: "5m {{module}}"},
						{Expr: `target_module:vllm_probe_success:ratio_rate1h{` + probeSel + `}`, Legend: "1h {{module}}"},
					}},
				{Type: "timeseries", Title: "Latency SLIs", W: 8, H: 7, Unit: "percentunit", Max: f64(1),
					Description: "Share of successful probes within the TTFT and E2E thresholds of mixin/slo.yml, over 1h.",
					Targets: []target{
						{Expr: `target_module:vllm_probe_ttft_within_slo:ratio_rate1h{` + probeSel + `}`, Legend: "TTFT {{module}}"},
						{Expr: `target_module:vllm_probe_e2e_within_slo:ratio_rate1h{` + probeSel + `}`, Legend: "E2E {{module}}"},
					}},
				{Type: "timeseries", Title: "Failures by reason", W: 8, H: 7, Unit: "reqps",
					Description: "Failed probes per second by reason (vllm_probe_failures_total).",
					Targets:     []target{{Expr: `sum by (reason) (rate(vllm_probe_failures_total{` + probeSel + `}[$__rate_interval]))`, Legend: "{{reason}}"}}},
			}},
			{Title: "Latency: client vs server", Panels: []panel{
				{Type: "timeseries", Title: "TTFT: probe vs server vs baseline", W: 12, H: 8, Unit: "s",
					Description: "Mean time to first token seen by the probes, the server's own mean TTFT, and the baseline's expected TTFT.",
					Targets: []target{
						{Expr: mean("vllm_probe_time_to_first_token_seconds", "target"), Legend: "probe mean"},
						{Expr: quantile("0.99", "vllm_probe_time_to_first_token_seconds", "target"), Legend: "probe p99"},
						{Expr: `avg by (target) (vllm_server_time_to_first_token_seconds{` + serverSel + `, stat="mean"})`, Legend: "server mean"},
						{Expr: `avg by (target, baseline) (vllm_probe_expected_time_to_first_token_seconds{` + probeSel + `})`, Legend: "baseline {{baseline}}"},
					}},
				{Type: "timeseries", Title: "TTFT gap (probe − server)", W: 12, H: 8, Unit: "s",
					Description: "Probe mean TTFT minus server mean TTFT over the same window (vllm_probe_server_ttft_gap_seconds): network, proxy and queueing before vLLM counts the request.",
					Targets:     []target{{Expr: `vllm_probe_server_ttft_gap_seconds{` + serverSel + `}`, Legend: "{{target}}"}}},
				{Type: "timeseries", Title: "Inter-token latency", W: 8, H: 8, Unit: "s",
					Description: "Gaps between consecutive streamed tokens: probe p50/p99 (vllm_probe_inter_token_latency_seconds) and server p50/p99.",
					Targets: []target{
						{Expr: quantile("0.5", "vllm_probe_inter_token_latency_seconds", "target"), Legend: "probe p50"},
						{Expr: quantile("0.99", "vllm_probe_inter_token_latency_seconds", "target"), Legend: "probe p99"},
						{Expr: `avg by (target, stat) (vllm_server_inter_token_latency_seconds{` + serverSel + `, stat=~"p50|p99"})`, Legend: "server {{stat}}"},
					}},
				{Type: "timeseries", Title: "TPOT vs baseline", W: 8, H: 8, Unit: "s",
					Description: "Time per output token of the probes (p50, p99) with the baseline's expected TPOT.",
					Targets: []target{
						{Expr: quantile("0.5", "vllm_probe_time_per_output_token_seconds", "target"), Legend: "probe p50"},
						{Expr: quantile("0.99", "vllm_probe_time_per_output_token_seconds", "target"), Legend: "probe p99"},
						{Expr: `avg by (target, baseline) (vllm_probe_expected_time_per_output_token_seconds{` + probeSel + `})`, Legend: "baseline {{baseline}}"},
					}},
				{Type: "timeseries", Title: "End-to-end latency", W: 8, H: 8, Unit: "s",
					Description: "Request sent to last token: probe p50/p99 (vllm_probe_e2e_latency_seconds) and the server's p50/p99.",
					Targets: []target{
						{Expr: quantile("0.5", "vllm_probe_e2e_latency_seconds", "target"), Legend: "probe p50"},
						{Expr: quantile("0.99", "vllm_probe_e2e_latency_seconds", "target"), Legend: "probe p99"},
						{Expr: `avg by (target, stat) (vllm_server_e2e_latency_seconds{` + serverSel + `, stat=~"p50|p99"})`, Legend: "server {{stat}}"},
					}},
				{Type: "timeseries", Title: "Regression ratios", W: 12, H: 7, Unit: "short",
					Description: "Live ÷ baseline per metric and baseline (vllm_probe_regression_ratio); above 1 is worse. VLLMLatencyRegression / VLLMThroughputRegression fire above the slo.yml thresholds.",
					Targets:     []target{{Expr: `vllm_probe_regression_ratio{` + probeSel + `}`, Legend: "{{metric}} vs {{baseline}}"}}},
				{Type: "timeseries", Title: "Queue time", W: 12, H: 7, Unit: "s",
					Description: "Time requests wait in the vLLM queue, server-side mean and p99 (vllm_server_queue_time_seconds).",
					Targets:     []target{{Expr: `avg by (target, stat) (vllm_server_queue_time_seconds{` + serverSel + `, stat=~"mean|p99"})`, Legend: "{{stat}}"}}},
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
					Targets:     []target{{Expr: `sum by (state) (vllm_server_requests{` + serverSel + `})`, Legend: "{{state}}"}}},
				{Type: "timeseries", Title: "KV cache usage", W: 8, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Share of the GPU KV cache in use (vllm_server_kv_cache_usage_ratio); VLLMKVCacheSaturated fires above the slo.yml threshold.",
					Targets:     []target{{Expr: `max by (target) (vllm_server_kv_cache_usage_ratio{` + serverSel + `})`, Legend: "{{target}}"}}},
				{Type: "timeseries", Title: "Preemptions", W: 8, H: 7, Unit: "reqps",
					Description: "Requests preempted per second (vllm_server_preemptions_per_second): sustained preemption means the KV cache is too small for the load.",
					Targets:     []target{{Expr: `sum by (target) (vllm_server_preemptions_per_second{` + serverSel + `})`, Legend: "{{target}}"}}},
				{Type: "timeseries", Title: "Headroom by resource", W: 8, H: 7, Unit: "percentunit", Min: f64(0), Max: f64(1),
					Description: "Capacity still free per resource (KV cache, batch slots, throughput) and overall (vllm_server_headroom_ratio).",
					Targets:     []target{{Expr: `min by (resource) (vllm_server_headroom_ratio{` + serverSel + `})`, Legend: "{{resource}}"}}},
			}},
			{Title: "Probe health and cost", Panels: []panel{
				{Type: "timeseries", Title: "Endpoint and scrape status", W: 8, H: 7, Unit: "bool_on_off",
					Description: "/health answers 200 (vllm_probe_health_up), /v1/models lists the model (vllm_probe_models_up) and /metrics scrapes (vllm_server_up).",
					Targets: []target{
						{Expr: `max by (target) (vllm_probe_health_up{` + probeSel + `})`, Legend: "health"},
						{Expr: `max by (target) (vllm_probe_models_up{` + probeSel + `})`, Legend: "models"},
						{Expr: `max by (target) (vllm_server_up{job=~"$job", target=~"$target"})`, Legend: "metrics scrape"},
					}},
				{Type: "timeseries", Title: "Probe cost", W: 8, H: 7, Unit: "short",
					Description: "Tokens spent by probes per second by kind (vllm_probe_tokens_total); multiply by 86400 for tokens per day.",
					Targets:     []target{{Expr: `sum by (kind) (rate(vllm_probe_tokens_total{` + probeSel + `}[$__rate_interval]))`, Legend: "{{kind}}"}}},
				{Type: "timeseries", Title: "Probes started and skipped", W: 8, H: 7, Unit: "reqps",
					Description: "Probes started per second (vllm_probe_attempts_total) and probes not started, by reason (vllm_probe_skipped_total).",
					Targets: []target{
						{Expr: `sum by (target) (rate(vllm_probe_attempts_total{` + probeSel + `}[$__rate_interval]))`, Legend: "started"},
						{Expr: `sum by (reason) (rate(vllm_probe_skipped_total{` + probeSel + `}[$__rate_interval]))`, Legend: "skipped: {{reason}}"},
					}},
			}},
		},
	}
}

func baselinesDashboard() dashboard {
	vars := append(commonVars(), map[string]any{
		"name": "baseline", "label": "Baseline", "type": "query", "datasource": ds,
		"query":      map[string]string{"query": `label_values(vllm_baseline_output_throughput_tokens_per_second, baseline)`, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
		"definition": `label_values(vllm_baseline_output_throughput_tokens_per_second, baseline)`,
		"refresh":    2, "sort": 1, "multi": true, "includeAll": true, "allValue": ".*",
		"current": map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		"hide":    0, "regex": "", "options": []any{},
	})
	bsel := `baseline=~"$baseline"`
	curve := func(title, unit, desc, baselineExpr, liveExpr, liveLegend string) panel {
		return panel{Type: "timeseries", Title: title, W: 12, H: 8, Unit: unit, Description: desc,
			Targets: []target{
				{Expr: baselineExpr, Legend: "{{baseline}} {{load_type}}={{load}}"},
				{Expr: liveExpr, Legend: liveLegend},
			}}
	}
	latency := func(metric, title, live string) panel {
		return curve(title+" by load vs live", "s",
			"Each line is one point of the baseline curve (benchmark "+metric+" median at one concurrency or request rate); the bold series is the live value. Where the live line falls between baseline lines is the live operating point.",
			`vllm_baseline_latency_seconds{`+bsel+`, metric="`+metric+`", stat="median"}`, live, "live")
	}
	return dashboard{
		UID:         "vllm-prober-baselines",
		Title:       "vLLM / Baselines vs live",
		Description: "Benchmark baseline curves (one series per load point) with the live operating point of each endpoint (vllm_prober mixin).",
		Variables:   vars,
		Rows: []row{
			{Title: "Live operating point", Panels: []panel{
				{Type: "stat", Title: "Running requests", W: 6, H: 5, Unit: "short",
					Description: "Requests in the batch now: the live concurrency to read the baseline curves at.",
					Targets:     []target{{Expr: `sum by (target) (vllm_server_requests{` + serverSel + `, state="running"})`, Legend: "{{target}}"}}},
				{Type: "stat", Title: "Finished requests/s", W: 6, H: 5, Unit: "reqps",
					Description: "Requests finished per second now: the live request rate to read request-rate baselines at.",
					Targets:     []target{{Expr: `sum by (target) (vllm_server_request_success_per_second{` + serverSel + `})`, Legend: "{{target}}"}}},
				{Type: "stat", Title: "Saturation throughput", W: 6, H: 5, Unit: "short",
					Description: "Output tokens per second at which each baseline saturates (vllm_baseline_saturation_output_tokens_per_second).",
					Targets:     []target{{Expr: `vllm_baseline_saturation_output_tokens_per_second{` + bsel + `}`, Legend: "{{baseline}}"}}},
				{Type: "stat", Title: "Live share of saturation", W: 6, H: 5, Unit: "percentunit",
					Description: "Live generation throughput divided by the baseline's saturation throughput.",
					Targets: []target{{Expr: `sum by (target) (vllm_server_generation_tokens_per_second{` + serverSel + `}) / on () group_left () max(vllm_baseline_saturation_output_tokens_per_second{` + bsel + `})`,
						Legend: "{{target}}"}}},
			}},
			{Title: "Curves", Panels: []panel{
				curve("Output throughput by load vs live", "short",
					"Each line is one point of the baseline throughput curve (output tokens/s at one concurrency or request rate); the live series is the server's generation throughput.",
					`vllm_baseline_output_throughput_tokens_per_second{`+bsel+`}`,
					`sum by (target) (vllm_server_generation_tokens_per_second{`+serverSel+`})`, "live {{target}}"),
				curve("Request throughput by load vs live", "reqps",
					"Each line is one point of the baseline request-throughput curve; the live series is finished requests per second.",
					`vllm_baseline_request_throughput_requests_per_second{`+bsel+`}`,
					`sum by (target) (vllm_server_request_success_per_second{`+serverSel+`})`, "live {{target}}"),
				latency("ttft", "TTFT", quantile("0.5", "vllm_probe_time_to_first_token_seconds", "target")),
				latency("tpot", "TPOT", quantile("0.5", "vllm_probe_time_per_output_token_seconds", "target")),
				latency("itl", "ITL", quantile("0.5", "vllm_probe_inter_token_latency_seconds", "target")),
				latency("e2e", "E2E", quantile("0.5", "vllm_probe_e2e_latency_seconds", "target")),
				{Type: "table", Title: "Baseline curve points", W: 24, H: 8, Unit: "none",
					Description: "Every point of the selected baselines: load type, load and median latencies.",
					Targets:     []target{{Expr: `vllm_baseline_latency_seconds{` + bsel + `, stat="median"}`, Instant: true}}},
			}},
		},
	}
}

// Dashboards returns the Grafana dashboards, keyed by file name, as indented JSON.
func Dashboards() (map[string][]byte, error) {
	out := map[string][]byte{}
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
