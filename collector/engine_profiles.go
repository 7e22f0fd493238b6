package collector

import "strings"

// profiles are the engines the collector reads, in detection order: the
// first whose Detect families a payload carries is picked. vLLM and the
// engines exporting vLLM's names under another prefix come first; NIM's
// bare vLLM names come last, after TensorRT-LLM, whose older unprefixed
// names overlap them.
var profiles = []*Profile{
	vllmProfile, rayProfile, sglangProfile, trtllmProfile, tritonProfile, llamacppProfile, dynamoProfile, nimProfile,
}

// vllmDetect lists the families that identify a vLLM-named payload under
// prefix (in place of "vllm:").
func vllmDetect(prefix string) []string {
	names := append(append([]string{}, engineFamilies...), v0OnlyFamilies...)
	names = append(names, mGPUCacheUsage, mGPUPrefixQ, mGPUPrefixH, mSleepState)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + strings.TrimPrefix(n, "vllm:")
	}
	return out
}

// vLLM: its own names, decided into schema eras by schema() (snapshot.go).
// Families from vllm-project/vllm vllm/v1/metrics/loggers.py
// @a6f0308cfe806b7731ad4979c9bea6e470c35efd (PrometheusStatLogger: labels
// model_name and engine) and vllm/engine/metrics.py (V0); the sleep state
// from later releases of the same loggers.py (vllm:engine_sleep_state,
// sleep_state="awake"|"weights_offloaded"|"discard_all", as the vLLM 0.29.0
// capture in testdata has it); speculative decoding from
// vllm/v1/spec_decode/metrics.py @ee4ceaae5953d367d8edd2132fd86d6c42506e1e
// (SpecDecodingProm: num_drafts, num_draft_tokens, num_accepted_tokens;
// mean acceptance length = 1 + accepted / drafts).
var vllmProfile = vllmLike("vllm", "vllm:")

// Ray Serve LLM re-exports vLLM's families through Ray's metrics agent
// (vLLM's RayPrometheusStatLogger, vllm-project/vllm
// vllm/v1/metrics/ray_wrappers.py @63c2b7abcd705edb754604f83ac72a4269c05a52,
// which sanitises names for OpenTelemetry, ':' to '_'): the "vllm:" prefix
// becomes "ray_vllm:" in older releases and "ray_vllm_" in newer ones, next
// to Ray's own labels (WorkerId, ReplicaId, ...) and model_name.
var rayProfile = vllmLike("ray", "ray_vllm:", "ray_vllm_")

// NVIDIA NIM for LLMs serves vLLM's families without the "vllm:" prefix
// (num_requests_running, gpu_cache_usage_perc, time_to_first_token_seconds,
// ... with model_name), per NVIDIA's NIM for LLMs documentation
// ("Observability"): NIM's source is not public, so no file or commit.
var nimProfile = vllmLike("nim", "")

// vllmLike is the profile of an engine that serves vLLM's own families
// under prefixes: detected by them, read as vLLM's, with sleep mode.
func vllmLike(engine string, prefixes ...string) *Profile {
	var detect []string
	for _, p := range prefixes {
		detect = append(detect, vllmDetect(p)...)
	}
	return &Profile{Engine: engine, Detect: detect, VLLMPrefixes: prefixes, EngineLabel: lEngine, Sleep: true}
}

// SGLang: sgl-project/sglang python/sglang/srt/metrics/collector.py
// @00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538 (SchedulerMetricsCollector,
// TokenizerMetricsCollector). Labels model_name (name before 0.4), plus
// tp_rank/pp_rank/dp_rank. 0.3 named the queue gauges num_requests_running
// and num_requests_waiting, and the inter-token histogram was
// time_per_output_token_seconds before inter_token_latency_seconds. No sleep
// mode, no request-success counter by reason; speculative decoding is only
// a per-batch gauge (spec_accept_rate), not counters.
var sglangProfile = &Profile{
	Engine: "sglang",
	Detect: []string{
		"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_requests_running",
		"sglang:token_usage", "sglang:prompt_tokens_total", "sglang:generation_tokens_total",
		"sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
	},
	ModelLabels: []string{"model_name", "name"},
	EngineLabel: "dp_rank",
	Scalars: []ScalarRule{
		scalarRule(FieldRunning, "sglang:num_running_reqs", "sglang:num_requests_running"),
		scalarRule(FieldWaiting, "sglang:num_queue_reqs", "sglang:num_requests_waiting"),
		{Field: FieldKVUsage, Max: true, Sources: []Source{{Family: "sglang:token_usage"}}},
		scalarRule(FieldKVCapacityTokens, "sglang:max_total_num_tokens"),
		scalarRule(FieldPromptTokens, "sglang:prompt_tokens_total"),
		scalarRule(FieldGenerationTokens, "sglang:generation_tokens_total"),
		scalarRule(FieldPreemptions, "sglang:num_retracted_requests_total"),
		// Prompt tokens looked up in the radix cache, and those found there.
		scalarRule(FieldPrefixCacheQueries, "sglang:prompt_tokens_total"),
		scalarRule(FieldPrefixCacheHits, "sglang:cached_tokens_total"),
		// Requests whose KV cache transfer failed (prefill/decode disaggregation).
		scalarRule(FieldKVTransferFailures, "sglang:num_transfer_failed_reqs_total"),
	},
	Histograms: []HistRule{
		histRule(HistTTFT, "sglang:time_to_first_token_seconds"),
		histRule(HistITL, "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
		histRule(HistE2E, "sglang:e2e_request_latency_seconds"),
		histRule(HistQueue, "sglang:queue_time_seconds"),
		histRule(HistGenerationTokensPerRequest, "sglang:generation_tokens_histogram"),
		// Prefill/decode disaggregation (newer builds; a gauge before, not
		// read): the KV transfer's latency in milliseconds.
		{Field: HistKVTransfer, Sources: []HistSource{{Family: "sglang:kv_transfer_latency_ms", Scale: 1e-3}}},
	},
}

// TensorRT-LLM's trtllm-serve: NVIDIA/TensorRT-LLM
// tensorrt_llm/metrics/collector.py @050f80def8df236e326949c8bd9dee10fd896a83
// (MetricsCollector, metric_prefix "trtllm_"; labels model_name and
// engine_type). Releases before the prefix exported the same names bare on
// /prometheus/metrics; each source lists the prefixed name first.
// request_success_total is labelled by finished_reason, as vLLM's. No
// sleep mode; speculative decoding counts draft and accepted tokens but
// not drafts.
var trtllmProfile = &Profile{
	Engine: "trtllm",
	Detect: []string{
		"trtllm_num_requests_running", "trtllm_kv_cache_utilization", "trtllm_e2e_request_latency_seconds",
		"trtllm_time_to_first_token_seconds", "trtllm_request_success_total", "kv_cache_utilization",
	},
	ModelLabels: []string{"model_name"},
	Scalars: []ScalarRule{
		{Field: FieldRunning, Sources: trtllmNames("num_requests_running")},
		{Field: FieldWaiting, Sources: trtllmNames("num_requests_waiting")},
		{Field: FieldKVUsage, Max: true, Sources: trtllmNames("kv_cache_utilization")},
		{Field: FieldKVCapacityTokens, Sources: []Source{
			{Family: "trtllm_kv_cache_max_blocks", Times: &Source{Family: "trtllm_kv_cache_tokens_per_block"}},
		}},
		{Field: FieldPromptTokens, Sources: trtllmNames("prompt_tokens_total")},
		{Field: FieldGenerationTokens, Sources: trtllmNames("generation_tokens_total")},
		{Field: FieldSpecDraftTokens, Sources: trtllmNames("spec_decode_num_draft_tokens_total")},
		{Field: FieldSpecAcceptedTokens, Sources: trtllmNames("spec_decode_num_accepted_tokens_total")},
	},
	Histograms: []HistRule{
		{Field: HistTTFT, Sources: trtllmHist("time_to_first_token_seconds")},
		{Field: HistITL, Sources: trtllmHist("time_per_output_token_seconds")},
		{Field: HistE2E, Sources: trtllmHist("e2e_request_latency_seconds")},
		{Field: HistQueue, Sources: trtllmHist("request_queue_time_seconds")},
		{Field: HistPrefill, Sources: trtllmHist("request_prefill_time_seconds")},
	},
	RequestSuccess: []string{"trtllm_request_success_total", "request_success_total"},
}

// scalarRule is the rule reading field from the first of families present.
func scalarRule(field Field, families ...string) ScalarRule {
	r := ScalarRule{Field: field}
	for _, f := range families {
		r.Sources = append(r.Sources, Source{Family: f})
	}
	return r
}

// histRule is the rule reading histogram field from the first of families
// present.
func histRule(field HistField, families ...string) HistRule {
	r := HistRule{Field: field}
	for _, f := range families {
		r.Sources = append(r.Sources, HistSource{Family: f})
	}
	return r
}

func trtllmNames(name string) []Source {
	return []Source{{Family: "trtllm_" + name}, {Family: name}}
}

func trtllmHist(name string) []HistSource {
	return []HistSource{{Family: "trtllm_" + name}, {Family: name}}
}

// Triton Inference Server with the TensorRT-LLM backend:
// triton-inference-server/tensorrtllm_backend README.md, "Triton Metrics"
// @0b9d7d5a195820d53abadfcf7208d0ccdbfd5332 (nv_trt_llm_* gauges by
// request_type and kv_cache_block_type; request_type="waiting" and
// kv_cache_block_type="fraction" since 2024) and Triton's base families
// (nv_inference_*, cumulative durations in microseconds, label model).
// Triton reports no token counters and, without histogram latencies on, no
// per-request latency distribution: E2E and queue time are means only.
var tritonProfile = &Profile{
	Engine: "triton",
	Detect: []string{
		"nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics",
		"nv_inference_request_success", "nv_inference_pending_request_count",
	},
	ModelLabels: []string{"model"},
	Scalars: []ScalarRule{
		{Field: FieldRunning, Sources: []Source{{Family: "nv_trt_llm_request_metrics", Match: map[string]string{"request_type": "active"}}}},
		{Field: FieldWaiting, Sources: []Source{
			{Family: "nv_trt_llm_request_metrics", Match: map[string]string{"request_type": "waiting"}},
			{Family: "nv_inference_pending_request_count"},
		}},
		{Field: FieldKVUsage, Max: true, Sources: []Source{
			{Family: "nv_trt_llm_kv_cache_block_metrics", Match: map[string]string{"kv_cache_block_type": "fraction"}},
			{
				Family: "nv_trt_llm_kv_cache_block_metrics", Match: map[string]string{"kv_cache_block_type": "used"},
				Over: &Source{Family: "nv_trt_llm_kv_cache_block_metrics", Match: map[string]string{"kv_cache_block_type": "max"}},
			},
		}},
		{Field: FieldKVCapacityTokens, Sources: []Source{{
			Family: "nv_trt_llm_kv_cache_block_metrics", Match: map[string]string{"kv_cache_block_type": "max"},
			Times: &Source{Family: "nv_trt_llm_kv_cache_block_metrics", Match: map[string]string{"kv_cache_block_type": "tokens_per"}},
		}}},
	},
	Histograms: []HistRule{
		// Triton's first-response histogram (decoupled models, with
		// --metrics-config histogram_latencies=true), in milliseconds.
		{Field: HistTTFT, Sources: []HistSource{{Family: "nv_inference_first_response_histogram_ms", Scale: 1e-3}}},
		{Field: HistE2E, Sources: []HistSource{{
			SumFamily: "nv_inference_request_duration_us", Scale: 1e-6,
			CountFamilies: []string{"nv_inference_request_success", "nv_inference_request_failure"},
		}}},
		{Field: HistQueue, Sources: []HistSource{{
			SumFamily: "nv_inference_queue_duration_us", Scale: 1e-6,
			CountFamilies: []string{"nv_inference_request_success", "nv_inference_request_failure"},
		}}},
	},
}

// llama.cpp's llama-server --metrics: ggml-org/llama.cpp
// tools/server/server-task.cpp (server_task_result_metrics) and
// tools/server/server-context.cpp @fb4026604c67c682f552337ec9b91eced0abd35a:
// "llamacpp:" counters and gauges, no labels at all (one model per
// server). kv_cache_usage_ratio was removed upstream in May 2025
// (ggml-org/llama.cpp #13660) and lives on in forks; the latency
// histograms come from tools/server/server-metrics.cpp, which not every
// build has. No queue-time histogram, no sleep mode.
//
// prompt_tokens_total counts the prompt tokens the server evaluated, and
// prompt_tokens_cached_total (release v0.4.0, commit 80fb11a: "reused from
// the cache", the testdata capture) those it took from a slot's cache: their sum is the usage.prompt_tokens of the requests,
// as vLLM's prompt_tokens_total counts, and the cached share is the prefix
// cache's hit ratio. Without the cached counter (older builds) the prompt
// tokens are the evaluated ones. tokens_predicted_seconds_total over
// tokens_predicted_total is the server's mean decode time per output token
// (a mean ITL with no quantiles) where the build has no ITL histogram.
var llamacppPrompt = Source{Family: "llamacpp:prompt_tokens_total", Plus: &Source{Family: "llamacpp:prompt_tokens_cached_total"}}

var llamacppProfile = &Profile{
	Engine: "llamacpp",
	Detect: []string{
		"llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total",
		"llamacpp:requests_processing", "llamacpp:requests_deferred",
	},
	Scalars: []ScalarRule{
		scalarRule(FieldRunning, "llamacpp:requests_processing"),
		scalarRule(FieldWaiting, "llamacpp:requests_deferred"),
		{Field: FieldKVUsage, Max: true, Sources: []Source{{Family: "llamacpp:kv_cache_usage_ratio"}}},
		{Field: FieldPromptTokens, Sources: []Source{llamacppPrompt, {Family: "llamacpp:prompt_tokens_total"}}},
		{Field: FieldPrefixCacheQueries, Sources: []Source{llamacppPrompt}},
		scalarRule(FieldPrefixCacheHits, "llamacpp:prompt_tokens_cached_total"),
		scalarRule(FieldGenerationTokens, "llamacpp:tokens_predicted_total"),
		scalarRule(FieldSpecDrafts, "llamacpp:spec_decode_num_drafts_total"),
		scalarRule(FieldSpecDraftTokens, "llamacpp:spec_decode_num_draft_tokens_total"),
		scalarRule(FieldSpecAcceptedTokens, "llamacpp:spec_decode_num_accepted_tokens_total"),
	},
	Histograms: []HistRule{
		histRule(HistTTFT, "llamacpp:time_to_first_token_seconds"),
		{Field: HistITL, Sources: []HistSource{
			{Family: "llamacpp:inter_token_latency_seconds"},
			{SumFamily: "llamacpp:tokens_predicted_seconds_total", CountFamilies: []string{"llamacpp:tokens_predicted_total"}},
		}},
		histRule(HistE2E, "llamacpp:e2e_request_latency_seconds"),
		histRule(HistPrefill, "llamacpp:request_prefill_time_seconds"),
	},
}

// Dynamo's frontend: ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs
// @4415465e3e0d30b12163c3c3f15d49ed78b300a8 (frontend_service) and
// lib/llm/src/http/service/metrics.rs @0014908a25aecc8e9ce7455bbbaddf9f1521a1b4:
// "dynamo_frontend_" families with a lower-cased model label. The frontend
// sees requests, not the engine: inflight_requests counts every request
// sent to a worker (the queued among them), queued_requests those without
// a first response yet; prompt tokens are the sum of the
// input_sequence_tokens histogram. No KV cache, preemption or queue-time
// signal: Dynamo's workers export their engine's own families.
var dynamoProfile = &Profile{
	Engine: "dynamo",
	Detect: []string{
		"dynamo_frontend_requests_total", "dynamo_frontend_inflight_requests",
		"dynamo_frontend_time_to_first_token_seconds", "dynamo_frontend_request_duration_seconds",
	},
	ModelLabels: []string{"model"},
	Scalars: []ScalarRule{
		scalarRule(FieldRunning, "dynamo_frontend_inflight_requests"),
		scalarRule(FieldWaiting, "dynamo_frontend_queued_requests"),
		{Field: FieldPromptTokens, Sources: []Source{{Family: "dynamo_frontend_input_sequence_tokens", HistogramSum: true}}},
		scalarRule(FieldGenerationTokens, "dynamo_frontend_output_tokens_total"),
	},
	Histograms: []HistRule{
		histRule(HistTTFT, "dynamo_frontend_time_to_first_token_seconds"),
		histRule(HistITL, "dynamo_frontend_inter_token_latency_seconds"),
		histRule(HistE2E, "dynamo_frontend_request_duration_seconds"),
		histRule(HistGenerationTokensPerRequest, "dynamo_frontend_output_sequence_tokens"),
	},
}
