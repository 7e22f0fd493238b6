package baseline

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func TestGolden(t *testing.T) {
	cases := []struct {
		golden string
		name   string
		inputs []string
	}{
		{"mi300.yaml", "mi300", []string{mi300ServingRuns}},
		{"append_allfailed.yaml", "llama8b-h100", []string{"testdata/vllm_serve_append.json", "testdata/vllm_serve_allfailed.json"}},
		{"guidellm.yaml", "qwen3", []string{"testdata/guidellm_v05.json"}},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			f, _, _ := importAndBuild(t, c.name, c.inputs...)
			got, err := f.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", c.golden)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (go test -update rewrites it):\n%s", path, got)
			}
		})
	}
}

const minimalYAML = `version: 1
baselines:
- name: sim
  model: m
  source:
    tool: vllm bench serve
    format: vllm-serve-json
    files: [a.json]
    definitions: {}
  saturation_output_throughput: 12345
  points:
  - concurrency: 4
    output_throughput: 400
    ttft_seconds: {mean: 0.2, percentiles: {p99: 0.4}}
    tpot_seconds: {mean: 0.02, percentiles: {p99: 0.03}}
    e2e_seconds: {mean: 2.0}
  - concurrency: 1
    output_throughput: 100
    ttft_seconds: {mean: 0.1, percentiles: {p99: 0.2}}
    tpot_seconds: {mean: 0.01, percentiles: {p99: 0.015}}
    itl_seconds: {mean: 0.01}
    e2e_seconds: {mean: 1.0}
  - request_rate: inf
    concurrency: 16
    output_throughput: 900
    ttft_seconds: {mean: 1.0, percentiles: {p99: 3.0}}
    tpot_seconds: {mean: 0.05, percentiles: {p99: 0.08}}
  - concurrency: 8
    all_failed: true
    completed: 0
    output_throughput: 0
    ttft_seconds: {mean: 0}
`

func TestParseAndDerive(t *testing.T) {
	f, err := Parse([]byte(minimalYAML))
	if err != nil {
		t.Fatal(err)
	}
	b, ok := f.Lookup("sim")
	if !ok {
		t.Fatal("no baseline sim")
	}
	// The derived value is recomputed from the points, not trusted from the file.
	if b.SaturationOutput != 900 || b.SaturationOutputThroughput() != 900 {
		t.Errorf("saturation %v / %v, want 900", b.SaturationOutput, b.SaturationOutputThroughput())
	}
	if !math.IsInf(float64(*b.Points[2].RequestRate), 1) {
		t.Errorf("request_rate inf read as %v", *b.Points[2].RequestRate)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "request_rate: inf\n") {
		t.Errorf("inf not written as \"inf\":\n%s", out)
	}
	g, err := Parse(out)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	out2, _ := g.Marshal()
	if !bytes.Equal(out, out2) {
		t.Errorf("round trip not stable:\n%s\n---\n%s", out, out2)
	}
}

func TestParseErrors(t *testing.T) {
	point := "  points:\n  - concurrency: 1\n    output_throughput: 1\n"
	head := "version: 1\nbaselines:\n- name: a\n  source: {tool: t, format: f, files: [x], definitions: {}}\n"
	cases := []struct{ name, yaml, want string }{
		{"empty", "", "empty baseline file"},
		{"unknown field", head + point + "    ttft_ms: {mean: 1}\n", "decoding baseline YAML: yaml: unmarshal errors:\n  line 8: field ttft_ms not found"},
		{"version", strings.Replace(head, "version: 1", "version: 3", 1) + point, "unsupported baseline file version 3 (this build reads version 1)"},
		{"no baselines", "version: 1\n", "no baselines in file"},
		{"no name", strings.Replace(head, "name: a", "name: \"\"", 1) + point, "baselines[0]: missing name"},
		{"duplicate name", head + point + strings.TrimPrefix(head, "version: 1\nbaselines:\n") + point, "baselines[1]: duplicate name \"a\""},
		{"no points", head, "baseline \"a\": no points"},
		{"no tool", strings.Replace(head, "tool: t", "tool: \"\"", 1) + point, "baseline \"a\": source: missing tool"},
		{"no load", head + "  points:\n  - output_throughput: 1\n", "baseline \"a\": points[0]: neither concurrency nor request_rate is set"},
		{"zero load", head + "  points:\n  - concurrency: 0\n", "baseline \"a\": points[0]: concurrency 0 is not positive"},
		{"bad load", head + "  points:\n  - request_rate: fast\n", "decoding baseline YAML: load level \"fast\" is neither a number nor \"inf\""},
		{"same load", head + point + "  - concurrency: 1\n", "baseline \"a\": points[1]: same load level as points[0] (concurrency 1)"},
		{"negative", head + "  points:\n  - concurrency: 1\n    output_throughput: -3\n", "baseline \"a\": points[0]: output_throughput -3 is not a finite non-negative number"},
		{"bad percentile", head + "  points:\n  - concurrency: 1\n    ttft_seconds: {percentiles: {q99: 1}}\n", "baseline \"a\": points[0]: ttft_seconds: percentile key \"q99\" does not start with \"p\""},
		{"percentile range", head + "  points:\n  - concurrency: 1\n    ttft_seconds: {percentiles: {p101: 1}}\n", "baseline \"a\": points[0]: ttft_seconds: percentile key \"p101\": want p<q> with 0 < q <= 100"},
		{"empty stats", head + "  points:\n  - concurrency: 1\n    ttft_seconds: {}\n", "baseline \"a\": points[0]: ttft_seconds: no statistics"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil {
				t.Fatalf("no error for\n%s", c.yaml)
			}
			if err.Error() != c.want {
				t.Errorf("error\n got: %s\nwant: %s", err, c.want)
			}
		})
	}
}

func TestExpectedInterpolation(t *testing.T) {
	f, err := Parse([]byte(minimalYAML))
	if err != nil {
		t.Fatal(err)
	}
	b := f.Baselines[0]
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	// Between 1 and 4: linear.
	e, ok := b.Expected(2.5)
	if !ok {
		t.Fatal("not ok")
	}
	near("ttft mean @2.5", e.TTFTMean, 0.15)
	near("ttft p99 @2.5", e.TTFTP99, 0.3)
	near("tpot mean @2.5", e.TPOTMean, 0.015)
	near("output tok/s @2.5", e.OutputThroughput, 250)
	near("e2e mean @2.5 (points 1 and 4 only)", e.E2EMean, 1.5)
	// ITL only at concurrency 1: constant everywhere.
	near("itl @2.5", e.ITLMean, 0.01)
	if !math.IsNaN(e.ITLP99) || !math.IsNaN(e.E2EP99) {
		t.Errorf("absent metrics must be NaN: itl p99 %v e2e p99 %v", e.ITLP99, e.E2EP99)
	}
	// Between 4 and 16, skipping the all-failed point at 8.
	e, _ = b.Expected(10)
	near("output tok/s @10", e.OutputThroughput, 400+(900-400)*6.0/12)
	near("tpot p99 @10", e.TPOTP99, 0.03+(0.08-0.03)*6.0/12)
	// E2E is known at 1 and 4 only: clamped above 4.
	near("e2e mean @10 (clamped)", e.E2EMean, 2.0)
	// Clamping at both ends.
	e, _ = b.Expected(0.25)
	near("ttft @0.25", e.TTFTMean, 0.1)
	e, _ = b.Expected(1000)
	near("ttft @1000", e.TTFTMean, 1.0)
	near("Mean(tpot) @1000", e.Mean(MetricTPOT), 0.05)
	// Exactly on a point.
	e, _ = b.Expected(4)
	near("output tok/s @4", e.OutputThroughput, 400)
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, ok := b.Expected(bad); ok {
			t.Errorf("Expected(%v) ok", bad)
		}
	}
}

func TestExpectedLittlesLaw(t *testing.T) {
	// vLLM's CI serving benchmarks are keyed by request rate and has no E2E: concurrency = req/s x (TTFT + TPOT x (tokens/req - 1)).
	f, _, _ := importAndBuild(t, "ci", vllmCIServingBenchmarks)
	b := f.Baselines[0]
	p := pointAt(t, b, "request_rate", 1)
	c, ok := p.effectiveConcurrency()
	n := 197.55014469555786 / 0.9247087073539347
	want := 0.9247087073539347 * (0.11008901771998353 + 0.044036275993568225*(n-1))
	if !ok || math.Abs(c-want) > 1e-9 {
		t.Fatalf("qps 1 concurrency = %v, want %v", c, want)
	}
	e, ok := b.Expected(want)
	if !ok || math.Abs(e.OutputThroughput-197.55014469555786) > 1e-9 {
		t.Errorf("Expected at the qps-1 point's concurrency: %v, %v", e.OutputThroughput, ok)
	}
	// A point with a measured E2E uses it directly.
	q := Point{RequestRate: lp(2), RequestThroughput: fp(1.9), E2E: &Stats{Mean: fp(3)}}
	if c, ok := q.effectiveConcurrency(); !ok || math.Abs(c-5.7) > 1e-12 {
		t.Errorf("Little's law with E2E: %v %v", c, ok)
	}
	// Without throughput or latency it cannot be placed.
	if _, ok := (&Point{RequestRate: lp(2), OutputThroughput: fp(10)}).effectiveConcurrency(); ok {
		t.Error("placed a point without request throughput")
	}
	// The Lambda A100/H100 report (rate inf, no E2E, no TTFT): no expectation at all.
	g, _, _ := importAndBuild(t, "l", lambdaA100H100Report)
	if _, ok := g.Baselines[0].Expected(10); ok {
		t.Error("the Lambda A100/H100 report's baseline cannot be placed on the concurrency axis")
	}
}

func TestRegressionRatio(t *testing.T) {
	cases := []struct {
		m              Metric
		live, expected float64
		want           float64
	}{
		{MetricTPOT, 0.013, 0.010, 1.3},
		{MetricTTFT, 0.05, 0.1, 0.5},
		{MetricE2E, 2, 2, 1},
		{MetricITL, 0.02, 0.01, 2},
		{MetricOutputThroughput, 800, 1000, 1.25}, // slower is worse: > 1
		{MetricOutputThroughput, 1000, 800, 0.8},
	}
	for _, c := range cases {
		if got := RegressionRatio(c.m, c.live, c.expected); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("RegressionRatio(%s, %v, %v) = %v, want %v", c.m, c.live, c.expected, got, c.want)
		}
	}
	for _, c := range [][2]float64{{0, 1}, {1, 0}, {math.NaN(), 1}, {1, math.Inf(1)}, {-1, 1}} {
		if got := RegressionRatio(MetricOutputThroughput, c[0], c[1]); !math.IsNaN(got) {
			t.Errorf("RegressionRatio(%v, %v) = %v, want NaN", c[0], c[1], got)
		}
	}
}

func TestBuildMergesAcrossFiles(t *testing.T) {
	// One JSON per load level (what bench writes) merges into one baseline.
	dir := t.TempDir()
	lines, err := os.ReadFile("testdata/vllm_serve_append.json")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		p := filepath.Join(dir, "level"+string(rune('a'+i))+".json")
		if err := os.WriteFile(p, []byte(l), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	f, _, notes := importAndBuild(t, "sim", paths...)
	if len(f.Baselines) != 1 || len(f.Baselines[0].Points) != 3 || len(notes) != 0 {
		t.Fatalf("%d baselines, notes %q", len(f.Baselines), notes)
	}
	b := f.Baselines[0]
	if strings.Join(b.Source.Files, ",") != "levela.json,levelb.json,levelc.json" || b.Name != "sim" {
		t.Errorf("files %q name %q", b.Source.Files, b.Name)
	}
	// Importing the same file twice keeps each point once.
	f, _, notes = importAndBuild(t, "sim", paths[0], paths[0])
	if len(f.Baselines[0].Points) != 1 || len(notes) != 1 {
		t.Errorf("%d points, notes %q", len(f.Baselines[0].Points), notes)
	}
	// A different result at the same load level becomes a second baseline, not a silent overwrite.
	f, _, _ = importAndBuild(t, "sim", "testdata/sweep_summary.json")
	if len(f.Baselines) != 2 {
		t.Errorf("%d baselines", len(f.Baselines))
	}
	if _, _, err := Build("x", nil); err == nil || err.Error() != "no inputs" {
		t.Errorf("Build(nil): %v", err)
	}
}

// TestSpecDecodeAcceptedPerDraft: the median of the usable runs'
// acceptance length minus one; none without speculative decoding.
func TestSpecDecodeAcceptedPerDraft(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	b := &Baseline{Points: []Point{
		{SpecDecodeAcceptanceLength: f(2.5)},
		{SpecDecodeAcceptanceLength: f(3.0)},
		{SpecDecodeAcceptanceLength: f(9), Excluded: "success ratio"},
		{SpecDecodeAcceptanceLength: f(2.0)},
		{},
	}}
	if got, ok := b.SpecDecodeAcceptedPerDraft(); !ok || got != 1.5 {
		t.Errorf("accepted per draft = %g, %v; want 1.5 (median of 1.5, 2, 1)", got, ok)
	}
	if _, ok := (&Baseline{Points: []Point{{}}}).SpecDecodeAcceptedPerDraft(); ok {
		t.Error("a baseline without speculative decoding gave a value")
	}
}
