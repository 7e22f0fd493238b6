package baseline

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ---- guidellm (vllm-project/guidellm benchmarks.json) ----

// guidellmPercentiles maps guidellm percentile keys to quantiles.
var guidellmPercentiles = map[string]float64{"p001": 0.1, "p01": 1, "p05": 5, "p10": 10, "p25": 25, "p50": 50,
	"p75": 75, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}

func importGuideLLM(im *Import, v any) error {
	top := &jreader{obj: v.(map[string]any)}
	benches, ok := top.obj["benchmarks"].([]any)
	if !ok {
		return fmt.Errorf("\"benchmarks\" is a %s, not an array", jsonKind(top.obj["benchmarks"]))
	}
	if len(benches) == 0 {
		return fmt.Errorf("\"benchmarks\" is empty")
	}
	var model string
	for _, k := range []string{"config", "args"} {
		if o, ok := top.obj[k].(map[string]any); ok {
			model = firstNonEmpty(model, stringAt(o, "model"))
		}
	}
	date := ""
	if md, ok := top.obj["metadata"].(map[string]any); ok {
		date = stringAt(md, "created_at")
	}
	for i, bv := range benches {
		bo, ok := bv.(map[string]any)
		if !ok {
			return fmt.Errorf("benchmarks[%d]: a %s, not an object", i, jsonKind(bv))
		}
		p, err := guidellmPoint(bo)
		if err != nil {
			return fmt.Errorf("benchmarks[%d]: %w", i, err)
		}
		p.Ref = fmt.Sprintf("%s benchmarks[%d]", filepathBase(im.File), i)
		// start_time: epoch seconds of the benchmark's start (every guidellm version writes it);
		// the import writes it as RFC 3339.
		if st, ok := bo["start_time"].(json.Number); ok {
			if f, err := st.Float64(); err == nil && f > 0 {
				p.Date = st.String()
			}
		}
		bm := model
		for _, k := range []string{"config", "args"} {
			if o, ok := bo[k].(map[string]any); ok {
				bm = firstNonEmpty(stringAt(o, "model"), bm)
			}
		}
		im.Baselines = append(im.Baselines, &Baseline{Model: bm, Source: Source{Tool: ToolGuideLLM, Date: firstNonEmpty(date, p.Date)}, Points: []Point{p}})
	}
	return nil
}

func stringAt(o map[string]any, key string) string {
	s, _ := o[key].(string)
	return s
}

func guidellmPoint(bo map[string]any) (Point, error) {
	var p Point
	var strategy map[string]any
	for _, k := range []string{"config", "args"} {
		if o, ok := bo[k].(map[string]any); ok {
			if s, ok := o["strategy"].(map[string]any); ok {
				strategy = s
			}
		}
	}
	if strategy == nil {
		// guidellm 0.1 (GuidanceReport) nests TextGenerationBenchmarkReports, each a list of
		// {"mode", "rate", "results", "errors"} with per-request records only, no aggregates.
		if _, nested := bo["benchmarks"]; nested || bo["mode"] != nil {
			return p, fmt.Errorf("a guidellm 0.1 report (per-request results of each mode and rate, no aggregate metrics): not read; re-run with guidellm 0.2 or later, whose benchmarks.json carries the statistics")
		}
		return p, fmt.Errorf("missing \"config.strategy\" (or \"args.strategy\" before v0.4): cannot tell the load level")
	}
	sr := &jreader{obj: strategy}
	typ := sr.s("type_")
	p.Label = typ
	switch typ {
	case "synchronous":
		p.Concurrency = lp(1)
	case "concurrent":
		p.Concurrency = sr.load("streams")
		if p.Concurrency == nil {
			p.Concurrency = sr.load("max_concurrency")
		}
		if p.Concurrency == nil {
			return p, fmt.Errorf("concurrent strategy without \"streams\"")
		}
	case "constant", "poisson":
		p.RequestRate = sr.load("rate")
		if p.RequestRate == nil {
			return p, fmt.Errorf("%s strategy without \"rate\"", typ)
		}
	case "throughput":
		p.RequestRate = lp(math.Inf(1))
		if c := sr.load("max_concurrency"); c != nil {
			p.Concurrency = c
		}
	default:
		return p, fmt.Errorf("unknown strategy type %q", typ)
	}
	if sr.err != nil {
		return p, sr.err
	}
	metrics, ok := bo["metrics"].(map[string]any)
	if !ok {
		return p, fmt.Errorf("missing \"metrics\"")
	}
	var err error
	get := func(name string, scale float64) *Stats {
		if err != nil {
			return nil
		}
		var s *Stats
		s, err = guidellmStats(metrics, name, scale)
		return s
	}
	p.TTFT = get("time_to_first_token_ms", 1e-3)
	p.TPOT = get("inter_token_latency_ms", 1e-3)           // guidellm ITL = vLLM TPOT (§3.5)
	p.TPOTInclTTFT = get("time_per_output_token_ms", 1e-3) // includes TTFT: not vLLM TPOT
	p.E2E = get("request_latency", 1)                      // already seconds
	if err != nil {
		return p, err
	}
	mean := func(name string) *float64 {
		if err != nil {
			return nil
		}
		var s *Stats
		s, err = guidellmStats(metrics, name, 1)
		if s == nil {
			return nil
		}
		return s.Mean
	}
	// guidellm's own throughputs are duration-weighted rate distributions over event times; they
	// are kept under their own names in tool_figures, and the figures of the point are computed
	// below with vLLM's definitions (completed / duration, tokens / duration) when possible.
	toolRates := map[string]*float64{
		"requests_per_second.successful.mean":      mean("requests_per_second"),
		"output_tokens_per_second.successful.mean": mean("output_tokens_per_second"),
		"tokens_per_second.successful.mean":        mean("tokens_per_second"),
	}
	if err != nil {
		return p, err
	}
	for k, v := range toolRates {
		if v != nil {
			if p.ToolFigures == nil {
				p.ToolFigures = map[string]float64{}
			}
			p.ToolFigures[k] = *v
		}
	}
	if p.TTFT == nil && p.OutputThroughput == nil && p.E2E == nil {
		return p, fmt.Errorf("metrics has none of time_to_first_token_ms, request_latency, output_tokens_per_second")
	}
	// Request counts: metrics.request_totals (v0.4+) or request_totals (v0.3).
	totals, _ := metrics["request_totals"].(map[string]any)
	if totals == nil {
		totals, _ = bo["request_totals"].(map[string]any)
	}
	if totals != nil {
		tr := &jreader{obj: totals}
		p.Completed, p.Failed = tr.i("successful"), tr.i("errored")
		if tr.err != nil {
			return p, fmt.Errorf("request_totals: %w", tr.err)
		}
	}
	br := &jreader{obj: bo}
	p.DurationSeconds = br.f("duration")
	if br.err != nil {
		return p, br.err
	}
	if p.Completed != nil && *p.Completed == 0 {
		p.AllFailed = true
	}
	in, out, err := guidellmTokenTotals(metrics, bo, p.Completed)
	if err != nil {
		return p, err
	}
	p.TotalInputTokens, p.TotalOutputTokens = in, out
	if d := p.DurationSeconds; d != nil && *d > 0 {
		if p.Completed != nil {
			p.RequestThroughput = fp(float64(*p.Completed) / *d)
		}
		if out != nil {
			p.OutputThroughput = fp(float64(*out) / *d)
			if in != nil {
				p.TotalTokenThroughput = fp(float64(*in+*out) / *d)
			}
		}
	}
	// Without counts or token totals the tool's rate is all there is: keep it, labelled by the
	// definition (docs/baselines.md), rather than lose the figure.
	if p.RequestThroughput == nil {
		p.RequestThroughput = toolRates["requests_per_second.successful.mean"]
	}
	if p.OutputThroughput == nil {
		p.OutputThroughput = toolRates["output_tokens_per_second.successful.mean"]
	}
	if p.TotalTokenThroughput == nil {
		p.TotalTokenThroughput = toolRates["tokens_per_second.successful.mean"]
	}
	return p, nil
}

// guidellmTokenTotals returns the prompt and output tokens of the successful requests:
// metrics.<prompt|output>_token_count.successful.total_sum, else the sum over the per-request
// records requests.successful[] when they are all there (guidellm keeps a sample only when
// --request-samples limits it).
func guidellmTokenTotals(metrics, bo map[string]any, completed *int64) (in, out *int64, err error) {
	total := func(name string) (*int64, error) {
		m, ok := metrics[name].(map[string]any)
		if !ok {
			return nil, nil
		}
		succ, ok := m["successful"].(map[string]any)
		if !ok {
			return nil, nil
		}
		r := &jreader{obj: succ}
		v := r.f("total_sum")
		if r.err != nil {
			return nil, fmt.Errorf("metrics.%s.successful: %w", name, r.err)
		}
		if v == nil {
			return nil, nil
		}
		return ip(int64(math.Round(*v))), nil
	}
	if in, err = total("prompt_token_count"); err != nil {
		return nil, nil, err
	}
	if out, err = total("output_token_count"); err != nil {
		return nil, nil, err
	}
	reqs, _ := bo["requests"].(map[string]any)
	succ, _ := reqs["successful"].([]any)
	if (in != nil && out != nil) || completed == nil || len(succ) == 0 || int64(len(succ)) != *completed {
		return in, out, nil
	}
	var sumIn, sumOut int64
	for i, rv := range succ {
		ro, ok := rv.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("requests.successful[%d]: a %s, not an object", i, jsonKind(rv))
		}
		r := &jreader{obj: ro}
		pi, po := r.i("prompt_tokens"), r.i("output_tokens")
		if r.err != nil {
			return nil, nil, fmt.Errorf("requests.successful[%d]: %w", i, r.err)
		}
		if pi == nil || po == nil {
			return in, out, nil
		}
		sumIn += *pi
		sumOut += *po
	}
	if in == nil {
		in = &sumIn
	}
	if out == nil {
		out = &sumOut
	}
	return in, out, nil
}

// guidellmStats reads metrics[name].successful (a DistributionSummary) scaled to base units.
func guidellmStats(metrics map[string]any, name string, scale float64) (*Stats, error) {
	m, ok := metrics[name].(map[string]any)
	if !ok {
		return nil, nil
	}
	succ, ok := m["successful"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("metrics.%s: missing \"successful\" distribution", name)
	}
	r := &jreader{obj: succ}
	s := &Stats{Mean: scaled(r.f("mean"), scale), Median: scaled(r.f("median"), scale), Std: scaled(r.f("std_dev"), scale),
		Min: scaled(r.f("min"), scale), Max: scaled(r.f("max"), scale)}
	if pm, ok := succ["percentiles"].(map[string]any); ok {
		pr := &jreader{obj: pm}
		for k, q := range guidellmPercentiles {
			if v := pr.f(k); v != nil {
				if s.Percentiles == nil {
					s.Percentiles = Percentiles{}
				}
				s.Percentiles[percentileKey(q)] = scale10(*v, scale)
			}
		}
		if pr.err != nil {
			return nil, fmt.Errorf("metrics.%s.successful.percentiles: %w", name, pr.err)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("metrics.%s.successful: %w", name, r.err)
	}
	if c := (&jreader{obj: succ}).f("count"); c != nil && *c == 0 {
		return nil, nil // no successful requests: the zeros are not measurements
	}
	if s.empty() {
		return nil, nil
	}
	return s, nil
}

// ---- aiperf and genai-perf (profile_export_aiperf.json, profile_export_genai_perf.json) ----

var reAIPerfPercentile = regexp.MustCompile(`^p(\d+(?:\.\d+)?)$`)

// aiperfTagAliases maps the short tags of early aiperf exports to the metric names of later ones.
var aiperfTagAliases = map[string]string{"ttft": "time_to_first_token", "ttst": "time_to_second_token"}

// aiperfFlatten returns top with the metrics of an early export's "records" object (keyed by
// their tags) moved to the top level, where later exports keep them.
func aiperfFlatten(top map[string]any) map[string]any {
	recs, ok := top["records"].(map[string]any)
	if !ok {
		return top
	}
	out := make(map[string]any, len(top)+len(recs))
	for k, v := range top {
		if k != "records" {
			out[k] = v
		}
	}
	for k, r := range recs {
		name := k
		if ro, ok := r.(map[string]any); ok {
			if tag, ok := ro["tag"].(string); ok && tag != "" {
				name = tag
			}
		}
		if alias, ok := aiperfTagAliases[name]; ok {
			name = alias
		}
		if _, taken := out[name]; !taken {
			out[name] = r
		}
	}
	return out
}

func importAIPerf(im *Import, v any) error {
	top := aiperfFlatten(v.(map[string]any))
	tool := ToolGenAIPerf
	if im.Format == FormatAIPerf {
		tool = ToolAIPerf
	}
	var p Point
	var err error
	get := func(name string) *Stats {
		if err != nil {
			return nil
		}
		var s *Stats
		s, err = aiperfStats(top, name, true)
		return s
	}
	p.TTFT = get("time_to_first_token")
	p.TPOT = get("inter_token_latency") // (latency - TTFT)/(OSL - 1) = vLLM TPOT (§3.5)
	p.ITL = get("inter_chunk_latency")  // aiperf only
	p.E2E = get("request_latency")
	if err != nil {
		return err
	}
	avg := func(name string) *float64 {
		if err != nil {
			return nil
		}
		var s *Stats
		s, err = aiperfStats(top, name, false)
		if s == nil {
			return nil
		}
		return s.Mean
	}
	// genai-perf writes request_goodput {"avg": -1} when it cannot evaluate the --goodput
	// constraints (its invalid-goodput sentinel): no goodput was measured, the rest stands.
	for _, k := range []string{"request_goodput", "goodput"} {
		if m, ok := top[k].(map[string]any); ok {
			if g, present, _ := toFloat(m["avg"]); present && g < 0 {
				im.Notes = append(im.Notes, fmt.Sprintf("%q is %v, the tool's mark for goodput constraints it could not evaluate: no goodput imported", k, g))
				delete(top, k)
			}
		}
	}
	p.OutputThroughput = avg("output_token_throughput")
	p.RequestThroughput = avg("request_throughput")
	p.RequestGoodput = avg("request_goodput")
	if p.RequestGoodput == nil {
		p.RequestGoodput = avg("goodput")
	}
	if err != nil {
		return err
	}
	perReq := "output_token_throughput_per_request"
	if tool == ToolAIPerf {
		perReq = "output_token_throughput_per_user"
	}
	if p.OutputThroughputPerRequest, err = aiperfStats(top, perReq, false); err != nil {
		return err
	}
	count := func(name string) *int64 {
		if err != nil {
			return nil
		}
		f := avg(name)
		if f == nil {
			return nil
		}
		return ip(int64(math.Round(*f)))
	}
	p.Completed = count("request_count")
	p.Failed = count("error_request_count")
	// Token totals of the successful requests: aiperf total_isl / total_osl (schema 1.3 also
	// writes total_output_tokens), and its total_token_throughput = (ISL + OSL) / duration.
	p.TotalInputTokens = count("total_isl")
	if p.TotalOutputTokens = count("total_osl"); p.TotalOutputTokens == nil {
		p.TotalOutputTokens = count("total_output_tokens")
	}
	p.TotalTokenThroughput = avg("total_token_throughput")
	if err != nil {
		return err
	}
	if p.TTFT == nil && p.E2E == nil && p.OutputThroughput == nil {
		return fmt.Errorf("none of \"time_to_first_token\", \"request_latency\", \"output_token_throughput\" is present")
	}
	cfg, _ := top["input_config"].(map[string]any)
	if cfg == nil {
		return fmt.Errorf("missing \"input_config\": cannot tell the load level (concurrency or request_rate)")
	}
	model := ""
	if err := aiperfPhaseLoad(top, cfg, &p); err != nil {
		return err
	}
	if c := findKey(cfg, "concurrency"); c != nil && p.Concurrency == nil && p.RequestRate == nil {
		cr := &jreader{obj: map[string]any{"concurrency": c}}
		p.Concurrency = cr.load("concurrency")
		if cr.err != nil {
			return fmt.Errorf("input_config: %w", cr.err)
		}
	}
	if r := findKey(cfg, "request_rate"); r != nil && p.RequestRate == nil {
		rr := &jreader{obj: map[string]any{"request_rate": r}}
		p.RequestRate = rr.load("request_rate")
		if rr.err != nil {
			return fmt.Errorf("input_config: %w", rr.err)
		}
	}
	if p.Concurrency == nil && p.RequestRate == nil {
		return fmt.Errorf("input_config has neither \"concurrency\" nor \"request_rate\" (nor phases[] with either, nor run_info.variation_values)")
	}
	model = aiperfModel(cfg)
	switch m := findKey(cfg, "model_names").(type) {
	case []any:
		if len(m) > 0 && model == "" {
			model, _ = m[0].(string)
		}
	}
	if model == "" {
		switch m := findKey(cfg, "model").(type) {
		case string:
			model = m
		case []any:
			if len(m) > 0 {
				model, _ = m[0].(string)
			}
		}
	}
	if p.Failed == nil {
		if n, ok, err := aiperfErrorCount(top); err != nil {
			return err
		} else if ok {
			p.Failed = &n
		}
	}
	date := ""
	if d, err := aiperfDuration(top); err != nil {
		return err
	} else if d != nil {
		p.DurationSeconds = d
	}
	if st, ok := top["start_time"].(string); ok {
		date = st
	}
	if p.Completed != nil && *p.Completed == 0 {
		p.AllFailed = true
	}
	// aiperf counts the good requests (good_request_count); with genai-perf the attainment is
	// derived from request_goodput × duration where the counts allow (finishGoodput).
	if good := avg("good_request_count"); good != nil {
		p.SLOAttainment = goodCountAttainment(math.Round(*good), p.Completed, p.Failed)
	}
	if err != nil {
		return err
	}
	// --goodput is kept in the input configuration (aiperf's input.goodput, genai-perf's
	// goodput): metric tags and milliseconds.
	if g, ok := findKey(cfg, "goodput").(map[string]any); ok && p.hasGoodput() {
		var note string
		if p.GoodputObjectives, note = toolObjectives(g, aiperfObjectiveKeys, 1e-3); note != "" {
			im.Notes = append(im.Notes, note)
		}
	}
	p.Ref = filepathBase(im.File)
	im.Baselines = append(im.Baselines, &Baseline{Model: model, Source: Source{Tool: tool, Date: date}, Points: []Point{p}})
	return nil
}

// aiperfPhaseLoad reads the load of an aiperf export of profile-export schema 1.3 and later:
// input_config.phases[], whose measured phase is the last one not excluded from the results
// (exclude_from_results: true, or named warmup). A phase is {"type": "concurrency",
// "concurrency": 16}, or a rate phase {"type": "poisson"|"constant"|"gamma", "rate": 1.0} with an
// optional "concurrency" cap (aiperf's --request-rate [--concurrency]). Without phases, the load
// comes from run_info.variation_values.
func aiperfPhaseLoad(top, cfg map[string]any, p *Point) error {
	var src map[string]any
	if phases, ok := findKey(cfg, "phases").([]any); ok {
		for i, ph := range phases {
			o, ok := ph.(map[string]any)
			if !ok {
				return fmt.Errorf("input_config.phases[%d]: a %s, not an object", i, jsonKind(ph))
			}
			name := strings.ToLower(stringAt(o, "name") + " " + stringAt(o, "type"))
			if excluded, _ := o["exclude_from_results"].(bool); excluded ||
				strings.Contains(name, "warmup") || strings.Contains(name, "warm_up") {
				continue
			}
			src = o
		}
	}
	if src == nil {
		if ri, ok := top["run_info"].(map[string]any); ok {
			src, _ = ri["variation_values"].(map[string]any)
		}
	}
	if src == nil {
		return nil
	}
	r := &jreader{obj: src}
	p.Concurrency = r.load("concurrency")
	p.RequestRate = r.load("request_rate")
	if p.RequestRate == nil {
		p.RequestRate = r.load("rate")
	}
	if r.err != nil {
		return fmt.Errorf("input_config.phases: %w", r.err)
	}
	return nil
}

// aiperfModel reads input_config.models.items[].name (aiperf 0.11), the first model.
func aiperfModel(cfg map[string]any) string {
	models, ok := findKey(cfg, "models").(map[string]any)
	if !ok {
		return ""
	}
	items, _ := models["items"].([]any)
	for _, it := range items {
		if o, ok := it.(map[string]any); ok {
			if n := stringAt(o, "name"); n != "" {
				return n
			}
		}
	}
	return ""
}

// aiperfErrorCount sums error_summary[].count: the requests that failed, by error.
func aiperfErrorCount(top map[string]any) (int64, bool, error) {
	es, ok := top["error_summary"].([]any)
	if !ok {
		return 0, false, nil
	}
	var n int64
	for i, e := range es {
		o, ok := e.(map[string]any)
		if !ok {
			return 0, false, fmt.Errorf("error_summary[%d]: a %s, not an object", i, jsonKind(e))
		}
		r := &jreader{obj: o}
		c := r.i("count")
		if r.err != nil {
			return 0, false, fmt.Errorf("error_summary[%d]: %w", i, r.err)
		}
		if c != nil {
			n += *c
		}
	}
	return n, true, nil
}

// aiperfDuration is the benchmark_duration metric (seconds), else end_time - start_time.
func aiperfDuration(top map[string]any) (*float64, error) {
	if m, ok := top["benchmark_duration"].(map[string]any); ok {
		r := &jreader{obj: m}
		v := r.f("avg")
		if r.err != nil {
			return nil, fmt.Errorf("benchmark_duration: %w", r.err)
		}
		if v != nil {
			scale := 1.0
			switch strings.ToLower(stringAt(m, "unit")) {
			case "", "s", "sec", "seconds":
			case "ms":
				scale = 1e-3
			case "us":
				scale = 1e-6
			case "ns":
				scale = 1e-9
			default:
				return nil, fmt.Errorf("benchmark_duration: unknown unit %q", stringAt(m, "unit"))
			}
			return fp(scale10(*v, scale)), nil
		}
	}
	st, ok1 := top["start_time"].(string)
	et, ok2 := top["end_time"].(string)
	if !ok1 || !ok2 {
		return nil, nil
	}
	t0, err0 := time.Parse(time.RFC3339Nano, normalizeDate(st))
	t1, err1 := time.Parse(time.RFC3339Nano, normalizeDate(et))
	if err0 != nil || err1 != nil || t1.Before(t0) {
		return nil, fmt.Errorf("start_time %q / end_time %q: not a valid time range", st, et)
	}
	return fp(t1.Sub(t0).Seconds()), nil
}

// findKey searches a nested object breadth-first for key and returns its first non-null value.
func findKey(o map[string]any, key string) any {
	queue := []map[string]any{o}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if v, ok := cur[key]; ok && v != nil {
			return v
		}
		for _, k := range slices.Sorted(maps.Keys(cur)) {
			if child, ok := cur[k].(map[string]any); ok {
				queue = append(queue, child)
			}
		}
	}
	return nil
}

// aiperfStats reads a metric {unit, avg, p1..p99, min, max, std}; latency metrics are converted
// to seconds from their unit, which must be present.
func aiperfStats(top map[string]any, name string, latency bool) (*Stats, error) {
	raw, present := top[name]
	if !present || raw == nil {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%q: a %s, not a metric object", name, jsonKind(raw))
	}
	scale := 1.0
	unit, _ := m["unit"].(string)
	if latency {
		switch strings.ToLower(unit) {
		case "ms":
			scale = 1e-3
		case "s", "sec", "seconds":
			scale = 1
		case "us", "µs":
			scale = 1e-6
		case "ns":
			scale = 1e-9
		case "":
			return nil, fmt.Errorf("%q: missing \"unit\" (cannot convert to seconds)", name)
		default:
			return nil, fmt.Errorf("%q: unknown time unit %q", name, unit)
		}
	}
	r := &jreader{obj: m}
	s := &Stats{Mean: scaled(r.f("avg"), scale), Std: scaled(r.f("std"), scale), Min: scaled(r.f("min"), scale), Max: scaled(r.f("max"), scale)}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if pm := reAIPerfPercentile.FindStringSubmatch(k); pm != nil {
			q, _ := strconv.ParseFloat(pm[1], 64)
			if v := r.f(k); v != nil && q > 0 && q <= 100 {
				if s.Percentiles == nil {
					s.Percentiles = Percentiles{}
				}
				s.Percentiles[percentileKey(q)] = scale10(*v, scale)
			}
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("%q: %w", name, r.err)
	}
	if v, ok := s.Percentiles["p50"]; ok {
		s.Median = fp(v)
	}
	if s.empty() {
		return nil, nil
	}
	return s, nil
}

// ---- llmperf (ray-project/llmperf *_summary.json) ----

var llmperfQuantiles = []string{"p25", "p50", "p75", "p90", "p95", "p99"}

func importLLMPerf(im *Import, v any) error {
	r := &jreader{obj: v.(map[string]any)}
	if _, ok := r.obj["num_concurrent_requests"]; !ok {
		return fmt.Errorf("missing \"num_concurrent_requests\": cannot tell the load level")
	}
	stats := func(base string) *Stats {
		s := &Stats{Mean: r.f(base + "_mean"), Std: r.f(base + "_stddev"), Min: r.f(base + "_min"), Max: r.f(base + "_max")}
		for _, q := range llmperfQuantiles {
			if v := r.f(base + "_quantiles_" + q); v != nil {
				if s.Percentiles == nil {
					s.Percentiles = Percentiles{}
				}
				s.Percentiles[q] = *v
			}
		}
		if v, ok := s.Percentiles["p50"]; ok {
			s.Median = fp(v)
		}
		if s.empty() {
			return nil
		}
		return s
	}
	p := Point{
		Concurrency:                r.load("num_concurrent_requests"),
		TTFT:                       stats("results_ttft_s"),
		TPOTInclTTFT:               stats("results_inter_token_latency_s"), // includes TTFT (§3.4)
		E2E:                        stats("results_end_to_end_latency_s"),
		OutputThroughputPerRequest: stats("results_request_output_throughput_token_per_s"),
		OutputThroughput:           r.f("results_mean_output_throughput_token_per_s"),
		Completed:                  r.i("results_num_completed_requests"),
		Failed:                     r.i("results_number_errors"),
		NumPrompts:                 r.i("results_num_requests_started"),
		Date:                       r.s("timestamp"),
	}
	if rpm := r.f("results_num_completed_requests_per_min"); rpm != nil {
		p.RequestThroughput = fp(*rpm / 60)
	}
	if r.err != nil {
		return r.err
	}
	if p.Concurrency == nil {
		return fmt.Errorf("\"num_concurrent_requests\" is null")
	}
	if p.TTFT == nil && p.E2E == nil && p.OutputThroughput == nil {
		return fmt.Errorf("none of results_ttft_s_*, results_end_to_end_latency_s_*, results_mean_output_throughput_token_per_s is present")
	}
	if p.Completed != nil && *p.Completed == 0 {
		p.AllFailed = true
	}
	p.Ref = filepathBase(im.File)
	// llmperf writes user --metadata keys at the top level; "framework" names the server.
	im.Baselines = append(im.Baselines, &Baseline{Model: r.s("model"), Framework: r.s("framework"),
		Source: Source{Tool: ToolLLMPerf, Date: p.Date}, Points: []Point{p}})
	return nil
}
