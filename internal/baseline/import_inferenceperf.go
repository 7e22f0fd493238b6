package baseline

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// inference-perf (kubernetes-sigs/inference-perf) writes one lifecycle report per stage
// (stage_N_lifecycle_metrics.json) and one over every stage (summary_lifecycle_metrics.json),
// both a ResponsesSummary of inference_perf/reportgen/base.py: benchmark_time_seconds,
// load_summary {count, requested_rate, achieved_rate, concurrency}, successes {count, latency
// {request_latency, normalized_time_per_output_token, time_per_output_token,
// time_to_first_token, inter_token_latency}, throughput {...}, goodput_metrics}, failures
// {count, ...}. Latencies are seconds; distributions {mean, min, max, median, p<q>}.

// isInferencePerfReport recognises a lifecycle report (and, to refuse it with a clear message,
// the server-side prometheus report that shares its layout).
func isInferencePerfReport(o map[string]any) bool {
	_, ls := o["load_summary"].(map[string]any)
	_, s := o["successes"].(map[string]any)
	_, f := o["failures"].(map[string]any)
	return ls && s && f
}

func importInferencePerf(im *Import, v any) error {
	top := v.(map[string]any)
	load := top["load_summary"].(map[string]any)
	succ := top["successes"].(map[string]any)
	fails := top["failures"].(map[string]any)
	lat, ok := succ["latency"].(map[string]any)
	if !ok {
		if succ["time_to_first_token"] != nil || len(load) == 0 {
			return errors.New("an inference-perf prometheus report (the model server's own metrics, stage_N_prometheus_metrics.json), not a client lifecycle report: import stage_N_lifecycle_metrics.json")
		}
		return errors.New("successes has no \"latency\": not an inference-perf lifecycle report")
	}
	lr := &jreader{obj: load}
	sr := &jreader{obj: succ}
	fr := &jreader{obj: fails}
	tr := &jreader{obj: top}
	p := Point{
		Concurrency:     lr.load("concurrency"),
		NumPrompts:      lr.i("count"),
		Completed:       sr.i("count"),
		Failed:          fr.i("count"),
		DurationSeconds: tr.f("benchmark_time_seconds"),
	}
	if p.Concurrency == nil {
		p.RequestRate = lr.load("requested_rate")
	}
	if p.DurationSeconds != nil && *p.DurationSeconds == 0 {
		p.DurationSeconds = nil // the prometheus report's placeholder
	}
	if thr, ok := succ["throughput"].(map[string]any); ok {
		r := &jreader{obj: thr}
		p.RequestThroughput = r.f("requests_per_sec")
		p.InputThroughput = r.f("input_tokens_per_sec")
		p.OutputThroughput = r.f("output_tokens_per_sec")
		p.TotalTokenThroughput = r.f("total_tokens_per_sec")
		if r.err != nil {
			return fmt.Errorf("successes.throughput: %w", r.err)
		}
	}
	total := func(key string) (*int64, error) {
		m, ok := succ[key].(map[string]any)
		if !ok {
			return nil, nil
		}
		r := &jreader{obj: m}
		t := r.f("total")
		if r.err != nil {
			return nil, fmt.Errorf("successes.%s: %w", key, r.err)
		}
		if t == nil {
			return nil, nil
		}
		return ip(int64(*t)), nil
	}
	var err error
	if p.TotalInputTokens, err = total("prompt_tokens"); err != nil {
		return err
	}
	if p.TotalOutputTokens, err = total("output_tokens"); err != nil {
		return err
	}
	for _, s := range []struct {
		key string
		dst **Stats
	}{
		{"time_to_first_token", &p.TTFT},
		{"time_per_output_token", &p.TPOT},
		{"inter_token_latency", &p.ITL},
		{"request_latency", &p.E2E},
		{"normalized_time_per_output_token", &p.TPOTInclTTFT},
	} {
		if *s.dst, err = inferencePerfStats(lat, s.key); err != nil {
			return fmt.Errorf("successes.latency.%w", err)
		}
	}
	if g, ok := succ["goodput_metrics"].(map[string]any); ok {
		if err := inferencePerfGoodput(im, &p, g); err != nil {
			return fmt.Errorf("successes.goodput_metrics: %w", err)
		}
	}
	for _, r := range []*jreader{lr, sr, fr, tr} {
		if r.err != nil {
			return r.err
		}
	}
	if p.Concurrency == nil && p.RequestRate == nil {
		return errors.New("load_summary has neither \"requested_rate\" nor \"concurrency\": inference-perf writes them in the per-stage reports only (stage_N_lifecycle_metrics.json), a summary over every stage has no single load level: import the stage_N files")
	}
	if p.Completed != nil && *p.Completed == 0 {
		p.AllFailed = true
	}
	p.Ref = filepathBase(im.File)
	im.Baselines = append(im.Baselines, &Baseline{
		Source: Source{Tool: ToolInferencePerf},
		Points: []Point{p},
	})
	return nil
}

// inferencePerfStats reads one distribution {mean, min, max, median, p<q>} (seconds); null when
// no request had the metric.
func inferencePerfStats(lat map[string]any, key string) (*Stats, error) {
	raw := lat[key]
	if raw == nil {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: a %s, not a distribution", key, jsonKind(raw))
	}
	r := &jreader{obj: m}
	s := &Stats{Mean: r.f("mean"), Median: r.f("median"), Min: r.f("min"), Max: r.f("max")}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !strings.HasPrefix(k, "p") {
			continue
		}
		q, err := strconv.ParseFloat(k[1:], 64)
		if err != nil || !(q > 0 && q <= 100) {
			continue
		}
		if v := r.f(k); v != nil {
			if s.Percentiles == nil {
				s.Percentiles = Percentiles{}
			}
			s.Percentiles[percentileKey(q)] = *v
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("%s: %w", key, r.err)
	}
	if s.empty() {
		return nil, nil
	}
	return s, nil
}

// inferencePerfGoodput reads goodput_metrics {goodput_percentage, request_goodput,
// token_goodput, good_requests, total_requests, <constraint>_attainment_percentage}.
// inference-perf's goodput_percentage is good / successful requests (its total_requests counts
// the successes only); slo_attainment counts the failed requests against it:
// good_requests / (successes.count + failures.count). The tool's percentages are kept in
// tool_figures under its names.
func inferencePerfGoodput(im *Import, p *Point, g map[string]any) error {
	r := &jreader{obj: g}
	p.RequestGoodput = r.f("request_goodput")
	if p.RequestGoodput == nil {
		p.RequestGoodput = r.f("request_goodput_rate") // the name analysis/analyze.py also accepts
	}
	p.TokenGoodput = r.f("token_goodput")
	good := r.f("good_requests")
	for _, k := range slices.Sorted(maps.Keys(g)) {
		if k != "goodput_percentage" && !strings.HasSuffix(k, "_attainment_percentage") {
			continue
		}
		if v := r.f(k); v != nil {
			if p.ToolFigures == nil {
				p.ToolFigures = map[string]float64{}
			}
			p.ToolFigures[k] = *v
		}
	}
	if r.err != nil {
		return r.err
	}
	if good != nil {
		if p.SLOAttainment = goodCountAttainment(*good, p.Completed, p.Failed); p.SLOAttainment == nil {
			im.Notes = append(im.Notes, fmt.Sprintf("%s: good_requests %g does not fit successes.count + failures.count: no slo_attainment", filepathBase(im.File), *good))
		}
	}
	return nil
}
