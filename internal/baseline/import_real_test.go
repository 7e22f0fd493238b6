package baseline

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stat3 is an expected mean, median and p99, in seconds.
type stat3 [3]float64

// realRow is one result file of one tool and version, and the figures read from it by hand.
// Latencies are the file's values converted to seconds by moving the decimal point (the
// importer converts in decimal, so 112.55 ms is exactly the float nearest 0.11255).
type realRow struct {
	name, file string
	format     Format
	// pick selects the baseline and point the row checks when the file holds several.
	pick                     func(*Baseline) bool
	model, framework         string
	loadKind                 string
	load                     float64
	completed                int64
	failed                   int64 // -1: the file has no count and num_prompts is unknown
	failedDerived            bool
	ttft, tpot, itl, e2e     *stat3
	output, requests         float64
	duration                 float64 // 0: not checked
	serverParams             map[string]string
	runNumber                int64 // -1: none
	toolRequestsPerSecond    float64
	dataset                  string
	numPrompts               int64
	sourceDate, pointDate    string
	wantTPOTInclTTFTOnly     bool
	wantTotalOutputTokens    int64
	wantTotalInputTokens     int64
	wantTotalTokenThroughput float64
	tool                     string // source.tool, when the row checks it
}

func s3(mean, median, p99 float64) *stat3 { return &stat3{mean, median, p99} }

func realRows() []realRow {
	// Divisions the importer does at run time on float64 values are written with float64
	// variables here, so that the expected value is rounded the same way (a Go constant
	// expression would divide the exact decimals instead).
	var (
		gl05Duration   = 24.909644603729248 // guidellm_v05_real_concurrent4.json benchmarks[0].duration
		groqPerMinute  = 176.73895115400083 // llmperf results_num_completed_requests_per_min
		gl05Tokens     = 4096.0             // metrics.output_token_count.successful.total_sum
		gl05AllTokens  = 396.0 + 4096.0     // + metrics.prompt_token_count.successful.total_sum
		gl05Completed  = 4.0                // metrics.request_totals.successful
		llmperfMinutes = 60.0
	)
	return []realRow{
		{
			// vLLM 0.7-era benchmark_serving.py output in a blog post (two runs, one Namespace(...)
			// line): the second run's model is only in its command line, "--model qwen2.5", a
			// served name without org. Both runs are one set-up, so one baseline with two points;
			// the row checks the --max-concurrency 100 run (no failed line, no num_prompts: failed
			// is unknown).
			name: "vllm text log v0.7, --model without org", file: "vllm_bench_serve_v07_model_no_org.md", format: FormatVLLMServeText,
			model: "qwen2.5", loadKind: "concurrency", load: 100, completed: 1000, failed: -1,
			ttft: s3(1.10958, 0.56698, 5.96161), tpot: s3(0.27272, 0.27169, 0.41977), itl: s3(0.26009, 0.13925, 0.6232),
			output: 358.60, requests: 1.81, duration: 552.55, runNumber: -1,
			wantTotalOutputTokens: 198142, wantTotalInputTokens: 217393, wantTotalTokenThroughput: 752.04,
		},
		{
			// SGLang's bench_serving (a fork of benchmark_serving.py, same definitions) on a LoRA
			// research set-up, two request rates: "Backend: sglang" is the framework, the old
			// "Total throughput (tok/s)" label the total token throughput, "Mean/Median E2E Latency
			// (ms)" the E2E (no P99 printed), "-0.00" a zero; failed = num_prompts 1000 (from its
			// Namespace line) - 996. The row checks the 2 req/s block; no model is named.
			name: "sglang bench_serving text, backend and E2E", file: "sglang_bench_serving_lora_rates.md", format: FormatVLLMServeText,
			framework: "sglang", tool: ToolSGLangBenchServing, loadKind: "request_rate", load: 2, completed: 996, failed: 4, failedDerived: true,
			ttft: s3(1.95572, 0.5761, 13.3179), tpot: s3(0.00177, 0, 0.02726), itl: s3(0, 0, 0),
			e2e:    s3(1.97933, 0.57603, math.NaN()),
			output: 831.83, requests: 3.8, duration: 262.38, runNumber: -1, numPrompts: 1000,
			wantTotalOutputTokens: 218257, wantTotalInputTokens: 342460, wantTotalTokenThroughput: 2137.04,
		},
		{
			// vllm bench serve (vLLM 0.25.1) --save-result JSON: "failed" key present (not
			// derived), "request_rate": "inf" with max_concurrency 2, no e2el keys.
			name: "vllm json v0.25.1", file: "vllm_bench_serve_v0251.json", format: FormatVLLMServeJSON,
			model: "facebook/opt-125m", loadKind: "concurrency", load: 2, completed: 8, failed: 0,
			ttft:   s3(0.21553594200008774, 0.05568139649994919, 0.7344049174101428),
			tpot:   s3(0.011265828258331112, 0.01120450286665194, 0.011979541883350674),
			itl:    s3(0.011265836941667354, 0.010492878499917424, 0.029815922519960626),
			output: 82.89297074037474, requests: 5.180810671273421, duration: 1.5441598830002476, runNumber: -1,
			sourceDate:            "2026-08-16T16:08:53Z",
			wantTotalOutputTokens: 128, wantTotalInputTokens: 256, wantTotalTokenThroughput: 248.6789122211242,
		},
		{
			// aiperf 0.10.0, profile-export schema 1.3, a rate-driven run: the measured phase is
			// {"type": "poisson", "rate": 1.0} (the warm-up phase has exclude_from_results), so
			// request_rate 1 with no concurrency; model from input_config.models.items[];
			// error_summary empty, so failed 0; totals from total_isl / total_osl.
			name: "aiperf 0.10 schema 1.3 poisson rate", file: "aiperf_profile_export_v0100_poisson_rate.json", format: FormatAIPerf,
			model: "qwen3.6-nvfp4", loadKind: "request_rate", load: 1, completed: 96, failed: 0,
			ttft:   s3(0.10361575194791666, 0.1027066385, 0.24721048975),
			tpot:   s3(0.005416936436115383, 0.005456637959534995, 0.0064563017350191885),
			itl:    s3(0.005431091991977439, 0.005301865326628352, 0.007314979436526295),
			e2e:    s3(1.2671706373541667, 1.081099647, 3.6112226771499995),
			output: 217.66321305789484, requests: 1.0096964703337958, duration: 95.078078235, runNumber: -1,
			sourceDate:            "2026-07-03T04:35:27.837978Z",
			wantTotalOutputTokens: 20695, wantTotalInputTokens: 55158, wantTotalTokenThroughput: 797.7969412940564,
		},
		{
			// guidellm 0.5.0.dev0, the real file of the guidellm rate finding: 4 of 4 requests at concurrency 4 in
			// 24.9096 s. guidellm's requests_per_second mean is 0.12043527909470322; vLLM's
			// definition, completed / duration, gives 0.1606. Tokens from
			// metrics.{prompt,output}_token_count totals (396, 4096); the date is the benchmark's
			// start_time 1772470696.6793344 in RFC 3339.
			name: "guidellm 0.5 real, rate definitions", file: "guidellm_v05_real_concurrent4.json", format: FormatGuideLLM,
			model: "Qwen/Qwen3-4B-Thinking-2507", loadKind: "concurrency", load: 4, completed: 4, failed: 0,
			ttft:   s3(0.1717655062675476, 0.17152166366577148, 0.17263293266296387),
			tpot:   s3(0.02417877651496134, 0.024178653868062757, 0.024178931207367867),
			e2e:    s3(24.90865981578827, 24.90842366218567, 24.909693002700806),
			output: gl05Tokens / gl05Duration, requests: gl05Completed / gl05Duration, duration: gl05Duration, runNumber: -1,
			toolRequestsPerSecond: 0.12043527909470322,
			sourceDate:            "2026-03-02T16:58:16.679334Z", pointDate: "2026-03-02T16:58:16.679334Z",
			wantTotalOutputTokens: 4096, wantTotalInputTokens: 396, wantTotalTokenThroughput: gl05AllTokens / gl05Duration,
		},
		{
			// llmperf summary of the LLMPerf leaderboard (Groq, Llama 2 70B): "framework": "groq"
			// at the top level, epoch timestamp 1704851704 = 2024-01-10T01:55:04Z.
			name: "llmperf leaderboard, framework", file: "llmperf_leaderboard_groq_70b.json", format: FormatLLMPerf,
			model: "llama2-70b-4096", framework: "groq", loadKind: "concurrency", load: 5, completed: 150, failed: 0,
			ttft:   s3(0.22786034579078357, 0.2218883791938424, 0.3500269545800982),
			e2e:    s3(0.8151081097126007, 0.8051837999373674, 0.9922714155726133),
			output: 441.84737788500206, requests: groqPerMinute / llmperfMinutes, runNumber: -1,
			sourceDate: "2024-01-10T01:55:04Z", pointDate: "2024-01-10T01:55:04Z", wantTPOTInclTTFTOnly: true,
			numPrompts: 150,
		},
		{
			// vLLM 0.8 benchmark_serving.py printed output, rate-driven (Maximum request
			// concurrency: None), two test cases; the row checks the 1.0 req/s block. Model and
			// dataset from its Namespace(...) line; failed = num_prompts 200 - completed 200.
			name: "vllm text log v0.8 rate, Namespace", file: "vllm_bench_serve_rate_v08.log", format: FormatVLLMServeText,
			model: "meta-llama/Llama-3.3-70B-Instruct", loadKind: "request_rate", load: 1,
			completed: 200, failed: 0, failedDerived: true,
			ttft: s3(0.11255, 0.09729, 0.22411), tpot: s3(0.04415, 0.04404, 0.05242), itl: s3(0.04411, 0.0426, 0.09582),
			output: 197.96, requests: 0.93, duration: 215.73, runNumber: -1,
			dataset: "sharegpt", numPrompts: 200,
		},
		{
			// The same run's --save-result JSON (per-request arrays removed): the unrounded values.
			// request_throughput = completed / duration = 200 / 215.73048534499958.
			name: "vllm json v0.8 rate", file: "vllm_bench_serve_rate_v08.json", format: FormatVLLMServeJSON,
			model: "meta-llama/Llama-3.3-70B-Instruct", loadKind: "request_rate", load: 1,
			completed: 200, failed: 0, failedDerived: true,
			ttft:   s3(0.11254634028501641, 0.09729397000046447, 0.22411016458079757),
			tpot:   s3(0.04414835973583927, 0.044035557910379126, 0.052420137621374174),
			itl:    s3(0.04410574301489207, 0.042598970499966526, 0.09582135385035015),
			output: 197.9599681134722, requests: 0.927082696171368, duration: 215.73048534499958, runNumber: -1,
			sourceDate: "2025-04-14T15:19:38Z",
		},
		{
			// vllm bench sweep serve (vLLM 0.25.1) summary.json of max_num_seqs=8, run_number 0.
			name: "vllm sweep summary v0.25.1", file: "vllm_sweep_summary_v0251_seqs8.json", format: FormatVLLMSweepSummary,
			pick:  func(b *Baseline) bool { return b.RunNumber != nil && *b.RunNumber == 0 },
			model: "facebook/opt-125m", loadKind: "concurrency", load: 2, completed: 8, failed: 0,
			ttft:   s3(0.04689306787258829, 0.04321107800205937, 0.07502528442884795),
			tpot:   s3(0.007962668958377132, 0.007894967666652519, 0.008812129340338288),
			itl:    s3(0.007962675899761962, 0.007337611496041063, 0.021111718034662776),
			e2e:    s3(0.16633310224824527, 0.1632172929967055, 0.18918195631165872),
			output: 191.2005994745598, requests: 11.950037467159987, duration: 0.6694539679883746,
			serverParams: map[string]string{"max_num_seqs": "8"}, runNumber: 0,
			sourceDate: "2026-08-18T02:13:58Z",
		},
		{
			// JSON Lines with a per-record framework: the SGLang record (all 50 completed).
			name: "vllm jsonl framework sgl", file: "vllm_bench_serve_mixed_framework.jsonl", format: FormatVLLMServeJSONL,
			pick:  func(b *Baseline) bool { return b.Framework == "sglang" },
			model: "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", framework: "sglang", loadKind: "request_rate", load: 10,
			completed: 50, failed: 0, failedDerived: true,
			ttft:   s3(0.06401113796047866, 0.055613665375858545, 0.1638259915681556),
			tpot:   s3(0.011908506736701629, 0.011950128643972434, 0.012058443724249525),
			itl:    s3(0.011910651821888367, 0.011755790328606963, 0.02049238599371165),
			output: 3630.3239801435116, requests: 1.815161990071756, runNumber: -1,
		},
		{
			// The vLLM record of the same file: 31 of 50 completed and no "failed" key, so
			// failed = 50 - 31 = 19; request_throughput = 31 / 21.636165995150805.
			name: "vllm jsonl framework vllm, partial", file: "vllm_bench_serve_mixed_framework.jsonl", format: FormatVLLMServeJSONL,
			pick:  func(b *Baseline) bool { return b.Framework == "vllm" },
			model: "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", framework: "vllm", loadKind: "request_rate", load: 10,
			completed: 31, failed: 19, failedDerived: true,
			ttft:   s3(0.043067965536348275, 0.04152383981272578, 0.06262359912507236),
			tpot:   s3(0.008756223613823618, 0.008765389245719076, 0.008837000357910522),
			itl:    s3(0.00875622371088742, 0.008524921722710133, 0.010683590210974215),
			output: 2865.57239456823, requests: 1.432786197284115, runNumber: -1,
		},
		{
			// An early aiperf export: metrics under "records" by tag (ttft), load in
			// input_config.loadgen, failures in error_request_count (= error_summary count 11).
			// inter_token_latency = (latency - TTFT)/(OSL - 1) is vLLM's TPOT; inter_chunk_latency its ITL.
			name: "aiperf records (early export)", file: "aiperf_profile_export_records_v01.json", format: FormatAIPerf,
			model: "openai/gpt-oss-20b", loadKind: "concurrency", load: 100, completed: 89, failed: 11,
			ttft:   s3(2.343219436988764, 2.369317693, 3.8333894000399996),
			tpot:   s3(0.027763065454471807, 0.027615130366666666, 0.03373224787406911),
			itl:    s3(0.027755153106189347, 0.022673047999999998, 0.14053429476),
			e2e:    s3(9.059654633033708, 9.097345014999999, 9.297609933759999),
			output: 2320.7222350404572, requests: 9.551622221540914, duration: 9.317788951, runNumber: -1,
			sourceDate: "2025-10-03T13:13:39.146443Z",
		},
		{
			// aiperf 0.11, profile-export schema 1.3: load in input_config.phases[] (the warm-up
			// phase skipped), model in input_config.models.items[], failures only in
			// error_summary (2), duration = end_time - start_time = 120 s.
			name: "aiperf 0.11 schema 1.3", file: "aiperf_profile_export_schema13_v011.json", format: FormatAIPerf,
			model: "Qwen/Qwen3-8B", loadKind: "concurrency", load: 16, completed: 480, failed: 2,
			ttft:   s3(0.0855, 0.0802, 0.1904),
			tpot:   s3(0.0142, 0.014, 0.0189),
			itl:    s3(0.0141, 0.0138, 0.025),
			e2e:    s3(3.7063, 3.65, 4.4107),
			output: 1024, requests: 4, duration: 120, runNumber: -1,
			sourceDate: "2025-11-05T10:00:00Z",
		},
		{
			// guidellm 0.5 with per-request data: request_throughput = completed / duration =
			// 9 / 56.04 (guidellm's own requests_per_second mean 0.1204 kept in tool_figures);
			// output tokens summed over requests.successful[] = 2290, so output_throughput =
			// 2290 / 56.04 and total = (9 x 512 + 2290) / 56.04.
			name: "guidellm 0.5 per-request", file: "guidellm_v05_requests.json", format: FormatGuideLLM,
			model: "Qwen/Qwen3-8B", loadKind: "concurrency", load: 4, completed: 9, failed: 0,
			ttft:   s3(0.1523, 0.1501, 0.2105),
			tpot:   s3(0.0241, 0.0241, 0.0241),
			e2e:    s3(6.152, 6.2954, 6.3544),
			output: 2290 / 56.04, requests: 9 / 56.04, duration: 56.04, runNumber: -1,
			toolRequestsPerSecond: 0.1204,
			wantTotalOutputTokens: 2290, wantTotalInputTokens: 4608, wantTotalTokenThroughput: (4608 + 2290) / 56.04,
		},
		{
			// llmperf summary with --metadata framework=sgl and an epoch timestamp (1762340400 =
			// 2025-11-05T11:00:00Z); request rate = completed per minute / 60. llmperf's
			// inter_token_latency includes TTFT: neither TPOT nor ITL.
			name: "llmperf framework, epoch date", file: "llmperf_summary_framework.json", format: FormatLLMPerf,
			model: "Qwen/Qwen3-8B", framework: "sglang", loadKind: "concurrency", load: 8, completed: 200, failed: 0,
			ttft:   s3(0.1276, 0.104, 0.338),
			e2e:    s3(3.968, 3.94, 4.91),
			output: 508.2, requests: 119.52 / 60, runNumber: -1,
			sourceDate: "2025-11-05T11:00:00Z", pointDate: "2025-11-05T11:00:00Z", wantTPOTInclTTFTOnly: true,
		},
	}
}

// TestImportRealFiles imports one real (or real-shaped, see testdata/README.md) file per tool and
// version and checks every figure against the values read from the file by hand.
func TestImportRealFiles(t *testing.T) {
	for _, row := range realRows() {
		t.Run(row.name, func(t *testing.T) {
			path := filepath.Join("testdata", row.file)
			im, err := ImportFile(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			if im.Format != row.format {
				t.Fatalf("format %s, want %s", im.Format, row.format)
			}
			f, _, err := Build("real", []*Import{im})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Assess(f, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio, KeepFailedPoints: true}); err != nil {
				t.Fatal(err)
			}
			b := f.Baselines[0]
			if row.pick != nil {
				b = find(t, f, row.pick)
			}
			if b.Model != row.model || b.Framework != row.framework {
				t.Errorf("model %q framework %q, want %q %q", b.Model, b.Framework, row.model, row.framework)
			}
			if len(row.serverParams) > 0 || len(b.ServerParams) > 0 {
				if serverParamsString(b.ServerParams) != serverParamsString(row.serverParams) {
					t.Errorf("server_params %v, want %v", b.ServerParams, row.serverParams)
				}
			}
			switch {
			case row.runNumber < 0 && b.RunNumber != nil:
				t.Errorf("run_number %d, want none", *b.RunNumber)
			case row.runNumber >= 0 && (b.RunNumber == nil || *b.RunNumber != row.runNumber):
				t.Errorf("run_number %v, want %d", b.RunNumber, row.runNumber)
			}
			if row.tool != "" && b.Source.Tool != row.tool {
				t.Errorf("tool %q, want %q", b.Source.Tool, row.tool)
			}
			if row.sourceDate != "" && b.Source.Date != row.sourceDate {
				t.Errorf("source date %q, want %q", b.Source.Date, row.sourceDate)
			}
			p := pointAt(t, b, row.loadKind, row.load)
			if row.pointDate != "" && p.Date != row.pointDate {
				t.Errorf("point date %q, want %q", p.Date, row.pointDate)
			}
			eqi(t, "completed", p.Completed, row.completed)
			if row.failed >= 0 {
				eqi(t, "failed", p.Failed, row.failed)
			}
			if p.FailedDerived != row.failedDerived {
				t.Errorf("failed_derived %v, want %v", p.FailedDerived, row.failedDerived)
			}
			for _, s := range []struct {
				name string
				got  *Stats
				want *stat3
			}{{"ttft", p.TTFT, row.ttft}, {"tpot", p.TPOT, row.tpot}, {"itl", p.ITL, row.itl}, {"e2e", p.E2E, row.e2e}} {
				if s.want == nil {
					if s.got != nil {
						t.Errorf("%s: %+v, want absent", s.name, s.got)
					}
					continue
				}
				if s.got == nil {
					t.Errorf("%s: absent", s.name)
					continue
				}
				eq(t, s.name+" mean", s.got.Mean, s.want[0])
				eq(t, s.name+" median", s.got.Median, s.want[1])
				if math.IsNaN(s.want[2]) {
					if pct(s.got, "p99") != nil {
						t.Errorf("%s p99 = %v, want absent", s.name, *pct(s.got, "p99"))
					}
				} else {
					eq(t, s.name+" p99", pct(s.got, "p99"), s.want[2])
				}
			}
			eq(t, "output tok/s", p.OutputThroughput, row.output)
			eq(t, "request rate", p.RequestThroughput, row.requests)
			if row.duration > 0 {
				eq(t, "duration", p.DurationSeconds, row.duration)
			}
			if row.toolRequestsPerSecond > 0 {
				if got := p.ToolFigures["requests_per_second.successful.mean"]; got != row.toolRequestsPerSecond {
					t.Errorf("tool requests_per_second %v, want %v", got, row.toolRequestsPerSecond)
				}
			}
			if row.dataset != "" && p.Dataset != row.dataset {
				t.Errorf("dataset %q, want %q", p.Dataset, row.dataset)
			}
			if row.numPrompts > 0 {
				eqi(t, "num_prompts", p.NumPrompts, row.numPrompts)
			}
			if row.wantTPOTInclTTFTOnly && p.TPOTInclTTFT == nil {
				t.Error("llmperf inter_token_latency not kept as tpot_incl_ttft")
			}
			if row.wantTotalOutputTokens > 0 {
				eqi(t, "total output tokens", p.TotalOutputTokens, row.wantTotalOutputTokens)
				eqi(t, "total input tokens", p.TotalInputTokens, row.wantTotalInputTokens)
				eq(t, "total tok/s", p.TotalTokenThroughput, row.wantTotalTokenThroughput)
			}
			// The written file reads back identically.
			data, err := f.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(data); err != nil {
				t.Fatalf("re-reading: %v\n%s", err, data)
			}
		})
	}
}

// TestGuideLLMOwnRateDiffers pins the finding: guidellm's requests_per_second mean is not
// completed / duration, and the importer keeps vLLM's definition.
func TestGuideLLMOwnRateDiffers(t *testing.T) {
	im, err := ImportFile(context.Background(), "testdata/guidellm_v05_requests.json")
	if err != nil {
		t.Fatal(err)
	}
	p := im.Baselines[0].Points[0]
	own := p.ToolFigures["requests_per_second.successful.mean"]
	if d := (*p.RequestThroughput - own) / own; !(d > 0.3) {
		t.Errorf("request_throughput %v vs guidellm's %v: want completed / duration, 33%% above", *p.RequestThroughput, own)
	}
}

func TestNamespaceLine(t *testing.T) {
	ns, ok := parseNamespace(`Namespace(backend='vllm', model='m/x', max_concurrency=None, request_rate=inf, metadata=['gpu=H100', 'a,b'], goodput={'ttft': 1}, tokenizer_mode='auto', served_model_name=None, note='it\'s')`)
	if !ok {
		t.Fatal("not parsed")
	}
	want := map[string]string{"backend": "vllm", "model": "m/x", "request_rate": "inf", "metadata": "['gpu=H100', 'a,b']",
		"goodput": "{'ttft': 1}", "tokenizer_mode": "auto", "note": "it's"}
	if len(ns) != len(want) {
		t.Errorf("got %v", ns)
	}
	for k, v := range want {
		if ns[k] != v {
			t.Errorf("%s = %q, want %q", k, ns[k], v)
		}
	}
	if _, ok := parseNamespace("no namespace here"); ok {
		t.Error("parsed a line without Namespace(")
	}
}

func TestMixedFrameworkJSONLTwoIdentities(t *testing.T) {
	f, _, _ := importAndBuild(t, "r1", "testdata/vllm_bench_serve_mixed_framework.jsonl")
	if len(f.Baselines) != 2 {
		t.Fatalf("%d baselines, want one per framework", len(f.Baselines))
	}
	names := map[string]string{}
	for _, b := range f.Baselines {
		names[b.Framework] = b.Name
	}
	if names["vllm"] != "r1/vllm" || names["sglang"] != "r1/sglang" {
		t.Errorf("names %v: want r1/vllm and r1/sglang, not a repeat (#2)", names)
	}
}

func TestSweepServerParamsAndRunsAreIdentity(t *testing.T) {
	f, _, _ := importAndBuild(t, "opt", "testdata/vllm_sweep_summary_v0251_seqs4.json", "testdata/vllm_sweep_summary_v0251_seqs8.json")
	var names []string
	for _, b := range f.Baselines {
		names = append(names, b.Name)
	}
	want := "opt/max_num_seqs=4/run0 opt/max_num_seqs=4/run1 opt/max_num_seqs=8/run0 opt/max_num_seqs=8/run1"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("baselines %s, want %s", got, want)
	}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"server_params:\n    max_num_seqs: \"4\"", "run_number: 1"} {
		if !strings.Contains(string(data), s) {
			t.Errorf("written file lacks %q", s)
		}
	}
}

func TestAllFailedRunRefused(t *testing.T) {
	f, _, _ := importAndBuild(t, "dead", "testdata/vllm_bench_serve_allfailed_v0251.json")
	notes, err := Assess(f, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio})
	if !errors.Is(err, ErrNoUsablePoint) {
		t.Fatalf("err %v, want ErrNoUsablePoint", err)
	}
	for _, want := range []string{`baseline "dead"`, "every request of its run failed", "--force"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(notes) == 0 || !strings.Contains(notes[0], "every request failed (8 failed)") {
		t.Errorf("notes %q", notes)
	}

	// Forced: written, marked unusable, and refused on load.
	f, _, _ = importAndBuild(t, "dead", "testdata/vllm_bench_serve_allfailed_v0251.json")
	if _, err := Assess(f, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio, Force: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Baselines[0].Unusable, "--force") {
		t.Errorf("unusable %q", f.Baselines[0].Unusable)
	}
	path := writeFile(t, f)
	_, err = ReadFile(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `baseline "dead" has no usable point`) {
		t.Errorf("ReadFile error %v: want the file and the baseline named", err)
	}
}

func TestPartialRunMarked(t *testing.T) {
	// 31 of 50 completed, no "failed" key.
	f, _, _ := importAndBuild(t, "partial", "testdata/vllm_bench_serve_partial_v081.json")
	notes, err := Assess(f, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	p := &f.Baselines[0].Points[0]
	eqi(t, "failed", p.Failed, 19)
	if !p.FailedDerived || p.Usable() || !strings.Contains(p.Excluded, "success ratio 0.62 is below the minimum 0.99") {
		t.Errorf("derived %v usable %v excluded %q", p.FailedDerived, p.Usable(), p.Excluded)
	}
	joined := strings.Join(notes, "\n")
	for _, want := range []string{"derived failed = num_prompts - completed = 50 - 31 = 19", "19 of 50 requests failed (success ratio 0.62)", "excluded from expected values"} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes lack %q:\n%s", want, joined)
		}
	}
	if got := f.Baselines[0].SaturationOutputThroughput(); got != 0 {
		t.Errorf("saturation %v: an excluded point must not feed it", got)
	}
	// The mark survives the file.
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if bp := back.Baselines[0].Points[0]; bp.Excluded == "" || !bp.FailedDerived || *bp.Failed != 19 {
		t.Errorf("re-read point %+v lost the marks", bp)
	}

	// --keep-failed-points keeps it usable, still reported.
	f, _, _ = importAndBuild(t, "partial", "testdata/vllm_bench_serve_partial_v081.json")
	notes, err = Assess(f, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio, KeepFailedPoints: true})
	if err != nil || !f.Baselines[0].Points[0].Usable() || !strings.Contains(strings.Join(notes, "\n"), "kept (--keep-failed-points)") {
		t.Errorf("keep: err %v, usable %v, notes %q", err, f.Baselines[0].Points[0].Usable(), notes)
	}
	if got := f.Baselines[0].SaturationOutputThroughput(); got != 2865.57239456823 {
		t.Errorf("kept point's saturation %v", got)
	}

	// Without --force or --keep-failed-points the only point is excluded: refused.
	f, _, _ = importAndBuild(t, "partial", "testdata/vllm_bench_serve_partial_v081.json")
	if _, err := Assess(f, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio}); !errors.Is(err, ErrNoUsablePoint) || !strings.Contains(err.Error(), "--keep-failed-points") {
		t.Errorf("err %v", err)
	}
}

func TestExcludedPointLeftOutOfInterpolation(t *testing.T) {
	b := &Baseline{Name: "b", Source: Source{Tool: ToolVLLMServe}, Points: []Point{
		{Concurrency: lp(1), OutputThroughput: fp(100), Completed: ip(100), Failed: ip(0)},
		{Concurrency: lp(4), OutputThroughput: fp(900), Completed: ip(60), Failed: ip(40)},
		{Concurrency: lp(8), OutputThroughput: fp(500), Completed: ip(100), Failed: ip(0)},
	}}
	f := &File{Version: FormatVersion, Baselines: []*Baseline{b}}
	if _, err := Assess(f, AssessOptions{MinSuccessRatio: 0.99}); err != nil {
		t.Fatal(err)
	}
	if got := b.SaturationOutputThroughput(); got != 500 {
		t.Errorf("saturation %v, want 500 (the 0.6 point excluded)", got)
	}
	e, ok := b.Expected(4)
	if !ok || math.Abs(e.OutputThroughput-(100+400*3.0/7)) > 1e-9 {
		t.Errorf("expected at 4 = %+v: want interpolation between 1 and 8 only", e)
	}
}

func TestNormalizeDate(t *testing.T) {
	for in, want := range map[string]string{
		"20250414-151938":                  "2025-04-14T15:19:38Z",
		"1762340400":                       "2025-11-05T11:00:00Z",
		"1762340400000":                    "2025-11-05T11:00:00Z",
		"2025-10-03T13:13:39.146443":       "2025-10-03T13:13:39.146443Z",
		"2025-11-05T10:00:00.000000+02:00": "2025-11-05T10:00:00+02:00",
		"yesterday":                        "yesterday",
		"20250414":                         "2025-04-14T00:00:00Z",
		"1762340400.5":                     "2025-11-05T11:00:00.5Z",
	} {
		if got := normalizeDate(in); got != want {
			t.Errorf("normalizeDate(%q) = %q, want %q", in, got, want)
		}
	}
}

func writeFile(t *testing.T, f *File) string {
	t.Helper()
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPrintedBlockNoneIsUnset(t *testing.T) {
	text := "Namespace(model='org/m', request_rate=2.0, max_concurrency=None, num_prompts=10, dataset_name='random', random_input_len=512, random_output_len=128)\n" +
		"============ Serving Benchmark Result ============\n" +
		"Successful requests:                     10\n" +
		"Maximum request concurrency:            None\n" +
		"Benchmark duration (s):                  5.00\n" +
		"Request throughput (req/s):              2.00\n" +
		"==================================================\n"
	im, err := ImportBytes("none.log", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	b := im.Baselines[0]
	p := b.Points[0]
	if b.Model != "org/m" || p.Concurrency != nil || p.RequestRate == nil || *p.RequestRate != 2 || p.Dataset != "random" {
		t.Errorf("model %q concurrency %v rate %v dataset %q", b.Model, p.Concurrency, p.RequestRate, p.Dataset)
	}
	eqi(t, "input_len", p.InputLen, 512)
	eqi(t, "output_len", p.OutputLen, 128)
	eqi(t, "num_prompts", p.NumPrompts, 10)
}

func TestReassessClearsExclusion(t *testing.T) {
	f, _, _ := importAndBuild(t, "partial", "testdata/vllm_bench_serve_partial_v081.json")
	if _, err := Assess(f, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio, Force: true}); err != nil {
		t.Fatal(err)
	}
	// Re-importing the written file with --keep-failed-points makes the point usable again.
	im, err := ImportFile(context.Background(), writeFile(t, f))
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := Build("partial", []*Import{im})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Assess(g, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio, KeepFailedPoints: true}); err != nil {
		t.Fatal(err)
	}
	if b := g.Baselines[0]; !b.Points[0].Usable() || b.Unusable != "" {
		t.Errorf("excluded %q unusable %q after re-import with --keep-failed-points", b.Points[0].Excluded, b.Unusable)
	}
}

func TestSweepRunFileIdentity(t *testing.T) {
	// A sweep's run=N.json is one such record: the same identity as in summary.json.
	rec := `{"date": "20260818-021403", "model_id": "facebook/opt-125m", "num_prompts": 8, "request_rate": "inf", "max_concurrency": 2, "duration": 0.6863886729988735, "completed": 8, "failed": 0, "request_throughput": 11.655203989668882, "output_throughput": 186.48326383470211, "run_number": 1, "max_num_seqs": 8}`
	im, err := ImportBytes("run=1.json", []byte(rec))
	if err != nil {
		t.Fatal(err)
	}
	b := im.Baselines[0]
	if b.RunNumber == nil || *b.RunNumber != 1 || b.ServerParams["max_num_seqs"] != "8" || len(b.ServerParams) != 1 {
		t.Errorf("run %v params %v", b.RunNumber, b.ServerParams)
	}
}

// A baseline without a model contributes no name part (filepath.Base("") would name it "x/.").
func TestNameWithoutModel(t *testing.T) {
	out := []*Baseline{{Model: "meta-llama/Llama-3.1-8B"}, {}, {Model: "/data/llm/Qwen2.5-7B/"}}
	nameBaselines("x", out)
	want := []string{"x/Llama-3.1-8B", "x", "x/Qwen2.5-7B"}
	for i, b := range out {
		if b.Name != want[i] {
			t.Errorf("baseline %d named %q, want %q", i, b.Name, want[i])
		}
	}
}

// TestPlacementProblem: a usable baseline whose points cannot be placed on the concurrency axis
// (a request rate with TTFT and ITL only, like vLLM CI's older serving table) gives no expected
// values; import says so, once for a whole report table.
func TestPlacementProblem(t *testing.T) {
	b := &Baseline{Name: "ci", Points: []Point{{RequestRate: lp(4), RequestThroughput: fp(3.9), TTFT: &Stats{Mean: fp(0.04)}}}}
	if why := b.PlacementProblem(); !strings.Contains(why, "none of its 1 usable points can be placed") {
		t.Errorf("PlacementProblem = %q", why)
	}
	if _, ok := b.Expected(4); ok {
		t.Error("Expected placed a point PlacementProblem calls unplaceable")
	}
	b.Points[0].Concurrency = lp(4)
	if why := b.PlacementProblem(); why != "" {
		t.Errorf("a concurrency point: %q", why)
	}

	f, _, _ := importAndBuild(t, "lambda", "testdata/reports/lambda-a100-h100-report.md")
	notes, err := Assess(f, AssessOptions{MinSuccessRatio: DefaultMinSuccessRatio})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "48 baselines (") || !strings.Contains(notes[0], "give no expected values") {
		t.Errorf("notes %q: want one note for the 48 unplaceable baselines", notes)
	}
}

// TestGenAIPerfInvalidGoodput: genai-perf writes request_goodput {"avg": "-1.0"} when it cannot
// evaluate the --goodput constraints (perf_analyzer genai-perf/tests/test_json_exporter.py,
// test_invalid_goodput_json_output). The file imports without a goodput, with a note.
func TestGenAIPerfInvalidGoodput(t *testing.T) {
	data := `{"request_throughput": {"unit": "requests/sec", "avg": "7"}, "request_goodput": {"unit": "requests/sec", "avg": "-1.0"},
		"time_to_first_token": {"unit": "ms", "avg": 11, "p50": 16, "p99": 12}, "output_token_throughput": {"unit": "tokens/sec", "avg": 31},
		"input_config": {"model": ["gpt2_vllm"], "concurrency": 1, "request_rate": null}}`
	im, err := ImportBytes("profile_export_genai_perf.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	p := im.Baselines[0].Points[0]
	if p.RequestGoodput != nil || p.RequestThroughput == nil || *p.RequestThroughput != 7 {
		t.Errorf("goodput %v request throughput %v: want no goodput and 7 req/s", p.RequestGoodput, p.RequestThroughput)
	}
	if len(im.Notes) != 1 || !strings.Contains(im.Notes[0], `"request_goodput" is -1`) {
		t.Errorf("notes %q", im.Notes)
	}
}

// TestSGLangBlockSentinels: newer SGLang bench_serving blocks say "Max request concurrency: not
// set" and print -1 for what they did not measure (here a simulated run, as printed in the
// HiSim README); those are unset, with a note, not a refused file or negative figures.
func TestSGLangBlockSentinels(t *testing.T) {
	text := `============ Serving Benchmark Result ============
Benchmark Mode:                          simulation
Backend:                                 lmdeploy  
Traffic request rate:                    inf       
Max request concurrency:                 not set   
Successful requests:                     50        
Benchmark duration (s):                  20.36     
Total input tokens:                      51513     
Total input text tokens:                 -1        
Total generated tokens:                  51200     
Request throughput (req/s):              2.46      
Output token throughput (tok/s):         2514.64   
Peak output token throughput (tok/s):    -1.00     
Peak concurrent requests:                -1        
Total token throughput (tok/s):          5044.66   
----------------End-to-End Latency----------------
Mean E2E Latency (ms):                   9509.61   
==================================================
`
	im, err := ImportBytes("sim.txt", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	b := im.Baselines[0]
	p := b.Points[0]
	if b.Framework != "lmdeploy" || b.Source.Tool != ToolSGLangBenchServing || p.Concurrency != nil || p.RequestRate == nil ||
		p.PeakOutputThroughput != nil || p.PeakConcurrency != nil || p.E2E == nil || *p.E2E.Mean != 9.50961 {
		t.Errorf("baseline %+v point %+v", b, p)
	}
	notes := strings.Join(im.Notes, "\n")
	for _, want := range []string{`"Peak output token throughput (tok/s)" is -1.00, the tool's mark for not measured`, `"Benchmark Mode" is not a baseline metric`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// TestSGLangOutputFileRecord: a line of SGLang bench_serving's --output-file (the record of its
// source, bench_serving.py): E2E under *_e2e_latency_ms, the backend as framework, total_throughput
// as the total token throughput, Python's Infinity as the rate, and its measured "concurrency" not
// taken for the load level.
func TestSGLangOutputFileRecord(t *testing.T) {
	rec := `{"backend": "sglang", "dataset_name": "sharegpt", "request_rate": Infinity, "max_concurrency": null, "duration": 100.0,
		"completed": 1000, "total_input_tokens": 302118, "total_output_tokens": 195775, "total_output_tokens_retokenized": 195324,
		"request_throughput": 10.0, "output_throughput": 1957.75, "total_throughput": 4978.93, "mean_e2e_latency_ms": 5000.5,
		"p99_e2e_latency_ms": 9813.9, "mean_ttft_ms": 91.7, "mean_tpot_ms": 11.8, "mean_itl_ms": 11.9, "concurrency": 50.0}`
	im, err := ImportBytes("sglang.jsonl", []byte(rec))
	if err != nil {
		t.Fatal(err)
	}
	b := im.Baselines[0]
	p := b.Points[0]
	if b.Source.Tool != ToolSGLangBenchServing || b.Framework != "sglang" || p.Concurrency != nil || p.RequestRate == nil ||
		!math.IsInf(float64(*p.RequestRate), 1) || p.E2E == nil || *p.E2E.Mean != 5.0005 || *pct(p.E2E, "p99") != 9.8139 ||
		p.TotalTokenThroughput == nil || *p.TotalTokenThroughput != 4978.93 {
		t.Errorf("baseline %+v point %+v", b, p)
	}
}

// TestNamespaceMetadata: vllm bench serve's --metadata KEY=VALUE pairs, printed in its Namespace
// line, give a text log what they give the --save-result JSON: hardware, framework, parallelism.
func TestNamespaceMetadata(t *testing.T) {
	text := `Namespace(subparser='bench', bench_type='serve', dispatch_function=<function BenchmarkServingSubcommand.cmd at 0x7f1c2a3b4c10>, num_prompts=100, dataset_name='random', random_input_len=512, random_output_len=128, model='Qwen/Qwen3-8B', max_concurrency=16, request_rate=inf, metadata=['gpu=H100', 'framework=vllm', 'tensor_parallel_size=2'])
============ Serving Benchmark Result ============
Successful requests:                     100
Failed requests:                         0
Maximum request concurrency:             16
Benchmark duration (s):                  10.00
Request throughput (req/s):              10.00
Output token throughput (tok/s):         1280.00
Mean TTFT (ms):                          50.00
==================================================
`
	im, err := ImportBytes("run.log", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	b := im.Baselines[0]
	if b.Model != "Qwen/Qwen3-8B" || b.Hardware != "H100" || b.Framework != "vllm" || b.Parallelism == nil || b.Parallelism.TP != 2 {
		t.Errorf("baseline %+v", b)
	}
	p := b.Points[0]
	if p.Dataset != "random" || p.InputLen == nil || *p.InputLen != 512 || p.NumPrompts == nil || *p.NumPrompts != 100 {
		t.Errorf("point %+v", p)
	}
}
