package simulator

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// Engines vllm_sim can speak (Config.Engine): the same scheduler and
// latency model behind each engine's /metrics surface, streaming quirks,
// error bodies and health and models answers.
const (
	EngineVLLM     = "vllm"
	EngineSGLang   = "sglang"
	EngineTRTLLM   = "trtllm"
	EngineTriton   = "triton"
	EngineLlamaCpp = "llamacpp"
	EngineDynamo   = "dynamo"
	EngineRay      = "ray"
	EngineNIM      = "nim"
)

// Error body shapes besides vLLM's nested and flat ones.
const (
	// ErrorShapeDetail is FastAPI's HTTPException body, {"detail": msg},
	// as Triton's OpenAI-compatible frontend answers.
	ErrorShapeDetail = "detail"
	// ErrorShapeLlamaCpp is llama-server's {"error": {"code", "message",
	// "type"}} with OpenAI's type names (invalid_request_error, ...).
	ErrorShapeLlamaCpp = "llamacpp"
	// ErrorShapeString is {"error": msg}, a bare message (Dynamo's frontend).
	ErrorShapeString = "string"
)

// dialect is what one engine's OpenAI-compatible server does differently.
type dialect struct {
	// errorShape is its error body.
	errorShape string
	// noUsage: a stream never carries a usage chunk, whatever
	// stream_options asks (the simulator's Triton).
	noUsage bool
	// timings: llama-server's timings object (prompt_n, predicted_n,
	// predicted_ms, ...) in the last chunk, next to usage.
	timings bool
	// sleep: vLLM's sleep mode endpoints (POST /sleep, POST /wake_up, GET
	// /is_sleeping) and the vllm:engine_sleep_state it drives.
	sleep bool
	// ownedBy is /v1/models' owned_by.
	ownedBy string
	// health answers GET /health (and extraHealth) with this body on 200.
	health      []byte
	extraHealth []string
	// extraMetrics serve /metrics's exposition on other paths too: NIM's
	// default is /v1/metrics (NVIDIA's "Observability for NVIDIA NIM for
	// LLMs").
	extraMetrics []string
}

var dialects = map[string]dialect{
	EngineVLLM:   {errorShape: ErrorShapeNested, sleep: true, ownedBy: "vllm"},
	EngineRay:    {errorShape: ErrorShapeNested, ownedBy: "vllm"},
	EngineNIM:    {errorShape: ErrorShapeNested, ownedBy: "system", extraHealth: []string{"/v1/health/ready", "/v1/health/live"}, extraMetrics: []string{"/v1/metrics"}},
	EngineSGLang: {errorShape: ErrorShapeFlat, ownedBy: "sglang", extraHealth: []string{"/health_generate"}},
	EngineTRTLLM: {errorShape: ErrorShapeFlat, ownedBy: "tensorrt_llm"},
	EngineTriton: {errorShape: ErrorShapeDetail, noUsage: true, ownedBy: "triton", extraHealth: []string{"/v2/health/ready", "/health/ready"}},
	EngineLlamaCpp: {errorShape: ErrorShapeLlamaCpp, timings: true, ownedBy: "llamacpp",
		health: []byte(`{"status":"ok"}`)},
	EngineDynamo: {errorShape: ErrorShapeString, ownedBy: "nvidia", health: []byte(`{"status":"healthy","endpoints":[]}`),
		extraHealth: []string{"/live"}},
}

// EngineNames lists the engines vllm_sim speaks.
func EngineNames() []string {
	return []string{EngineVLLM, EngineSGLang, EngineTRTLLM, EngineTriton, EngineLlamaCpp, EngineDynamo, EngineRay, EngineNIM}
}

func (s *Simulator) dialect() dialect { return dialects[s.cfg.Engine] }

// llamaCppErrorType maps a status to the OpenAI type names llama-server
// uses, and a prompt longer than the context to its own
// exceed_context_size_error.
func llamaCppErrorType(status int, msg string) string {
	if status == http.StatusBadRequest && strings.Contains(msg, "exceeds the available context size") {
		return "exceed_context_size_error"
	}
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusServiceUnavailable:
		return "unavailable_error"
	case http.StatusNotImplemented:
		return "not_supported_error"
	}
	if status >= 500 {
		return "server_error"
	}
	return "invalid_request_error"
}

// renderEngineMetrics is /metrics in the configured engine's names.
func (s *Simulator) renderEngineMetrics() []byte {
	switch s.cfg.Engine {
	case EngineRay:
		// Ray's metrics agent re-exports vLLM's families as ray_vllm_*.
		return renamePrefix(s.renderMetrics(), "vllm:", "ray_vllm_")
	case EngineNIM:
		return renamePrefix(s.renderMetrics(), "vllm:", "")
	case EngineSGLang:
		return s.renderSGLang()
	case EngineTRTLLM:
		return s.renderTRTLLM()
	case EngineTriton:
		return s.renderTriton()
	case EngineLlamaCpp:
		return s.renderLlamaCpp()
	case EngineDynamo:
		return s.renderDynamo()
	}
	return s.renderMetrics()
}

// renamePrefix replaces from by to at the start of every family name of
// the exposition b (sample lines and their HELP and TYPE comments).
func renamePrefix(b []byte, from, to string) []byte {
	out := make([]byte, 0, len(b))
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		for _, head := range []string{"# HELP ", "# TYPE ", ""} {
			if rest, ok := bytes.CutPrefix(line, []byte(head+from)); ok {
				line = append([]byte(head+to), rest...)
				break
			}
		}
		out = append(out, line...)
	}
	return out
}

// sum is the total of one counter over every engine.
func (s *Simulator) sum(f func(*engineMetrics) *counter) float64 { return sumOver(s.engines, f) }

// folded is one group holding every engine, labelled by labels.
func (s *Simulator) folded(labels ...lbl) []*group {
	g := &group{labels: labels, engines: s.engines}
	for _, e := range s.engines {
		r, w, used := e.snapshot()
		g.running += r
		g.waiting += w
		g.used += used
		g.total += e.totalBlocks
	}
	return []*group{g}
}

// plainCounter writes a counter family without vLLM's _created samples.
func (x *expo) plainCounter(name, help string, groups []*group, v func(*group) float64) {
	x.header(name, help, "counter")
	for _, g := range groups {
		x.sample(name, g.labels, v(g))
	}
}

// renderSGLang follows sgl-project/sglang python/sglang/srt/metrics/collector.py
// (SchedulerMetricsCollector, TokenizerMetricsCollector): labels model_name,
// engine_type, tp_rank, pp_rank.
func (s *Simulator) renderSGLang() []byte {
	x := &expo{b: make([]byte, 0, 32<<10)}
	gs := s.folded(lbl{"model_name", s.cfg.Model}, lbl{"engine_type", "unified"}, lbl{"tp_rank", "0"}, lbl{"pp_rank", "0"})
	c := func(f func(*engineMetrics) *counter) func(*group) float64 {
		return func(g *group) float64 { return g.counter(f) }
	}
	x.gauge("sglang:num_running_reqs", "The number of running requests.", gs, func(g *group) float64 { return float64(g.running) })
	x.gauge("sglang:num_used_tokens", "The number of used tokens.", gs, func(g *group) float64 { return float64(g.used * s.cfg.BlockSize) })
	x.gauge("sglang:token_usage", "The token usage.", gs, kvUsage)
	x.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", gs, func(g *group) float64 { return float64(g.waiting) })
	x.gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", gs,
		func(g *group) float64 { return float64(g.total * s.cfg.BlockSize) })
	x.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", gs, func(g *group) float64 {
		if q := g.counter(func(m *engineMetrics) *counter { return &m.prefixQueries }); q > 0 {
			return g.counter(func(m *engineMetrics) *counter { return &m.prefixHits }) / q
		}
		return 0
	})
	x.plainCounter("sglang:num_retracted_requests_total", "Total number of retracted requests.", gs, c(func(m *engineMetrics) *counter { return &m.preemptions }))
	x.plainCounter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", gs, c(func(m *engineMetrics) *counter { return &m.promptTokens }))
	x.plainCounter("sglang:generation_tokens_total", "Number of generation tokens processed.", gs, c(func(m *engineMetrics) *counter { return &m.genTokens }))
	x.plainCounter("sglang:cached_tokens_total", "Number of cached prompt tokens.", gs, c(func(m *engineMetrics) *counter { return &m.prefixHits }))
	x.plainHistogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", gs, func(m *engineMetrics) *histogram { return m.ttft })
	x.plainHistogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", gs, func(m *engineMetrics) *histogram { return m.itl })
	x.plainHistogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", gs, func(m *engineMetrics) *histogram { return m.e2e })
	x.plainHistogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", gs, func(m *engineMetrics) *histogram { return m.queue })
	x.plainHistogram("sglang:generation_tokens_histogram", "Histogram of generation token length.", gs, func(m *engineMetrics) *histogram { return m.reqGenTokens })
	return x.b
}

// renderTRTLLM follows NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py
// (MetricsCollector, prefix trtllm_; labels model_name and engine_type).
func (s *Simulator) renderTRTLLM() []byte {
	x := &expo{b: make([]byte, 0, 32<<10)}
	gs := s.folded(lbl{"model_name", s.cfg.Model}, lbl{"engine_type", "trtllm"})
	c := func(f func(*engineMetrics) *counter) func(*group) float64 {
		return func(g *group) float64 { return g.counter(f) }
	}
	x.gauge("trtllm_num_requests_running", "Number of active requests", gs, func(g *group) float64 { return float64(g.running) })
	x.gauge("trtllm_num_requests_waiting", "Number of queued requests", gs, func(g *group) float64 { return float64(g.waiting) })
	x.gauge("trtllm_kv_cache_utilization", "KV cache utilization", gs, kvUsage)
	x.gauge("trtllm_kv_cache_max_blocks", "Maximum number of KV cache blocks", gs, func(g *group) float64 { return float64(g.total) })
	x.gauge("trtllm_kv_cache_used_blocks", "Number of used KV cache blocks", gs, func(g *group) float64 { return float64(g.used) })
	x.gauge("trtllm_kv_cache_tokens_per_block", "Number of tokens per KV cache block", gs, func(*group) float64 { return float64(s.cfg.BlockSize) })
	x.plainCounter("trtllm_prompt_tokens_total", "Cumulative number of prompt (input) tokens processed.", gs, c(func(m *engineMetrics) *counter { return &m.promptTokens }))
	x.plainCounter("trtllm_generation_tokens_total", "Cumulative number of generation (output) tokens produced.", gs, c(func(m *engineMetrics) *counter { return &m.genTokens }))
	x.header("trtllm_request_success_total", "Count of successfully processed requests.", "counter")
	for _, g := range gs {
		for _, r := range finishReasonsV1 {
			x.sample("trtllm_request_success_total", with(g.labels, lbl{"finished_reason", r}), g.counter(func(m *engineMetrics) *counter { return m.success[r] }))
		}
	}
	if s.cfg.SpecDecodeTokens > 0 {
		x.plainCounter("trtllm_spec_decode_num_draft_tokens_total", "Total number of draft tokens proposed.", gs, c(func(m *engineMetrics) *counter { return &m.specDraftTokens }))
		x.plainCounter("trtllm_spec_decode_num_accepted_tokens_total", "Total number of draft tokens accepted.", gs, c(func(m *engineMetrics) *counter { return &m.specAccepted }))
	}
	x.plainHistogram("trtllm_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", gs, func(m *engineMetrics) *histogram { return m.e2e })
	x.plainHistogram("trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.", gs, func(m *engineMetrics) *histogram { return m.ttft })
	x.plainHistogram("trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.", gs, func(m *engineMetrics) *histogram { return m.itl })
	x.plainHistogram("trtllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", gs, func(m *engineMetrics) *histogram { return m.queue })
	x.plainHistogram("trtllm_request_prefill_time_seconds", "Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).", gs, func(m *engineMetrics) *histogram { return m.prefill })
	return x.b
}

// renderTriton follows Triton's metrics with the TensorRT-LLM backend
// (triton-inference-server/tensorrtllm_backend README.md, "Triton
// Metrics"): nv_trt_llm_* gauges by type, nv_inference_* cumulative
// counters with durations in microseconds; label model is Triton's model
// name (tensorrt_llm), version its version.
func (s *Simulator) renderTriton() []byte {
	x := &expo{b: make([]byte, 0, 16<<10)}
	base := []lbl{{"model", "tensorrt_llm"}, {"version", "1"}}
	gs := s.folded(base...)
	g := gs[0]
	typed := func(name, help, label string, vals []struct {
		v string
		f float64
	}) {
		x.header(name, help, "gauge")
		for _, v := range vals {
			x.sample(name, with(base, lbl{label, v.v}), v.f)
		}
	}
	type kv = struct {
		v string
		f float64
	}
	typed("nv_trt_llm_request_metrics", "TRT LLM request metrics", "request_type", []kv{
		{"waiting", float64(g.waiting)}, {"context", 0}, {"scheduled", float64(g.running)},
		{"max", float64(s.cfg.MaxNumSeqs)}, {"active", float64(g.running)},
	})
	typed("nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics", "kv_cache_block_type", []kv{
		{"fraction", kvUsage(g)}, {"tokens_per", float64(s.cfg.BlockSize)}, {"used", float64(g.used)},
		{"free", float64(g.total - g.used)}, {"max", float64(g.total)},
	})
	success := 0.0
	for _, r := range finishReasonsV1 {
		success += s.sum(func(m *engineMetrics) *counter { return m.success[r] })
	}
	e2eCount, e2eSum := s.histSum(func(m *engineMetrics) *histogram { return m.e2e })
	_, queueSum := s.histSum(func(m *engineMetrics) *histogram { return m.queue })
	_ = e2eCount
	x.plainCounter("nv_inference_request_success", "Number of successful inference requests, all batch sizes", gs, func(*group) float64 { return success })
	x.plainCounter("nv_inference_request_failure", "Number of failed inference requests, all batch sizes", gs, func(*group) float64 { return 0 })
	x.plainCounter("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)", gs,
		func(*group) float64 { return float64(int64(e2eSum * 1e6)) })
	x.plainCounter("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached requests)", gs,
		func(*group) float64 { return float64(int64(queueSum * 1e6)) })
	// Triton's latency histograms (--metrics-config histogram_latencies=true):
	// time to the first response of a decoupled (streaming) model, in ms.
	x.scaledHistogram("nv_inference_first_response_histogram_ms", "Duration from request to first response in milliseconds", gs,
		func(m *engineMetrics) *histogram { return m.ttft }, 1e3)
	x.gauge("nv_inference_pending_request_count", "Instantaneous number of pending requests awaiting execution per-model.", gs,
		func(g *group) float64 { return float64(g.waiting) })
	return x.b
}

// histSum is the count and sum of one histogram over engines.
func (s *Simulator) histSum(f func(*engineMetrics) *histogram) (count uint64, sum float64) {
	for _, e := range s.engines {
		c, sm := f(e.m).snapshot()
		count += c[len(c)-1]
		sum += sm
	}
	return count, sum
}

// renderLlamaCpp follows llama-server --metrics (ggml-org/llama.cpp
// tools/server, server_task_result_metrics): llamacpp: counters and
// gauges without any label, plus kv_cache_usage_ratio as forks still
// export it.
func (s *Simulator) renderLlamaCpp() []byte {
	x := &expo{b: make([]byte, 0, 8<<10)}
	gs := s.folded()
	c := func(f func(*engineMetrics) *counter) func(*group) float64 {
		return func(g *group) float64 { return g.counter(f) }
	}
	// prompt_tokens_total counts the evaluated prompt tokens, and
	// prompt_tokens_cached_total those taken from the slot's cache; the
	// seconds counters are the prompt evaluation and decode times.
	hits := c(func(m *engineMetrics) *counter { return &m.prefixHits })
	x.plainCounter("llamacpp:prompt_tokens_total", "Number of prompt tokens processed.", gs, func(g *group) float64 {
		return g.counter(func(m *engineMetrics) *counter { return &m.promptTokens }) - hits(g)
	})
	x.plainCounter("llamacpp:prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", gs, hits)
	_, prefill := s.histSum(func(m *engineMetrics) *histogram { return m.prefill })
	x.plainCounter("llamacpp:prompt_seconds_total", "Total time spent processing prompts", gs, func(*group) float64 { return prefill })
	x.plainCounter("llamacpp:tokens_predicted_total", "Number of generation tokens processed.", gs, c(func(m *engineMetrics) *counter { return &m.genTokens }))
	_, decode := s.histSum(func(m *engineMetrics) *histogram { return m.decode })
	x.plainCounter("llamacpp:tokens_predicted_seconds_total", "Total time spent generating tokens", gs, func(*group) float64 { return decode })
	if s.cfg.SpecDecodeTokens > 0 {
		x.plainCounter("llamacpp:spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", gs, c(func(m *engineMetrics) *counter { return &m.specDraftTokens }))
		x.plainCounter("llamacpp:spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", gs, c(func(m *engineMetrics) *counter { return &m.specAccepted }))
		x.plainCounter("llamacpp:spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", gs, c(func(m *engineMetrics) *counter { return &m.specDrafts }))
	}
	// The latency histograms of tools/server/server-metrics.cpp, in builds that have it.
	x.plainHistogram("llamacpp:time_to_first_token_seconds", "Time from request arrival to first generated token.", gs, func(m *engineMetrics) *histogram { return m.ttft })
	x.plainHistogram("llamacpp:inter_token_latency_seconds", "Wall time between two consecutive generated tokens for one request.", gs, func(m *engineMetrics) *histogram { return m.itl })
	x.plainHistogram("llamacpp:e2e_request_latency_seconds", "End-to-end request latency, arrival to final token.", gs, func(m *engineMetrics) *histogram { return m.e2e })
	x.plainHistogram("llamacpp:request_prefill_time_seconds", "Prompt evaluation wall time per request.", gs, func(m *engineMetrics) *histogram { return m.prefill })
	x.gauge("llamacpp:kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", gs, kvUsage)
	x.gauge("llamacpp:requests_processing", "Number of requests processing", gs, func(g *group) float64 { return float64(g.running) })
	x.gauge("llamacpp:requests_deferred", "Number of requests deferred", gs, func(g *group) float64 { return float64(g.waiting) })
	return x.b
}

// renderDynamo follows Dynamo's frontend (ai-dynamo/dynamo
// lib/runtime/src/metrics/prometheus_names.rs, frontend_service): label
// model, lower-cased.
func (s *Simulator) renderDynamo() []byte {
	x := &expo{b: make([]byte, 0, 16<<10)}
	gs := s.folded(lbl{"model", lowerASCII(s.cfg.Model)})
	g := gs[0]
	x.gauge("dynamo_frontend_inflight_requests", "Number of inflight requests", gs, func(*group) float64 { return float64(g.running + g.waiting) })
	x.gauge("dynamo_frontend_queued_requests", "Number of requests in HTTP processing queue", gs, func(*group) float64 { return float64(g.waiting) })
	x.plainCounter("dynamo_frontend_output_tokens_total", "Total number of output tokens generated", gs,
		func(g *group) float64 { return g.counter(func(m *engineMetrics) *counter { return &m.genTokens }) })
	x.plainHistogram("dynamo_frontend_input_sequence_tokens", "Input sequence length in tokens", gs, func(m *engineMetrics) *histogram { return m.reqPromptTokens })
	x.plainHistogram("dynamo_frontend_output_sequence_tokens", "Output sequence length in tokens", gs, func(m *engineMetrics) *histogram { return m.reqGenTokens })
	x.plainHistogram("dynamo_frontend_time_to_first_token_seconds", "Time to first token in seconds", gs, func(m *engineMetrics) *histogram { return m.ttft })
	x.plainHistogram("dynamo_frontend_inter_token_latency_seconds", "Inter-token latency in seconds", gs, func(m *engineMetrics) *histogram { return m.itl })
	x.plainHistogram("dynamo_frontend_request_duration_seconds", "Duration of LLM requests", gs, func(m *engineMetrics) *histogram { return m.e2e })
	return x.b
}

func lowerASCII(s string) string { return string(bytes.ToLower([]byte(s))) }

// plainHistogram writes a histogram family without _created samples.
func (x *expo) plainHistogram(name, help string, groups []*group, f func(*engineMetrics) *histogram) {
	x.scaledHistogram(name, help, groups, f, 1)
}

// scaledHistogram is plainHistogram with bounds and sum multiplied by
// scale (1000: seconds observed, milliseconds exported).
func (x *expo) scaledHistogram(name, help string, groups []*group, f func(*engineMetrics) *histogram, scale float64) {
	x.header(name, help, "histogram")
	for _, g := range groups {
		bounds := f(g.engines[0].m).bounds
		cum := make([]uint64, len(bounds)+1)
		var sum float64
		for _, e := range g.engines {
			c, s := f(e.m).snapshot()
			for i := range c {
				cum[i] += c[i]
			}
			sum += s
		}
		for i, le := range bounds {
			x.sample(name+"_bucket", with(g.labels, lbl{"le", pyGoString(le * scale)}), float64(cum[i]))
		}
		x.sample(name+"_bucket", with(g.labels, lbl{"le", "+Inf"}), float64(cum[len(bounds)]))
		x.sample(name+"_count", g.labels, float64(cum[len(bounds)]))
		x.sample(name+"_sum", g.labels, sum*scale)
	}
}

// handleDialectHealth answers the engine's health paths.
func (s *Simulator) handleDialectHealth(w http.ResponseWriter, r *http.Request) {
	if s.engineDead() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	d := s.dialect()
	if d.health == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(d.health)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(d.health)
}
