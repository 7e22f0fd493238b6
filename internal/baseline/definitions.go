package baseline

// Tool names recorded in source.tool.
const (
	ToolVLLMServe = "vllm bench serve"
	// ToolSGLangBenchServing is SGLang's python -m sglang.bench_serving, a fork of vLLM's
	// benchmark_serving.py that prints the same result block with the same definitions.
	ToolSGLangBenchServing = "sglang bench_serving"
	ToolVLLMCI             = "vllm CI performance benchmarks"
	ToolGuideLLM           = "guidellm"
	ToolAIPerf             = "aiperf"
	ToolGenAIPerf          = "genai-perf"
	ToolLLMPerf            = "llmperf"
	ToolPresetScript       = "preset benchmark script (polls /metrics)"
	ToolInferencePerf      = "inference-perf"
)

// vllmDefinitions are the definitions of vLLM's benchmark_serving.py / vllm bench serve
// (backend_request_func.py's request timing and calculate_metrics), which vLLM's CI reuses.
var vllmDefinitions = map[string]string{
	"ttft_seconds":             "client: first SSE chunk with non-empty choices minus the time just before the POST (vLLM *_ttft_ms / 1000)",
	"tpot_seconds":             "client, per request (E2E - TTFT)/(output_tokens - 1) for requests with more than one output token, then averaged over requests (vLLM *_tpot_ms / 1000)",
	"itl_seconds":              "client: gaps between successive choices-bearing SSE chunks, pooled over all requests, chunk-weighted (vLLM *_itl_ms / 1000)",
	"e2e_seconds":              "client: last choices-bearing SSE chunk minus the time just before the POST (vLLM *_e2el_ms / 1000; only when --percentile-metrics included e2el)",
	"output_throughput":        "sum of output tokens (server usage) / benchmark duration, tokens/s",
	"total_token_throughput":   "(input + output tokens) / benchmark duration, tokens/s",
	"input_throughput":         "input tokens / benchmark duration, tokens/s (v0.5-era files only)",
	"request_throughput":       "completed requests / benchmark duration, requests/s",
	"request_goodput":          "requests meeting every --goodput SLO / benchmark duration, requests/s (key \"request_goodput:\" in benchmark_serving.py files)",
	"slo_attainment":           "derived on import: round(request_goodput × duration) / (completed + failed), failed requests counted against it",
	"goodput_objectives":       "vLLM's --goodput: from the Namespace(...) line of a printed log, else baseline import --goodput (--save-result does not store them)",
	"peak_output_throughput":   "largest 1-second bucket of streamed chunks (max_output_tokens_per_s)",
	"peak_concurrent_requests": "sweep-line peak of requests in flight (max_concurrent_requests)",
	"completed":                "successful requests",
	"failed":                   "failed requests (derived as num_prompts - completed when the file has no failed count: failed_derived)",
	"duration_seconds":         "benchmark duration: from the start of the dispatch loop to the end of the last request",
}

var toolDefinitions = map[string]map[string]string{
	ToolVLLMServe:          vllmDefinitions,
	ToolSGLangBenchServing: vllmDefinitions,
	ToolVLLMCI:             vllmDefinitions,
	ToolGuideLLM: {
		"ttft_seconds":           "guidellm time_to_first_token_ms: first token iteration - request start (ms / 1000)",
		"tpot_seconds":           "guidellm inter_token_latency_ms: (last_token - first_token)/(output_tokens - 1), token-weighted; this is vLLM's TPOT despite the name",
		"tpot_incl_ttft_seconds": "guidellm time_per_output_token_ms: (last_token - request_start)/output_tokens, includes TTFT (v0.3: (last - first)/output_tokens); NOT vLLM's TPOT",
		"e2e_seconds":            "guidellm request_latency: request_end - request_start (already seconds)",
		"output_throughput":      "vLLM's definition: output tokens of the successful requests (metrics.output_token_count.successful.total_sum, or the sum over requests.successful[]) / benchmark duration; guidellm's own output_tokens_per_second.successful.mean (a duration-weighted rate) is in tool_figures, and is used only for a benchmark without token totals",
		"request_throughput":     "vLLM's definition: successful requests (request_totals.successful) / benchmark duration; guidellm's own requests_per_second.successful.mean is in tool_figures",
		"total_token_throughput": "vLLM's definition: (prompt + output tokens of the successful requests) / benchmark duration; guidellm's own tokens_per_second.successful.mean is in tool_figures",
		"total_input_tokens":     "prompt tokens of the successful requests",
		"total_output_tokens":    "output tokens of the successful requests",
		"duration_seconds":       "guidellm benchmark duration",
		"tool_figures":           "guidellm's own aggregates, under guidellm's names",
		"itl_seconds":            "not reported by guidellm (no pooled chunk-gap series)",
		"completed":              "successful requests",
		"failed":                 "errored requests (incomplete requests are not counted)",
	},
	ToolAIPerf: {
		"ttft_seconds":                  "aiperf time_to_first_token: first response - request start",
		"tpot_seconds":                  "aiperf inter_token_latency: (request_latency - TTFT)/(OSL - 1); this is vLLM's TPOT despite the name",
		"itl_seconds":                   "aiperf inter_chunk_latency: gaps between response chunks (= vLLM ITL)",
		"e2e_seconds":                   "aiperf request_latency: last response - request start",
		"output_throughput":             "aiperf output_token_throughput.avg: total output tokens / benchmark duration",
		"request_throughput":            "aiperf request_throughput.avg: requests / benchmark duration",
		"request_goodput":               "aiperf goodput.avg",
		"slo_attainment":                "aiperf good_request_count / (request_count + error_request_count), else round(goodput × duration) / (request_count + error_request_count)",
		"goodput_objectives":            "aiperf --goodput (input_config ... goodput, ms): time_to_first_token -> ttft, inter_token_latency -> tpot (vLLM's TPOT), request_latency -> e2e",
		"output_throughput_per_request": "aiperf output_token_throughput_per_user (1/ITL)",
		"completed":                     "aiperf request_count",
		"failed":                        "aiperf error_request_count, else the sum of error_summary[].count",
		"duration_seconds":              "aiperf benchmark_duration, else end_time - start_time",
		"total_input_tokens":            "aiperf total_isl: input tokens of the successful requests (client tokenizer)",
		"total_output_tokens":           "aiperf total_osl (else total_output_tokens): output tokens of the successful requests",
		"total_token_throughput":        "aiperf total_token_throughput.avg: (total_isl + total_osl) / benchmark duration",
	},
	ToolGenAIPerf: {
		"ttft_seconds":                  "genai-perf time_to_first_token: first response - request start",
		"tpot_seconds":                  "genai-perf inter_token_latency: (request_latency - TTFT)/(OSL - 1); this is vLLM's TPOT despite the name (older releases: per-chunk latency)",
		"e2e_seconds":                   "genai-perf request_latency: last response - request start",
		"output_throughput":             "genai-perf output_token_throughput.avg: sum(OSL) / duration (client tokenizer counts)",
		"request_throughput":            "genai-perf request_throughput.avg: requests / duration",
		"request_goodput":               "genai-perf request_goodput.avg",
		"slo_attainment":                "round(request_goodput × duration) / (completed + failed), when the file has the counts",
		"goodput_objectives":            "genai-perf --goodput (input_config goodput, ms): time_to_first_token -> ttft, inter_token_latency -> tpot, request_latency -> e2e",
		"output_throughput_per_request": "genai-perf output_token_throughput_per_request: OSL / request latency",
		"itl_seconds":                   "not reported by genai-perf",
	},
	ToolLLMPerf: {
		"ttft_seconds":                  "llmperf ttft_s: first chunk with non-empty delta.content - request start",
		"tpot_incl_ttft_seconds":        "llmperf inter_token_latency_s: sum(time_to_next_token)/tokens_received, INCLUDES TTFT; neither vLLM's TPOT nor its ITL",
		"e2e_seconds":                   "llmperf end_to_end_latency_s: until the stream closes",
		"output_throughput":             "llmperf mean_output_throughput_token_per_s: sum(tokens of non-error requests) / test duration (llama tokenizer counts)",
		"request_throughput":            "llmperf num_completed_requests_per_min / 60",
		"output_throughput_per_request": "llmperf request_output_throughput_token_per_s: tokens / E2E per request",
		"completed":                     "llmperf num_completed_requests",
		"failed":                        "llmperf number_errors",
		"tpot_seconds":                  "not reported by llmperf",
		"itl_seconds":                   "not reported by llmperf",
	},
	ToolInferencePerf: {
		"ttft_seconds":           "inference-perf time_to_first_token: first output token time - request start (tokens timed by the chunk that carried them)",
		"tpot_seconds":           "inference-perf time_per_output_token: (last token - first token)/(output tokens - 1), vLLM's TPOT",
		"itl_seconds":            "inference-perf inter_token_latency: gaps between successive output tokens, pooled; the tokens of one chunk share its arrival time, so gaps inside a chunk are 0 (vLLM's ITL is per chunk)",
		"e2e_seconds":            "inference-perf request_latency: request end - request start",
		"tpot_incl_ttft_seconds": "inference-perf normalized_time_per_output_token: request latency / output tokens, includes TTFT",
		"request_throughput":     "inference-perf successes.throughput.requests_per_sec: successful requests / stage duration",
		"output_throughput":      "inference-perf output_tokens_per_sec: output tokens of the successful requests / stage duration",
		"input_throughput":       "inference-perf input_tokens_per_sec: prompt tokens of the successful requests / stage duration",
		"total_token_throughput": "inference-perf total_tokens_per_sec",
		"request_goodput":        "inference-perf goodput_metrics.request_goodput: good requests / stage duration",
		"token_goodput":          "inference-perf goodput_metrics.token_goodput: prompt + output tokens of the good requests / stage duration",
		"slo_attainment":         "good_requests / (successes.count + failures.count): failures counted against it; inference-perf's own goodput_percentage (good / successful requests) is in tool_figures",
		"goodput_objectives":     "not in the lifecycle report (its config.yaml's report.goodput.constraints: ttft, tpot, itl, ntpot, request_latency in seconds): baseline import --goodput",
		"tool_figures":           "inference-perf's goodput_percentage and <constraint>_attainment_percentage (of the successful requests, 0-100)",
		"completed":              "inference-perf successes.count",
		"failed":                 "inference-perf failures.count",
		"num_prompts":            "inference-perf load_summary.count",
		"duration_seconds":       "inference-perf benchmark_time_seconds: last request end - first request start",
	},
	ToolPresetScript: {
		"input_throughput":              "\"Prompt TPS\": rate of the server's prompt_tokens_total polled every second over the run",
		"output_throughput":             "\"Gen TPS\": rate of the server's generation_tokens_total polled every second over the run",
		"e2e_seconds":                   "\"Avg Latency (s)\": mean client request latency (mean only)",
		"output_throughput_per_request": "\"Request Generation Level TPS\": mean over requests of generated tokens / request latency",
		"input_throughput_per_request":  "\"Request Prompt Level TPS\": mean over requests of prompt tokens / request latency",
		"failed":                        "\"Errors\": failed requests (e.g. OOM, network)",
		"completed":                     "total requests from the heading minus Errors",
	},
}

var percentileMethods = map[string]string{
	ToolVLLMServe:          "numpy.percentile linear (Hyndman-Fan type 7)",
	ToolSGLangBenchServing: "numpy.percentile linear (Hyndman-Fan type 7)",
	ToolVLLMCI:             "numpy.percentile linear (Hyndman-Fan type 7)",
	ToolGuideLLM:           "weighted lower inverse CDF, no interpolation",
	ToolAIPerf:             "numpy.percentile linear",
	ToolGenAIPerf:          "numpy.percentile linear",
	ToolLLMPerf:            "pandas Series.quantile linear",
	ToolPresetScript:       "none (means only)",
	ToolInferencePerf:      "numpy.percentile linear",
}

func definitionsFor(tool string) map[string]string {
	d := toolDefinitions[tool]
	out := make(map[string]string, len(d))
	for k, v := range d {
		out[k] = v
	}
	return out
}

func percentileMethodFor(tool string) string { return percentileMethods[tool] }
