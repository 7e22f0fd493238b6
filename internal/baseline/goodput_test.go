package baseline

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/config"
)

func objectives(t *testing.T, s string) config.Objectives {
	t.Helper()
	o, err := config.ParseGoodput(s)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func hasNote(im *Import, substr string) bool {
	for _, n := range im.Notes {
		if strings.Contains(n, substr) {
			return true
		}
	}
	return false
}

// vllm_bench_serve_goodput_v0251.json is the real vllm bench serve 0.25.1 result of
// er0080/vllm-benchmarking (testdata/README.md) with request_goodput set to 7 good requests of
// its 8 over its duration: --save-result keeps no objectives, --goodput states them, and the
// attainment is 7 / (8 completed + 0 failed).
func TestImportVLLMGoodputWithStatedObjectives(t *testing.T) {
	const file = "testdata/vllm_bench_serve_goodput_v0251.json"
	im, err := ImportFile(context.Background(), file, WithGoodput(objectives(t, "ttft:200 tpot:50")))
	if err != nil {
		t.Fatal(err)
	}
	p := &im.Baselines[0].Points[0]
	eq(t, "slo_attainment", p.SLOAttainment, 7.0/8)
	if p.GoodputObjectives == nil || time.Duration(p.GoodputObjectives.TTFT) != 200*time.Millisecond || time.Duration(p.GoodputObjectives.TPOT) != 50*time.Millisecond ||
		p.GoodputObjectives.E2E != 0 || p.GoodputObjectives.ITLP99 != 0 {
		t.Fatalf("goodput_objectives = %+v, want ttft 200ms tpot 50ms", p.GoodputObjectives)
	}
	if hasNote(im, "objectives unknown") {
		t.Errorf("objectives stated, yet noted unknown: %q", im.Notes)
	}

	// Without --goodput: imported, attainment derived, noted as not comparable.
	im, err = ImportFile(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	p = &im.Baselines[0].Points[0]
	eq(t, "slo_attainment without objectives", p.SLOAttainment, 7.0/8)
	if p.GoodputObjectives != nil {
		t.Errorf("goodput_objectives = %+v, want none", p.GoodputObjectives)
	}
	if !hasNote(im, "objectives unknown") || !hasNote(im, "not compared") {
		t.Errorf("no note that the objectives are unknown: %q", im.Notes)
	}
	b := &Baseline{Points: im.Baselines[0].Points}
	if _, ok := b.GoodputObjectives(); ok {
		t.Error("a baseline whose objectives are unknown gives objectives to compare with")
	}

	// The real file without a goodput: --goodput states nothing, no note.
	im, err = ImportFile(context.Background(), "testdata/vllm_bench_serve_v0251.json", WithGoodput(objectives(t, "ttft:200")))
	if err != nil {
		t.Fatal(err)
	}
	if p := &im.Baselines[0].Points[0]; p.GoodputObjectives != nil || p.SLOAttainment != nil {
		t.Errorf("a point without goodput got objectives %+v / attainment %v", p.GoodputObjectives, p.SLOAttainment)
	}
}

// The Namespace(...) line of a vLLM benchmark log states --goodput: vllm_bench_serve_goodput_v08.log
// is the real v0.8 log of surajssd/llm-k8s (testdata/README.md) run with --goodput ttft:200
// tpot:50, which prints goodput=['ttft:200', 'tpot:50'] and a Request goodput line.
func TestImportVLLMGoodputFromNamespace(t *testing.T) {
	im, err := ImportFile(context.Background(), "testdata/vllm_bench_serve_goodput_v08.log")
	if err != nil {
		t.Fatal(err)
	}
	p := &im.Baselines[0].Points[0]
	eq(t, "request_goodput", p.RequestGoodput, 0.83)
	want := Objectives{config.Objectives{TTFT: model.Duration(200 * time.Millisecond), TPOT: model.Duration(50 * time.Millisecond)}}
	if p.GoodputObjectives == nil || *p.GoodputObjectives != want {
		t.Fatalf("goodput_objectives = %+v, want %+v", p.GoodputObjectives, want)
	}
	// v0.8 prints no failed count: no attainment is derived from a guessed one.
	if p.SLOAttainment != nil {
		t.Errorf("slo_attainment = %v without a failed count", *p.SLOAttainment)
	}
	// --goodput that contradicts the log is an error naming both.
	_, err = ImportFile(context.Background(), "testdata/vllm_bench_serve_goodput_v08.log", WithGoodput(objectives(t, "ttft:300")))
	if err == nil || !strings.Contains(err.Error(), "ttft:200 tpot:50") || !strings.Contains(err.Error(), "ttft:300") {
		t.Errorf("contradicting --goodput: err = %v", err)
	}
}

// inference_perf_stage_2_lifecycle_metrics_goodput.json is written from the writer
// (inference_perf/reportgen/base.py, testdata/README.md): 240 requests at 4 req/s, 236
// succeeded, 4 failed, 212 good. inference-perf's goodput_percentage is 212/236; the
// attainment counts the failures against it: 212/240.
func TestImportInferencePerfGoodput(t *testing.T) {
	const file = "testdata/inference_perf_stage_2_lifecycle_metrics_goodput.json"
	im, err := ImportFile(context.Background(), file, WithGoodput(objectives(t, "ttft:200 tpot:50")))
	if err != nil {
		t.Fatal(err)
	}
	if im.Format != FormatInferencePerf {
		t.Fatalf("format %s", im.Format)
	}
	b := im.Baselines[0]
	if b.Source.Tool != ToolInferencePerf {
		t.Errorf("tool %q", b.Source.Tool)
	}
	p := &b.Points[0]
	var (
		good, succ, all, dur = 212.0, 236.0, 240.0, 61.2
	)
	if k, v := p.LoadKey(); k != "request_rate" || v != 4 {
		t.Errorf("load %s %v, want request_rate 4", k, v)
	}
	eqi(t, "num_prompts", p.NumPrompts, 240)
	eqi(t, "completed", p.Completed, 236)
	eqi(t, "failed", p.Failed, 4)
	eq(t, "duration", p.DurationSeconds, dur)
	eq(t, "slo_attainment", p.SLOAttainment, good/all)
	eq(t, "request_goodput", p.RequestGoodput, good/dur)
	eq(t, "token_goodput", p.TokenGoodput, good*384/dur)
	if g := p.ToolFigures["goodput_percentage"]; g != good/succ*100 {
		t.Errorf("tool_figures.goodput_percentage = %v, want %v", g, good/succ*100)
	}
	eq(t, "ttft p99", pct(p.TTFT, "p99"), 0.3518)
	eq(t, "tpot median", median(p.TPOT), 0.04688)
	eq(t, "e2e p99", pct(p.E2E, "p99"), 7.61)
	eq(t, "itl p99", pct(p.ITL, "p99"), 0.09566)
	eq(t, "request_throughput", p.RequestThroughput, succ/dur)
	eq(t, "output_throughput", p.OutputThroughput, 128*succ/dur)
	eqi(t, "total_output_tokens", p.TotalOutputTokens, 128*236)
	if p.GoodputObjectives == nil || !p.GoodputObjectives.Equal(objectives(t, "ttft:200 tpot:50")) {
		t.Errorf("goodput_objectives = %+v", p.GoodputObjectives)
	}
	f, _, err := Build("ip", []*Import{im})
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"slo_attainment: 0.8833333333333333", "token_goodput:", "goodput_objectives:", "ttft_seconds: 0.2", "tpot_seconds: 0.05"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("written file lacks %q:\n%s", want, out)
		}
	}
	if _, err := Parse(out); err != nil {
		t.Fatalf("re-read: %v", err)
	}
}

// inference_perf_stage_0_lifecycle_metrics_kubecon.json is a real stage report of
// inference-perf's own KubeCon NA 2025 demo (testdata/README.md): no goodput, 60 requests at 1
// req/s, all successful.
func TestImportInferencePerfRealStage(t *testing.T) {
	im, err := ImportFile(context.Background(), "testdata/inference_perf_stage_0_lifecycle_metrics_kubecon.json")
	if err != nil {
		t.Fatal(err)
	}
	p := &im.Baselines[0].Points[0]
	if k, v := p.LoadKey(); k != "request_rate" || v != 1 {
		t.Errorf("load %s %v, want request_rate 1", k, v)
	}
	eqi(t, "num_prompts", p.NumPrompts, 60)
	eqi(t, "completed", p.Completed, 60)
	eqi(t, "failed", p.Failed, 0)
	eq(t, "ttft mean", mean(p.TTFT), 0.03331898592878133)
	eq(t, "ttft p99", pct(p.TTFT, "p99"), 0.04251505806925707)
	eq(t, "tpot median", median(p.TPOT), 0.0034682437246881946)
	eq(t, "e2e p99", pct(p.E2E, "p99"), 0.49334994919016023)
	eq(t, "itl p99.9", pct(p.ITL, "p99.9"), 0.008688078872859481)
	eq(t, "request_throughput", p.RequestThroughput, 0.996850670841712)
	eq(t, "output_throughput", p.OutputThroughput, 62.15363932698074)
	eq(t, "input_throughput", p.InputThroughput, 200.05131546008423)
	if p.hasGoodput() || p.DurationSeconds != nil {
		t.Errorf("goodput or duration from a report without them: %+v", p)
	}
}

func TestImportInferencePerfRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ data, want string }{
		"summary over stages": {`{"load_summary": {"count": 3}, "successes": {"count": 3, "latency": {}}, "failures": {"count": 0}}`, "stage_N_lifecycle_metrics.json"},
		"prometheus report":   {`{"benchmark_time_seconds": 0.0, "load_summary": {}, "successes": {"count": 3, "time_to_first_token": {"mean": 0.1}}, "failures": {}}`, "prometheus report"},
		"good above total": {`{"load_summary": {"count": 3, "requested_rate": 1}, "successes": {"count": 2, "latency": {"time_to_first_token": {"mean": 0.1}},
			"goodput_metrics": {"good_requests": 4}}, "failures": {"count": 1}}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			im, err := ImportBytes("stage.json", []byte(tc.data))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if a := im.Baselines[0].Points[0].SLOAttainment; a != nil {
					t.Errorf("slo_attainment %v from 4 good of 3", *a)
				}
				if !hasNote(im, "good_requests 4") {
					t.Errorf("no note: %q", im.Notes)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// aiperf keeps --goodput in input_config.input.goodput (aiperf's InputConfig.goodput,
// aiperf/common/config/input/input_config.py) and counts the good requests in
// good_request_count.
func TestImportAIPerfGoodput(t *testing.T) {
	doc := `{"schema_version": "1.3", "aiperf_version": "0.3.0",
 "time_to_first_token": {"unit": "ms", "avg": 55.5, "p99": 120.25},
 "request_latency": {"unit": "ms", "avg": 2000.0, "p99": 2600.0},
 "request_throughput": {"unit": "requests/sec", "avg": 16.0},
 "request_count": {"unit": "requests", "avg": 497},
 "error_request_count": {"unit": "requests", "avg": 3},
 "good_request_count": {"unit": "requests", "avg": 450},
 "goodput": {"unit": "requests/sec", "avg": 14.4},
 "input_config": {"input": {"goodput": %s}, "loadgen": {"concurrency": 32}}}`
	im, err := ImportBytes("profile_export_aiperf.json", []byte(strings.Replace(doc, "%s", `{"time_to_first_token": 200, "inter_token_latency": 50}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	p := &im.Baselines[0].Points[0]
	var good, all = 450.0, 500.0
	eq(t, "slo_attainment", p.SLOAttainment, good/all)
	if p.GoodputObjectives == nil || !p.GoodputObjectives.Equal(objectives(t, "ttft:200 tpot:50")) {
		t.Errorf("goodput_objectives = %+v, want ttft 200ms tpot 50ms", p.GoodputObjectives)
	}
	// A constraint the prober has no objective for: objectives unknown, noted.
	im, err = ImportBytes("profile_export_aiperf.json", []byte(strings.Replace(doc, "%s", `{"time_to_first_token": 200, "output_token_throughput_per_user": 600}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if p := &im.Baselines[0].Points[0]; p.GoodputObjectives != nil {
		t.Errorf("goodput_objectives %+v from a constraint the prober cannot judge", p.GoodputObjectives)
	}
	if !hasNote(im, "output_token_throughput_per_user") || !hasNote(im, "objectives unknown") {
		t.Errorf("notes %q", im.Notes)
	}
}

func TestPointGoodputValidation(t *testing.T) {
	base := "version: 1\nbaselines:\n- name: b\n  source: {tool: t, format: f, files: [x], definitions: {}}\n  saturation_output_throughput: 0\n  points:\n  - concurrency: 1\n    completed: 1\n"
	for name, tc := range map[string]struct{ extra, want string }{
		"attainment above 1":  {"    slo_attainment: 1.5\n", "slo_attainment 1.5 is not a ratio between 0 and 1"},
		"attainment negative": {"    slo_attainment: -0.1\n", "slo_attainment -0.1 is not a ratio"},
		"objective zero":      {"    goodput_objectives: {ttft_seconds: 0}\n", "ttft_seconds 0 is not a positive number of seconds"},
		"objective negative":  {"    goodput_objectives: {e2e_seconds: -2}\n", "e2e_seconds -2 is not a positive number of seconds"},
		"no objective":        {"    goodput_objectives: {}\n", "goodput_objectives: no objective set"},
		"unknown key":         {"    goodput_objectives: {e2el_seconds: 2}\n", "e2el_seconds"},
		"token goodput":       {"    token_goodput: -3\n", "token_goodput -3 is not a finite non-negative number"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(base + tc.extra))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	f, err := Parse([]byte(base + "    slo_attainment: 0.9\n    request_goodput: 3\n    goodput_objectives: {ttft_seconds: 0.2, itl_p99_seconds: 0.05}\n"))
	if err != nil {
		t.Fatal(err)
	}
	o, ok := f.Baselines[0].GoodputObjectives()
	if !ok || o != objectives(t, "ttft:200 itl_p99:50") {
		t.Fatalf("GoodputObjectives = %+v %v", o, ok)
	}
}

// The curve interpolates the attainment like the other expected values, and only when every
// point with one shares known objectives.
func TestExpectedAttainment(t *testing.T) {
	o := objectives(t, "ttft:200 tpot:50")
	pt := func(c float64, a float64, obj *config.Objectives) Point {
		l := Load(c)
		p := Point{Concurrency: &l, SLOAttainment: &a, TTFT: &Stats{Mean: fp(0.1)}}
		if obj != nil {
			p.GoodputObjectives = &Objectives{*obj}
		}
		return p
	}
	b := &Baseline{Points: []Point{pt(1, 1, &o), pt(5, 0.5, &o)}}
	e, ok := b.Expected(3)
	if !ok || e.SLOAttainment != 0.75 {
		t.Fatalf("Expected(3).SLOAttainment = %v (%v), want 0.75", e.SLOAttainment, ok)
	}
	if got, ok := b.Curve().GoodputObjectives(); !ok || got != o {
		t.Errorf("curve objectives %+v %v", got, ok)
	}
	other := objectives(t, "ttft:500")
	for name, pts := range map[string][]Point{
		"objectives differ":    {pt(1, 1, &o), pt(5, 0.5, &other)},
		"objectives unknown":   {pt(1, 1, &o), pt(5, 0.5, nil)},
		"no objectives at all": {pt(1, 1, nil), pt(5, 0.5, nil)},
	} {
		b := &Baseline{Points: pts}
		if e, _ := b.Expected(3); !math.IsNaN(e.SLOAttainment) {
			t.Errorf("%s: SLOAttainment %v, want none", name, e.SLOAttainment)
		}
		if _, ok := b.Curve().GoodputObjectives(); ok {
			t.Errorf("%s: the curve gives objectives", name)
		}
	}
}

// genai-perf keeps --goodput in its input_config as the dict its parser
// builds (genai_perf/parser.py _parse_goodput: metric name -> milliseconds).
func TestImportGenAIPerfGoodputObjectives(t *testing.T) {
	im, err := ImportBytes("profile_export_genai_perf.json", []byte(`{
 "time_to_first_token": {"unit": "ms", "avg": 55.5, "p99": 120.25},
 "request_throughput": {"unit": "requests/sec", "avg": 16.0},
 "request_goodput": {"unit": "requests/sec", "avg": 14.0},
 "input_config": {"model": ["m"], "concurrency": 16, "goodput": {"time_to_first_token": 100, "request_latency": 2000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if im.Format != FormatGenAIPerf {
		t.Fatalf("format %s", im.Format)
	}
	p := &im.Baselines[0].Points[0]
	if p.GoodputObjectives == nil || !p.GoodputObjectives.Equal(objectives(t, "ttft:100 e2el:2000")) {
		t.Errorf("goodput_objectives = %+v, want ttft 100ms e2e 2s", p.GoodputObjectives)
	}
	if p.SLOAttainment != nil {
		t.Errorf("slo_attainment %v without counts", *p.SLOAttainment)
	}
}
