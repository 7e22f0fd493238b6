package baseline

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The four public benchmark reports the importer tests read; testdata/reports/README.md names
// each one's public source.
const (
	multiGPUPresetsReport   = "testdata/reports/multi-gpu-presets-report.md"
	lambdaA100H100Report    = "testdata/reports/lambda-a100-h100-report.md"
	vllmCIServingBenchmarks = "testdata/reports/vllm-ci-serving-benchmarks.md"
	mi300ServingRuns        = "testdata/reports/mi300-benchmark-serving-runs.md"
)

func importAndBuild(t *testing.T, name string, paths ...string) (*File, []*Import, []string) {
	t.Helper()
	var ims []*Import
	for _, p := range paths {
		im, err := ImportFile(context.Background(), p)
		if err != nil {
			t.Fatalf("import %s: %v", p, err)
		}
		ims = append(ims, im)
	}
	f, notes, err := Build(name, ims)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	// Every built file must survive its own strict reader.
	data, err := f.Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if _, err := Parse(data); err != nil {
		t.Fatalf("re-reading the written file: %v\n%s", err, data)
	}
	return f, ims, notes
}

func find(t *testing.T, f *File, pred func(*Baseline) bool) *Baseline {
	t.Helper()
	var found []*Baseline
	for _, b := range f.Baselines {
		if pred(b) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d baselines match, want 1", len(found))
	}
	return found[0]
}

func pointAt(t *testing.T, b *Baseline, kind string, v float64) *Point {
	t.Helper()
	for i := range b.Points {
		if k, x := b.Points[i].LoadKey(); k == kind && x == v {
			return &b.Points[i]
		}
	}
	t.Fatalf("baseline %q has no point at %s %v", b.Name, kind, v)
	return nil
}

func eq(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: missing, want %v", what, want)
		return
	}
	if *got != want {
		t.Errorf("%s = %v, want %v", what, *got, want)
	}
}

func eqi(t *testing.T, what string, got *int64, want int64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: missing, want %v", what, want)
		return
	}
	if *got != want {
		t.Errorf("%s = %v, want %v", what, *got, want)
	}
}

func pct(s *Stats, key string) *float64 {
	if s == nil {
		return nil
	}
	v, ok := s.Percentiles[key]
	if !ok {
		return nil
	}
	return &v
}

func mean(s *Stats) *float64 {
	if s == nil {
		return nil
	}
	return s.Mean
}

func median(s *Stats) *float64 {
	if s == nil {
		return nil
	}
	return s.Median
}

func TestImportMultiGPUPresetsReport(t *testing.T) {
	f, ims, notes := importAndBuild(t, "presets", multiGPUPresetsReport)
	if ims[0].Format != FormatPresetHTMLTables {
		t.Fatalf("format %s", ims[0].Format)
	}
	// 17 main tables (76 preset rows) + 6 comparison rows x 2 layouts = 88 points; section 5
	// repeats 4.4.4's H100X2 row at concurrency 10, kept once.
	if got := ims[0].NumPoints(); got != 88 {
		t.Errorf("imported %d points, want 88", got)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "duplicates") {
		t.Errorf("notes = %q, want one duplicate note", notes)
	}

	// 4.1.1 Qwen-1.5B, 2048 ctx: H100X1 45.74 | 649.78 | 6.95 | 71.64 | 5.10 | 0
	b := find(t, f, func(b *Baseline) bool {
		return b.Preset == "H100X1" && b.Model == "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B" && b.MaxModelLen == 2048
	})
	if b.Hardware != "1x NVIDIA H100 (PCIe 80GB)" || b.Parallelism == nil || b.Parallelism.TP != 1 {
		t.Errorf("hardware %q parallelism %+v", b.Hardware, b.Parallelism)
	}
	p := pointAt(t, b, "concurrency", 10)
	eq(t, "prompt TPS", p.InputThroughput, 45.74)
	eq(t, "gen TPS", p.OutputThroughput, 649.78)
	eq(t, "avg latency", mean(p.E2E), 6.95)
	eq(t, "request generation TPS", mean(p.OutputThroughputPerRequest), 71.64)
	eq(t, "request prompt TPS", mean(p.InputThroughputPerRequest), 5.10)
	eqi(t, "failed", p.Failed, 0)
	eqi(t, "completed", p.Completed, 100)

	// mi210x2, same table: 9.35 | 125.16 | 8.84 | 55.09 | 4.13 | 10 errors.
	b = find(t, f, func(b *Baseline) bool {
		return b.Preset == "mi210x2" && b.Model == "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B" && b.MaxModelLen == 2048
	})
	p = pointAt(t, b, "concurrency", 10)
	eq(t, "gen TPS", p.OutputThroughput, 125.16)
	eqi(t, "failed", p.Failed, 10)
	eqi(t, "completed", p.Completed, 90)
	if b.Hardware != "2x AMD MI210" || b.Parallelism.TP != 2 {
		t.Errorf("mi210x2: hardware %q tp %d", b.Hardware, b.Parallelism.TP)
	}

	// 4.3.3 Llama-8B 64k: H100X1 8.35 | 367.05 | 19.59 | 39.50 | 2.53 | 65; "64k" is 64000 (chart names).
	b = find(t, f, func(b *Baseline) bool {
		return b.Preset == "H100X1" && b.Model == "meta-llama/Llama-3.1-8B-Instruct" && b.MaxModelLen == 64000
	})
	p = pointAt(t, b, "concurrency", 10)
	eq(t, "gen TPS", p.OutputThroughput, 367.05)
	eq(t, "avg latency", mean(p.E2E), 19.59)
	eqi(t, "failed", p.Failed, 65)

	// Section 5 (concurrency column, model and context from the chart) joins 4.4.4: H100X2 Qwen-32B 128k.
	b = find(t, f, func(b *Baseline) bool {
		return b.Preset == "H100X2" && b.Model == "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B" && b.MaxModelLen == 128000
	})
	if len(b.Points) != 2 {
		t.Fatalf("H100X2 Qwen-32B 128k: %d points, want 2 (concurrency 1 and 10)", len(b.Points))
	}
	p = pointAt(t, b, "concurrency", 1)
	eq(t, "c=1 gen TPS", p.OutputThroughput, 29.36)
	eq(t, "c=1 avg latency", mean(p.E2E), 10.2027)
	p = pointAt(t, b, "concurrency", 10)
	eq(t, "c=10 gen TPS", p.OutputThroughput, 168.05)
	eqi(t, "c=10 completed (from 4.4.4's heading)", p.Completed, 99)
	if got := b.SaturationOutputThroughput(); got != 168.05 {
		t.Errorf("saturation = %v, want 168.05", got)
	}

	// Pipeline vs tensor table: H100X2 pipeline 36.14/449.28 (pp 2), tensor 40.98/500.43 (tp 2).
	b = find(t, f, func(b *Baseline) bool {
		return b.Preset == "H100X2" && b.series == "pipeline-vs-tensor" && b.Parallelism.PP == 2
	})
	p = pointAt(t, b, "concurrency", 10)
	eq(t, "pipeline prompt TPS", p.InputThroughput, 36.14)
	eq(t, "pipeline gen TPS", p.OutputThroughput, 449.28)
	if b.Model != "meta-llama/Llama-3.2-3B-Instruct" || b.MaxModelLen != 2048 {
		t.Errorf("comparison table model %q ctx %d", b.Model, b.MaxModelLen)
	}
	b = find(t, f, func(b *Baseline) bool {
		return b.Preset == "H100X2" && b.series == "pipeline-vs-tensor" && b.Parallelism.TP == 2
	})
	eq(t, "tensor gen TPS", pointAt(t, b, "concurrency", 10).OutputThroughput, 500.43)
	if b.Source.Tool != ToolPresetScript || b.Source.Definitions["output_throughput"] == "" {
		t.Errorf("source %+v", b.Source)
	}
}

func TestImportLambdaA100H100Report(t *testing.T) {
	f, ims, _ := importAndBuild(t, "lambda", lambdaA100H100Report)
	if ims[0].Format != FormatThroughputLatencyTable {
		t.Fatalf("format %s", ims[0].Format)
	}
	if got := ims[0].NumPoints(); got != 48 {
		t.Errorf("%d points, want 48 (64 cells, 16 N/A)", got)
	}
	wantNote := "table at line 76: 16 N/A cells (model not served on that hardware); no points"
	if !containsString(ims[0].Notes, wantNote) {
		t.Errorf("notes %q lack %q", ims[0].Notes, wantNote)
	}
	for _, c := range []struct {
		hw, model  string
		tput, itlS float64
	}{
		{"1xA100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", 1517.54, 0.04285},
		{"8xH100-80GB-SXM", "Hermes-3-Llama-3.1-405B-FP8", 1230.74, 0.07354},
		{"4xA100-80GB-SXM", "Mistral-Nemo-Instruct-2407", 1919.13, 0.0447},
		{"2xH100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", 1727.69, 0.04933},
	} {
		b := find(t, f, func(b *Baseline) bool { return b.Hardware == c.hw && b.Model == c.model })
		p := pointAt(t, b, "request_rate", math.Inf(1))
		eq(t, c.hw+" "+c.model+" throughput", p.OutputThroughput, c.tput)
		eq(t, c.hw+" "+c.model+" ITL", mean(p.ITL), c.itlS)
		eqi(t, "num_prompts", p.NumPrompts, 320)
	}
}

func TestImportVLLMCIServingBenchmarks(t *testing.T) {
	f, ims, _ := importAndBuild(t, "ci", vllmCIServingBenchmarks)
	if ims[0].Format != FormatVLLMCIJSON {
		t.Fatalf("format %s: the embedded JSON (full precision) must win over the markdown table", ims[0].Format)
	}
	if len(f.Baselines) != 1 || len(f.Baselines[0].Points) != 4 {
		t.Fatalf("want one baseline with 4 points, got %d baselines", len(f.Baselines))
	}
	b := f.Baselines[0]
	if b.Parallelism == nil || b.Parallelism.TP != 4 || b.Parallelism.PP != 2 || b.Hardware != "Standard_ND96asr_v4-GPUDirect-RDMA-Infiniband x 2" {
		t.Errorf("identity: %+v %q", b.Parallelism, b.Hardware)
	}
	p := pointAt(t, b, "request_rate", 1)
	if p.Label != "tp4_pp2_optimized_IB_qps_01" {
		t.Errorf("label %q", p.Label)
	}
	eq(t, "qps1 req/s", p.RequestThroughput, 0.9247087073539347)
	eq(t, "qps1 mean TTFT", mean(p.TTFT), 0.11008901771998353)
	eq(t, "qps1 p99 TPOT", pct(p.TPOT, "p99"), 0.05129663850319903)
	eq(t, "qps1 median ITL", median(p.ITL), 0.04257663700082048)
	eqi(t, "qps1 completed", p.Completed, 200)
	p = pointAt(t, b, "request_rate", math.Inf(1))
	eq(t, "qps inf output tok/s", p.OutputThroughput, 933.9248021726821)
	eq(t, "qps inf p99 ITL", pct(p.ITL, "p99"), 0.08935747172055926)

	// The markdown table alone (same run, tabulate's 6 significant digits).
	mf, mims, _ := importAndBuild(t, "ci-md", "testdata/ci_results_table.md")
	if mims[0].Format != FormatVLLMCIMarkdown {
		t.Fatalf("format %s", mims[0].Format)
	}
	mp := pointAt(t, mf.Baselines[0], "request_rate", 16)
	eq(t, "md qps16 output tok/s", mp.OutputThroughput, 811.3)
	eq(t, "md qps16 mean TPOT", mean(mp.TPOT), 0.0677359)
	eq(t, "md qps16 total tok/s", mp.TotalTokenThroughput, 1620.61)
	if mf.Baselines[0].Hardware != "1xStandard_ND96asr_v4-GPUDirect-RDMA-Infiniband x 2" {
		t.Errorf("md hardware %q", mf.Baselines[0].Hardware)
	}
	for _, q := range []float64{1, 4, 16, math.Inf(1)} {
		j, m := pointAt(t, b, "request_rate", q), pointAt(t, mf.Baselines[0], "request_rate", q)
		if rel := math.Abs(*j.OutputThroughput-*m.OutputThroughput) / *j.OutputThroughput; rel > 1e-5 {
			t.Errorf("qps %v: JSON %v and table %v disagree", q, *j.OutputThroughput, *m.OutputThroughput)
		}
	}
}

func TestImportMI300ServingRuns(t *testing.T) {
	f, ims, _ := importAndBuild(t, "mi300", mi300ServingRuns)
	if ims[0].Format != FormatVLLMServeText || ims[0].NumPoints() != 9 {
		t.Fatalf("format %s, %d points; want vllm-serve-text, 9", ims[0].Format, ims[0].NumPoints())
	}
	var names []string
	for _, b := range f.Baselines {
		names = append(names, b.Name)
	}
	want := []string{"mi300/tp4/run1", "mi300/tp4/run2", "mi300/tp4/run3", "mi300/tp2/run4", "mi300/tp1/ctx32768/run6"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("names %q, want %q", names, want)
	}
	b := f.Baselines[0]
	if b.Model != "meta-llama/Llama-3.1-70B-Instruct" || len(b.Points) != 3 {
		t.Fatalf("first set-up: model %q, %d points", b.Model, len(b.Points))
	}
	p := pointAt(t, b, "concurrency", 128)
	eqi(t, "completed", p.Completed, 1024)
	eq(t, "duration", p.DurationSeconds, 95.88)
	eqi(t, "generated tokens", p.TotalOutputTokens, 191594)
	eq(t, "output tok/s", p.OutputThroughput, 1998.36)
	eq(t, "total tok/s", p.TotalTokenThroughput, 4302.41)
	eq(t, "mean TTFT", mean(p.TTFT), 1.15672)
	eq(t, "P99 ITL", pct(p.ITL, "p99"), 0.56038)
	eq(t, "median TPOT", median(p.TPOT), 0.05127)
	p = pointAt(t, b, "concurrency", 512)
	eq(t, "c512 mean TTFT", mean(p.TTFT), 16.12602)
	if got := b.SaturationOutputThroughput(); got != 2275.44 {
		t.Errorf("saturation %v, want 2275.44", got)
	}
	// Second server (--max-num-seqs 4096), concurrency 512: trailing-space lines.
	eq(t, "run2 c512 output tok/s", pointAt(t, f.Baselines[1], "concurrency", 512).OutputThroughput, 2560.09)
	eq(t, "fp8 tp4 output tok/s", pointAt(t, f.Baselines[2], "concurrency", 512).OutputThroughput, 3199.72)
	last := f.Baselines[4]
	if last.MaxModelLen != 32768 || last.Parallelism.TP != 1 {
		t.Errorf("tp1 set-up: ctx %d tp %d", last.MaxModelLen, last.Parallelism.TP)
	}
	p = pointAt(t, last, "concurrency", 512)
	eq(t, "tp1 output tok/s", p.OutputThroughput, 1559.19)
	eq(t, "tp1 P99 TPOT", pct(p.TPOT, "p99"), 2.42245)
}

func TestToolSamples(t *testing.T) {
	ctx := context.Background()
	load := func(path string, want Format) *Import {
		t.Helper()
		im, err := ImportFile(ctx, path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if im.Format != want {
			t.Fatalf("%s: format %s, want %s", path, im.Format, want)
		}
		return im
	}
	t.Run("vllm new", func(t *testing.T) {
		im := load("testdata/vllm_serve_new.json", FormatVLLMServeJSON)
		b := im.Baselines[0]
		p := &b.Points[0]
		if b.Model != "meta-llama/Llama-3.1-8B-Instruct" || b.Hardware != "1xH100" {
			t.Errorf("model %q hardware %q", b.Model, b.Hardware)
		}
		if float64(*p.Concurrency) != 16 || !math.IsInf(float64(*p.RequestRate), 1) {
			t.Errorf("load %s", p.loadString())
		}
		eq(t, "output", p.OutputThroughput, 254.22)
		eq(t, "peak", p.PeakOutputThroughput, 630)
		eq(t, "p99.9 e2e", pct(p.E2E, "p99.9"), 9.8)
		eq(t, "p50 e2e", pct(p.E2E, "p50"), 8.7)
		eq(t, "std ttft", p.TTFT.Std, 0.02)
		if p.RequestGoodput != nil {
			t.Errorf("goodput null must stay absent, got %v", *p.RequestGoodput)
		}
	})
	t.Run("vllm old goodput typo", func(t *testing.T) {
		p := load("testdata/vllm_serve_old.json", FormatVLLMServeJSON).Baselines[0].Points[0]
		eq(t, "goodput from \"request_goodput:\"", p.RequestGoodput, 3.5012)
		eq(t, "request rate", (*float64)(p.RequestRate), 4)
		if p.Concurrency != nil || p.Failed != nil {
			t.Errorf("concurrency %v failed %v, want absent", p.Concurrency, p.Failed)
		}
	})
	t.Run("vllm v0.5", func(t *testing.T) {
		p := load("testdata/vllm_serve_v05.json", FormatVLLMServeJSON).Baselines[0].Points[0]
		eq(t, "input throughput", p.InputThroughput, 160)
		eq(t, "p99 ttft", pct(p.TTFT, "p99"), 0.4)
	})
	t.Run("vllm append (JSON Lines)", func(t *testing.T) {
		im := load("testdata/vllm_serve_append.json", FormatVLLMServeJSONL)
		if im.NumPoints() != 3 {
			t.Fatalf("%d points", im.NumPoints())
		}
		eq(t, "record 3 output", im.Baselines[2].Points[0].OutputThroughput, 1066.67)
		if im.Baselines[2].Points[0].Ref != "vllm_serve_append.json record 3" {
			t.Errorf("ref %q", im.Baselines[2].Points[0].Ref)
		}
	})
	t.Run("vllm all failed", func(t *testing.T) {
		f, _, _ := importAndBuild(t, "af", "testdata/vllm_serve_allfailed.json", "testdata/vllm_serve_append.json")
		b := f.Baselines[0]
		if len(f.Baselines) != 1 || len(b.Points) != 4 {
			t.Fatalf("%d baselines, %d points", len(f.Baselines), len(b.Points))
		}
		if !pointAt(t, b, "concurrency", 8).AllFailed {
			t.Error("all-failed point not flagged")
		}
		if got := b.SaturationOutputThroughput(); got != 1066.67 {
			t.Errorf("saturation %v", got)
		}
		// Interpolation ignores the all-failed point at 8: between 4 and 16.
		e, ok := b.Expected(8)
		if !ok || math.Abs(e.OutputThroughput-(426.67+(1066.67-426.67)*4/12)) > 1e-9 {
			t.Errorf("expected at 8 = %v", e.OutputThroughput)
		}
	})
	t.Run("sweep summary", func(t *testing.T) {
		f, ims, _ := importAndBuild(t, "sweep", "testdata/sweep_summary.json")
		if ims[0].Format != FormatVLLMSweepSummary || len(f.Baselines) != 2 {
			t.Fatalf("format %s, %d baselines", ims[0].Format, len(f.Baselines))
		}
		b := find(t, f, func(b *Baseline) bool { return b.ServerParams["max_num_seqs"] == "32" })
		if len(b.Points) != 2 || b.Name != "sweep/max_num_seqs=32" {
			t.Errorf("name %q, %d points", b.Name, len(b.Points))
		}
		eq(t, "c32 output", pointAt(t, b, "concurrency", 32).OutputThroughput, 2048)
	})
	t.Run("printed new format", func(t *testing.T) {
		im := load("testdata/vllm_serve_printed_new.txt", FormatVLLMServeText)
		if im.NumPoints() != 2 {
			t.Fatalf("%d points", im.NumPoints())
		}
		p := im.Baselines[0].Points[0]
		eq(t, "concurrency", (*float64)(p.Concurrency), 32)
		eqi(t, "failed", p.Failed, 2)
		eq(t, "goodput", p.RequestGoodput, 14.2)
		eq(t, "peak", p.PeakOutputThroughput, 2400)
		eq(t, "P90 TTFT", pct(p.TTFT, "p90"), 0.1204)
		eq(t, "P99 E2EL", pct(p.E2E, "p99"), 2.30055)
		p = im.Baselines[1].Points[0]
		eq(t, "rate", (*float64)(p.RequestRate), 2)
		if p.Concurrency != nil {
			t.Error("second block must not inherit the first block's concurrency")
		}
		eq(t, "peak concurrency", im.Baselines[0].Points[0].PeakConcurrency, 32)
		want := `line 15: "RTFx (Inverse Real-Time Factor)" is not a baseline metric; not imported`
		if !containsString(im.Notes, want) {
			t.Errorf("notes %q lack %q", im.Notes, want)
		}
	})
	t.Run("ci records", func(t *testing.T) {
		im := load("testdata/ci_benchmark_results.json", FormatVLLMCIRecords)
		b := im.Baselines[0]
		if b.Model != "meta-llama/Meta-Llama-3.1-8B-Instruct" || b.Parallelism.TP != 1 || b.Hardware != "8xH100" {
			t.Errorf("%q %+v %q", b.Model, b.Parallelism, b.Hardware)
		}
		p := b.Points[0]
		eq(t, "std ttft", p.TTFT.Std, 0.0055)
		eq(t, "median tpot (unlabeled Median column)", median(p.TPOT), 0.007)
		eq(t, "p99 tpot (unlabeled P99 column)", pct(p.TPOT, "p99"), 0.0092)
		if !containsString(im.Notes, "2 latency/throughput (non-serving) rows not imported: they have no load level") {
			t.Errorf("notes %q", im.Notes)
		}
	})
	t.Run("ci dict with NaN", func(t *testing.T) {
		im := load("testdata/ci_results_nan.json", FormatVLLMCIJSON)
		p := im.Baselines[1].Points[0]
		eq(t, "qps16 output", p.OutputThroughput, 1900.25)
		if p.TotalTokenThroughput != nil || p.TPOT != nil {
			t.Errorf("NaN cells must be absent: total %v tpot %+v", p.TotalTokenThroughput, p.TPOT)
		}
		if im.Baselines[0].Hardware != "H100\nH100" {
			t.Errorf("hardware %q", im.Baselines[0].Hardware)
		}
	})
	t.Run("guidellm v0.5", func(t *testing.T) {
		im := load("testdata/guidellm_v05.json", FormatGuideLLM)
		if im.NumPoints() != 4 {
			t.Fatalf("%d points", im.NumPoints())
		}
		sync := im.Baselines[0].Points[0]
		eq(t, "synchronous = concurrency 1", (*float64)(sync.Concurrency), 1)
		eq(t, "TTFT ms->s", mean(sync.TTFT), 0.0355)
		eq(t, "TTFT p99", pct(sync.TTFT, "p99"), 0.05225)
		eq(t, "guidellm ITL is vLLM TPOT", mean(sync.TPOT), 0.0095)
		eq(t, "guidellm TPOT includes TTFT", mean(sync.TPOTInclTTFT), 0.0102)
		eq(t, "request_latency already s", mean(sync.E2E), 1.25)
		eq(t, "output tok/s", sync.OutputThroughput, 101.5)
		if sync.ITL != nil {
			t.Error("guidellm has no ITL")
		}
		conc := im.Baselines[1].Points[0]
		eq(t, "concurrent streams", (*float64)(conc.Concurrency), 8)
		eqi(t, "errored", conc.Failed, 1)
		eq(t, "constant rate", (*float64)(im.Baselines[2].Points[0].RequestRate), 2.5)
		thr := im.Baselines[3].Points[0]
		if !math.IsInf(float64(*thr.RequestRate), 1) {
			t.Error("throughput strategy must be rate inf")
		}
		if im.Baselines[0].Model != "Qwen/Qwen3-8B" {
			t.Errorf("model %q", im.Baselines[0].Model)
		}
	})
	t.Run("guidellm v0.3", func(t *testing.T) {
		p := load("testdata/guidellm_v03.json", FormatGuideLLM).Baselines[0].Points[0]
		eq(t, "poisson rate", (*float64)(p.RequestRate), 4)
		eqi(t, "completed from request_totals", p.Completed, 234)
	})
	t.Run("aiperf", func(t *testing.T) {
		im := load("testdata/aiperf_profile_export_aiperf.json", FormatAIPerf)
		b := im.Baselines[0]
		p := b.Points[0]
		if b.Model != "Qwen/Qwen3-8B" || b.Source.Tool != ToolAIPerf {
			t.Errorf("model %q tool %q", b.Model, b.Source.Tool)
		}
		eq(t, "concurrency", (*float64)(p.Concurrency), 32)
		eq(t, "TTFT", mean(p.TTFT), 0.0555)
		eq(t, "aiperf ITL is vLLM TPOT", mean(p.TPOT), 0.00975)
		eq(t, "inter_chunk_latency is vLLM ITL", pct(p.ITL, "p99"), 0.025)
		eq(t, "output tok/s", p.OutputThroughput, 3200.5)
		eq(t, "goodput", p.RequestGoodput, 15.1)
		eqi(t, "completed", p.Completed, 500)
		eqi(t, "failed", p.Failed, 3)
	})
	t.Run("genai-perf", func(t *testing.T) {
		im := load("testdata/genai_perf_profile_export_genai_perf.json", FormatGenAIPerf)
		p := im.Baselines[0].Points[0]
		eq(t, "E2E ms->s", mean(p.E2E), 2.3456)
		eq(t, "TPOT", median(p.TPOT), 0.0114)
		eq(t, "req/s", p.RequestThroughput, 6.86)
		eq(t, "per-request tok/s", mean(p.OutputThroughputPerRequest), 86.9)
		if im.Baselines[0].Model != "meta-llama/Llama-3.1-8B-Instruct" {
			t.Errorf("model %q", im.Baselines[0].Model)
		}
	})
	t.Run("llmperf", func(t *testing.T) {
		p := load("testdata/llmperf_summary.json", FormatLLMPerf).Baselines[0].Points[0]
		eq(t, "concurrency", (*float64)(p.Concurrency), 8)
		eq(t, "TTFT p99", pct(p.TTFT, "p99"), 0.412)
		eq(t, "llmperf ITL includes TTFT", mean(p.TPOTInclTTFT), 0.0251)
		if p.TPOT != nil || p.ITL != nil {
			t.Error("llmperf ITL must not be stored as TPOT or ITL")
		}
		perMin := 125.4
		eq(t, "req/s = per min / 60", p.RequestThroughput, perMin/60)
		eqi(t, "errors", p.Failed, 2)
	})
}

func TestOwnBaselineRoundTrip(t *testing.T) {
	// The bench command writes this package's YAML; importing it again keeps its points and source.
	f, _, _ := importAndBuild(t, "first", "testdata/vllm_serve_append.json")
	dir := t.TempDir()
	path := filepath.Join(dir, "bench.yaml")
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	g, ims, _ := importAndBuild(t, "again", path)
	if ims[0].Format != FormatBaseline {
		t.Fatalf("format %s", ims[0].Format)
	}
	if g.Baselines[0].Source.Format != string(FormatVLLMServeJSONL) || len(g.Baselines[0].Points) != 3 {
		t.Errorf("source %+v points %d", g.Baselines[0].Source, len(g.Baselines[0].Points))
	}
}

func TestImportErrors(t *testing.T) {
	cases := []struct {
		name, content, want string
	}{
		{"empty.json", "  \n", "empty.json: empty file"},
		{"notes.txt", "hello\nworld\n", "notes.txt: unrecognized format: not JSON from a known tool, no \"Serving Benchmark Result\" block, no vLLM CI table, no benchmark table and no baseline YAML (see docs/baselines.md for the formats read)"},
		{"bad.json", `{"completed": 1,`, "bad.json: invalid JSON: unexpected EOF"},
		{"stub.json", `{"reason": "OOM at load"}`, "stub.json: a stub without results (reason: OOM at load), the benchmark did not run"},
		{"run.pytorch.json", `[]`, "run.pytorch.json: a PyTorch OSS benchmark companion file (.pytorch.json), not a vLLM result: import the sibling .json file written by --save-result instead"},
		{"records.json", `[{"benchmark": {}, "metric": {}}]`, "records.json: a PyTorch OSS benchmark records file (.pytorch.json companion), not a vLLM result: import the sibling .json file written by --save-result instead"},
		{"other.json", `{"foo": 1, "bar": 2}`, "other.json: JSON object with keys [bar, foo]: not a known result format"},
		{"lines.json", "{\"completed\": 1, \"request_throughput\": 1, \"request_rate\": 1}\n{\"x\": 1}\n", "lines.json: JSON Lines record 2 is not a vllm bench serve result (missing \"request_throughput\" or \"completed\")"},
		{"noload.json", `{"completed": 3, "request_throughput": 1.5}`, "noload.json (vllm-serve-json): missing load level: neither \"max_concurrency\" nor \"request_rate\" is set"},
		{"badtype.json", `{"completed": 3, "request_throughput": "fast", "request_rate": 1}`, "badtype.json (vllm-serve-json): field \"request_throughput\": \"fast\" is not a number"},
		{"neg.json", `{"completed": 3, "request_throughput": 1, "request_rate": -1}`, "neg.json (vllm-serve-json): field \"request_rate\": load level -1 is not positive"},
		{"noload.txt", "============ Serving Benchmark Result ============\nSuccessful requests: 3\nRequest throughput (req/s): 1.0\n==================================================\n", "noload.txt (vllm-serve-text): result block at line 1: no load level: expected a \"Maximum request concurrency\", \"Request rate configured (RPS)\" or \"Traffic request rate\" line"},
		{"open.txt", "Maximum request concurrency: 4\n============ Serving Benchmark Result ============\nSuccessful requests: 3\n", "open.txt (vllm-serve-text): line 2: result block is not closed by a line of \"=\""},
		{"junk.txt", "Traffic request rate: inf\n============ Serving Benchmark Result ============\nthis is not a metric line\n=====\n", "junk.txt (vllm-serve-text): line 3: unexpected line in the result block started at line 2: \"this is not a metric line\""},
		{"gl.json", `{"benchmarks": [{"metrics": {}}]}`, "gl.json (guidellm-json): benchmarks[0]: missing \"config.strategy\" (or \"args.strategy\" before v0.4): cannot tell the load level"},
		{"gl01.json", `{"benchmarks": [{"benchmarks": [{"mode": "synchronous", "rate": null, "results": [], "errors": []}], "args": {}}]}`, "gl01.json (guidellm-json): benchmarks[0]: a guidellm 0.1 report (per-request results of each mode and rate, no aggregate metrics): not read; re-run with guidellm 0.2 or later, whose benchmarks.json carries the statistics"},
		{"profile_export.jsonl", "{\"metadata\": {\"benchmark_phase\": \"profiling\"}, \"metrics\": {\"time_to_first_token\": {\"value\": 10.5, \"unit\": \"ms\"}}}\n{\"metadata\": {}, \"metrics\": {}}\n", "profile_export.jsonl: aiperf per-request records (profile_export.jsonl), no summary statistics: import the profile_export_aiperf.json that aiperf writes next to it"},
		{"x_individual_responses.json", `[{"error_code": null, "ttft_s": 0.05, "end_to_end_latency_s": 1.05, "number_output_tokens": 105}]`, "x_individual_responses.json: llmperf per-request responses (*_individual_responses.json), no summary statistics: import the *_summary.json that llmperf writes next to it"},
		{"gl2.json", `{"benchmarks": []}`, "gl2.json (guidellm-json): \"benchmarks\" is empty"},
		{"gp.json", `{"time_to_first_token": {"avg": 3}, "input_config": {"concurrency": 2}}`, "gp.json (genai-perf-json): \"time_to_first_token\": missing \"unit\" (cannot convert to seconds)"},
		{"gp2.json", `{"time_to_first_token": {"unit": "ms", "avg": 3}}`, "gp2.json (genai-perf-json): missing \"input_config\": cannot tell the load level (concurrency or request_rate)"},
		{"lp.json", `{"results_ttft_s_mean": 1}`, "lp.json (llmperf-summary): missing \"num_concurrent_requests\": cannot tell the load level"},
		{"ci.md", "| Test name | GPU | Tput (req/s) |\n|:--|:--|--:|\n| serving_x | H100 | 1.5 |\n", "ci.md (vllm-ci-markdown): ci.md:3 (test \"serving_x\"): no load level: no \"qps\" or \"# of max concurrency.\" column and no _qps_N or _concurrency_N in the test name"},
		{"tl.md", "| | m |\n|--|--|\n| 1xA | 12/x |\n| 2xA | 10/2 |\n", "tl.md (throughput-latency-table): table at line 1, row 1, column \"m\": \"12/x\" is not <throughput>/<latency>"},
		{"yaml.yaml", "version: 2\nbaselines: []\n", "yaml.yaml (baseline-yaml): unsupported baseline file version 2 (this build reads version 1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ImportBytes(c.name, []byte(c.content))
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != c.want {
				t.Errorf("error\n got: %s\nwant: %s", err, c.want)
			}
		})
	}
}

func TestImportFileErrors(t *testing.T) {
	_, err := ImportFile(context.Background(), "testdata/does-not-exist.json")
	if err == nil || err.Error() != "reading baseline input: open testdata/does-not-exist.json: no such file or directory" {
		t.Errorf("got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ImportFile(ctx, "testdata/vllm_serve_new.json"); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled context: got %v", err)
	}
	if _, err := ImportFile(context.Background(), "testdata/vllm_serve_new.pytorch.json"); err == nil || !strings.Contains(err.Error(), "companion file") {
		t.Errorf("pytorch companion: got %v", err)
	}
	if _, err := ImportFile(context.Background(), "testdata/stub_reason.json"); err == nil || !strings.Contains(err.Error(), "reason: model does not fit") {
		t.Errorf("stub: got %v", err)
	}
}
