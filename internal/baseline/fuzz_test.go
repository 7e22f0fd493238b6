package baseline

import (
	"os"
	"path/filepath"
	"testing"
)

// Each fuzz target starts from the samples of one format (testdata/ and the public reports in
// testdata/reports) and checks that importing never panics and that whatever imports cleanly also
// builds into a file its own strict reader accepts. Run one with e.g.
//
//	go test -run "^$" -fuzz=FuzzImportVLLMServeText -fuzztime=30s -fuzzminimizetime=1s ./baseline
//
// (-fuzzminimizetime keeps short runs fuzzing instead of minimizing each new input for 60 s).

func addFiles(f *testing.F, paths ...string) {
	f.Helper()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatalf("fuzz corpus: %v", err)
		}
		f.Add(data)
	}
}

func checkImport(t *testing.T, name string, data []byte) {
	im, err := ImportBytes(name, data)
	if err != nil {
		return
	}
	f, _, err := Build("fuzz", []*Import{im})
	if err != nil {
		return
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatalf("Marshal of a built file: %v", err)
	}
	g, err := Parse(out)
	if err != nil {
		t.Fatalf("the written file does not read back: %v\n%s", err, out)
	}
	for _, b := range g.Baselines {
		for _, c := range []float64{0.5, 1, 3, 1e6} {
			b.Expected(c)
		}
		b.SaturationOutputThroughput()
	}
}

func FuzzDetect(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.*") // the samples, not the golden/ and reports/ directories
	addFiles(f, files...)
	addFiles(f, multiGPUPresetsReport, lambdaA100H100Report, vllmCIServingBenchmarks, mi300ServingRuns)
	f.Add([]byte("{\"reason\": \"x\"}"))
	f.Add([]byte("[[1]]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		format, err := Detect("in.json", data)
		if err == nil && format == "" {
			t.Fatal("no error and no format")
		}
	})
}

func FuzzImportVLLMServeJSON(f *testing.F) {
	addFiles(f, "testdata/vllm_serve_new.json", "testdata/vllm_serve_old.json", "testdata/vllm_serve_v05.json",
		"testdata/vllm_serve_append.json", "testdata/vllm_serve_allfailed.json", "testdata/sweep_summary.json")
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "run.json", data) })
}

func FuzzImportVLLMServeText(f *testing.F) {
	addFiles(f, "testdata/vllm_serve_printed_new.txt", "testdata/vllm_bench_serve_goodput_v08.log", mi300ServingRuns)
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "run.txt", data) })
}

func FuzzImportVLLMCI(f *testing.F) {
	addFiles(f, "testdata/ci_results_nan.json", "testdata/ci_benchmark_results.json", vllmCIServingBenchmarks)
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "ci.json", data) })
}

func FuzzImportVLLMCIMarkdown(f *testing.F) {
	addFiles(f, "testdata/ci_results_table.md")
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "ci.md", data) })
}

func FuzzImportGuideLLM(f *testing.F) {
	addFiles(f, "testdata/guidellm_v05.json", "testdata/guidellm_v03.json")
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "benchmarks.json", data) })
}

func FuzzImportAIPerf(f *testing.F) {
	addFiles(f, "testdata/aiperf_profile_export_aiperf.json", "testdata/genai_perf_profile_export_genai_perf.json")
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "profile.json", data) })
}

func FuzzImportInferencePerf(f *testing.F) {
	addFiles(f, "testdata/inference_perf_stage_0_lifecycle_metrics_kubecon.json", "testdata/inference_perf_stage_2_lifecycle_metrics_goodput.json")
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "stage_0_lifecycle_metrics.json", data) })
}

func FuzzImportLLMPerf(f *testing.F) {
	addFiles(f, "testdata/llmperf_summary.json")
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "summary.json", data) })
}

func FuzzImportPresetHTML(f *testing.F) {
	addFiles(f, multiGPUPresetsReport)
	f.Add([]byte("| Preset | GPU Count | GPU Type |\n|--|--|--|\n| p | 2 | X |\n**1.5B - 2k context length @4req for 10 total requests**\n<table><tr><th>Preset</th><th>Gen TPS</th><th>Errors</th></tr><tr><td>p</td><td>5</td><td>1</td></tr></table>\n"))
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "report.md", data) })
}

func FuzzImportThroughputLatencyTable(f *testing.F) {
	addFiles(f, lambdaA100H100Report)
	f.Add([]byte("| | m |\n|--|--|\n| 1xA | 12/3 |\n"))
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "report.md", data) })
}

func FuzzParseBaseline(f *testing.F) {
	addFiles(f, "testdata/golden/mi300.yaml", "testdata/golden/append_allfailed.yaml", "testdata/golden/guidellm.yaml")
	f.Add([]byte(minimalYAML))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			return
		}
		out, err := b.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed file: %v", err)
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		checkImport(t, "baseline.yaml", data)
	})
}
