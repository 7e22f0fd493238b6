package simulator

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HELP strings as vLLM's PrometheusStatLogger registers them.
const (
	helpRunning          = "Number of requests in model execution batches."
	helpWaiting          = "Number of requests waiting to be processed."
	helpWaitingByReason  = "Number of waiting requests by reason. Sum of all reasons equals vllm:num_requests_waiting."
	helpSleepState       = "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."
	helpKVUsage          = "KV-cache usage. 1 means 100 percent usage."
	helpGPUCacheDepr     = "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead."
	helpGPUCacheV0       = "GPU KV-cache usage. 1 means 100 percent usage."
	helpCPUCacheV0       = "CPU KV-cache usage. 1 means 100 percent usage."
	helpSwapped          = "Number of requests swapped to CPU."
	helpGPUPrefixRate    = "GPU prefix cache block hit rate."
	helpCPUPrefixRate    = "CPU prefix cache block hit rate."
	helpPrefixQueries    = "Prefix cache queries, in terms of number of queried tokens."
	helpPrefixHits       = "Prefix cache hits, in terms of number of cached tokens."
	helpGPUPrefixQueries = "GPU prefix cache queries, in terms of number of queried tokens. DEPRECATED: Use vllm:prefix_cache_queries instead."
	helpGPUPrefixHits    = "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead."
	helpGPUPrefixQV0     = "GPU prefix cache queries, in terms of number of queried tokens."
	helpGPUPrefixHV0     = "GPU prefix cache hits, in terms of number of cached tokens."
	helpPreemptions      = "Cumulative number of preemption from the engine."
	helpPromptTokens     = "Number of prefill tokens processed."
	helpPromptBySource   = "Number of prompt tokens by source."
	helpPromptCached     = "Number of cached prompt tokens (local + external)."
	helpGenTokens        = "Number of generation tokens processed."
	helpSuccess          = "Count of successfully processed requests."
	helpReqPrompt        = "Number of prefill tokens processed."
	helpReqPrefillKV     = "Number of new KV tokens computed during prefill (excluding cached tokens)."
	helpReqGen           = "Number of generation tokens processed."
	helpIteration        = "Histogram of number of tokens per engine_step."
	helpMaxGen           = "Histogram of maximum number of requested generation tokens."
	helpParamsN          = "Histogram of the n request parameter."
	helpParamsMaxTokens  = "Histogram of the max_tokens request parameter."
	helpTTFT             = "Histogram of time to first token in seconds."
	helpITL              = "Histogram of inter-token latency in seconds."
	helpTPOTOld          = "Histogram of time per output token in seconds."
	helpReqTPOT          = "Histogram of time_per_output_token_seconds per request."
	helpE2E              = "Histogram of e2e request latency in seconds."
	helpQueue            = "Histogram of time spent in WAITING phase for request."
	helpInference        = "Histogram of time spent in RUNNING phase for request."
	helpPrefill          = "Histogram of time spent in PREFILL phase for request."
	helpDecode           = "Histogram of time spent in DECODE phase for request."
	helpReqPreemptions   = "Number of preemptions per request."
	helpCacheConfig      = "Information of the LLMEngine CacheConfig"
	helpProcessStart     = "Start time of the process since unix epoch in seconds."
	helpSpecDrafts       = "Number of spec decoding drafts."
	helpSpecDraftTokens  = "Number of draft tokens."
	helpSpecAccepted     = "Number of accepted tokens."
)

type lbl struct{ k, v string }

// group is one labelled child of every engine metric: one engine, or (for
// the legacy surface, which has no engine label) all engines folded.
type group struct {
	labels  []lbl
	engines []*engine
	running int
	waiting int
	used    int
	total   int
}

func (g *group) counter(f func(*engineMetrics) *counter) float64 { return sumOver(g.engines, f) }

// sumOver is the total of one counter over engines.
func sumOver(engines []*engine, f func(*engineMetrics) *counter) float64 {
	var v float64
	for _, e := range engines {
		v += f(e.m).get()
	}
	return v
}

func (g *group) created() float64 { return g.engines[0].m.created() }

// expo renders the Prometheus text format 0.0.4 the way Python's
// prometheus_client does: label names sorted, values via floatToGoString,
// a <name>_created gauge family after each counter and histogram.
type expo struct{ b []byte }

func escHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func escLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func (x *expo) header(name, help, typ string) {
	x.b = append(x.b, "# HELP "+name+" "+escHelp(help)+"\n# TYPE "+name+" "+typ+"\n"...)
}

func (x *expo) sample(name string, labels []lbl, v float64) {
	ls := append([]lbl(nil), labels...)
	sort.Slice(ls, func(i, j int) bool { return ls[i].k < ls[j].k })
	x.b = append(x.b, name...)
	if len(ls) > 0 {
		x.b = append(x.b, '{')
		for i, l := range ls {
			if i > 0 {
				x.b = append(x.b, ',')
			}
			x.b = append(x.b, l.k+`="`+escLabel(l.v)+`"`...)
		}
		x.b = append(x.b, '}')
	}
	x.b = append(x.b, ' ')
	x.b = append(x.b, pyGoString(v)...)
	x.b = append(x.b, '\n')
}

func with(labels []lbl, extra ...lbl) []lbl {
	return append(append([]lbl(nil), labels...), extra...)
}

func (x *expo) gauge(name, help string, groups []*group, v func(*group) float64) {
	x.header(name, help, "gauge")
	for _, g := range groups {
		x.sample(name, g.labels, v(g))
	}
}

func (x *expo) created(name, help string, groups []*group, extra []lbl) {
	x.header(name+"_created", help, "gauge")
	for _, g := range groups {
		if extra == nil {
			x.sample(name+"_created", g.labels, g.created())
			continue
		}
		for _, l := range extra {
			x.sample(name+"_created", with(g.labels, l), g.created())
		}
	}
}

func (x *expo) counter(name, help string, groups []*group, f func(*engineMetrics) *counter) {
	x.header(name+"_total", help, "counter")
	for _, g := range groups {
		x.sample(name+"_total", g.labels, g.counter(f))
	}
	x.created(name, help, groups, nil)
}

func (x *expo) histogram(name, help string, groups []*group, f func(*engineMetrics) *histogram) {
	x.scaledHistogram(name, help, groups, f, 1)
	x.created(name, help, groups, nil)
}

func (s *Simulator) groups() []*group {
	model := lbl{"model_name", s.cfg.Model}
	var gs []*group
	if s.cfg.MetricsNames == MetricsLegacy {
		gs = []*group{{labels: []lbl{model}, engines: s.engines}}
	} else {
		for _, e := range s.engines {
			gs = append(gs, &group{labels: []lbl{{"engine", strconv.Itoa(e.idx)}, model}, engines: []*engine{e}})
		}
	}
	for _, g := range gs {
		for _, e := range g.engines {
			r, w, used := e.snapshot()
			g.used += used
			g.running += r
			g.waiting += w
			g.total += e.totalBlocks
		}
	}
	return gs
}

func kvUsage(g *group) float64 { return float64(g.used) / float64(g.total) }

func (s *Simulator) renderMetrics() []byte {
	x := &expo{b: make([]byte, 0, 64<<10)}
	gs := s.groups()
	names := s.cfg.MetricsNames

	x.gauge("process_start_time_seconds", helpProcessStart, []*group{{}}, func(*group) float64 {
		return float64(s.start.UnixNano()) / 1e9
	})
	x.gauge("vllm:num_requests_running", helpRunning, gs, func(g *group) float64 { return float64(g.running) })
	if names == MetricsLegacy {
		x.gauge("vllm:num_requests_swapped", helpSwapped, gs, func(*group) float64 { return 0 })
	}
	x.gauge("vllm:num_requests_waiting", helpWaiting, gs, func(g *group) float64 { return float64(g.waiting) })
	if names == MetricsV1 {
		// Requests waiting for a remote prefill's KV blocks are deferred;
		// the simulator counts them once, on the first engine.
		deferred := func(i int) float64 {
			if i == 0 {
				return float64(s.kvWaiting.Load())
			}
			return 0
		}
		x.header("vllm:num_requests_waiting_by_reason", helpWaitingByReason, "gauge")
		for i, g := range gs {
			x.sample("vllm:num_requests_waiting_by_reason", with(g.labels, lbl{"reason", "capacity"}), float64(g.waiting))
			x.sample("vllm:num_requests_waiting_by_reason", with(g.labels, lbl{"reason", "deferred"}), deferred(i))
		}
		x.header("vllm:engine_sleep_state", helpSleepState, "gauge")
		level := s.sleepLevel()
		for _, g := range gs {
			for _, st := range sleepStates {
				x.sample("vllm:engine_sleep_state", with(g.labels, lbl{"sleep_state", st.name}), sleepStateValue(st.level, level))
			}
		}
	}
	switch names {
	case MetricsLegacy:
		x.gauge("vllm:gpu_cache_usage_perc", helpGPUCacheV0, gs, kvUsage)
		x.gauge("vllm:cpu_cache_usage_perc", helpCPUCacheV0, gs, func(*group) float64 { return 0 })
		x.gauge("vllm:gpu_prefix_cache_hit_rate", helpGPUPrefixRate, gs, func(g *group) float64 {
			q := g.counter(func(m *engineMetrics) *counter { return &m.prefixQueries })
			if q == 0 {
				return 0
			}
			return g.counter(func(m *engineMetrics) *counter { return &m.prefixHits }) / q
		})
		x.gauge("vllm:cpu_prefix_cache_hit_rate", helpCPUPrefixRate, gs, func(*group) float64 { return 0 })
		x.counter("vllm:gpu_prefix_cache_queries", helpGPUPrefixQV0, gs, func(m *engineMetrics) *counter { return &m.prefixQueries })
		x.counter("vllm:gpu_prefix_cache_hits", helpGPUPrefixHV0, gs, func(m *engineMetrics) *counter { return &m.prefixHits })
	case MetricsV010:
		x.gauge("vllm:gpu_cache_usage_perc", helpGPUCacheDepr, gs, kvUsage)
		x.counter("vllm:gpu_prefix_cache_queries", helpGPUPrefixQueries, gs, func(m *engineMetrics) *counter { return &m.prefixQueries })
		x.counter("vllm:gpu_prefix_cache_hits", helpGPUPrefixHits, gs, func(m *engineMetrics) *counter { return &m.prefixHits })
		fallthrough
	default:
		x.gauge("vllm:kv_cache_usage_perc", helpKVUsage, gs, kvUsage)
		x.counter("vllm:prefix_cache_queries", helpPrefixQueries, gs, func(m *engineMetrics) *counter { return &m.prefixQueries })
		x.counter("vllm:prefix_cache_hits", helpPrefixHits, gs, func(m *engineMetrics) *counter { return &m.prefixHits })
	}
	x.counter("vllm:num_preemptions", helpPreemptions, gs, func(m *engineMetrics) *counter { return &m.preemptions })
	x.counter("vllm:prompt_tokens", helpPromptTokens, gs, func(m *engineMetrics) *counter { return &m.promptTokens })
	if names == MetricsV1 {
		sources := []lbl{{"source", "local_compute"}, {"source", "local_cache_hit"}, {"source", "external_kv_transfer"}}
		x.header("vllm:prompt_tokens_by_source_total", helpPromptBySource, "counter")
		for _, g := range gs {
			x.sample("vllm:prompt_tokens_by_source_total", with(g.labels, sources[0]), g.counter(func(m *engineMetrics) *counter { return &m.promptComputed }))
			x.sample("vllm:prompt_tokens_by_source_total", with(g.labels, sources[1]), g.counter(func(m *engineMetrics) *counter { return &m.prefixHits }))
			x.sample("vllm:prompt_tokens_by_source_total", with(g.labels, sources[2]), g.counter(func(m *engineMetrics) *counter { return &m.kv.externalTokens }))
		}
		x.created("vllm:prompt_tokens_by_source", helpPromptBySource, gs, sources)
		x.counter("vllm:prompt_tokens_cached", helpPromptCached, gs, func(m *engineMetrics) *counter { return &m.prefixHits })
	}
	x.counter("vllm:generation_tokens", helpGenTokens, gs, func(m *engineMetrics) *counter { return &m.genTokens })
	if s.cfg.SpecDecodeTokens > 0 {
		// vllm/v1/spec_decode/metrics.py, SpecDecodingProm.
		x.counter("vllm:spec_decode_num_drafts", helpSpecDrafts, gs, func(m *engineMetrics) *counter { return &m.specDrafts })
		x.counter("vllm:spec_decode_num_draft_tokens", helpSpecDraftTokens, gs, func(m *engineMetrics) *counter { return &m.specDraftTokens })
		x.counter("vllm:spec_decode_num_accepted_tokens", helpSpecAccepted, gs, func(m *engineMetrics) *counter { return &m.specAccepted })
	}

	reasons := finishReasonsOld
	if names == MetricsV1 {
		reasons = finishReasonsV1
	}
	var rl []lbl
	x.header("vllm:request_success_total", helpSuccess, "counter")
	for _, g := range gs {
		for _, r := range reasons {
			x.sample("vllm:request_success_total", with(g.labels, lbl{"finished_reason", r}), g.counter(func(m *engineMetrics) *counter { return m.success[r] }))
		}
	}
	for _, r := range reasons {
		rl = append(rl, lbl{"finished_reason", r})
	}
	x.created("vllm:request_success", helpSuccess, gs, rl)

	h := func(name, help string, f func(*engineMetrics) *histogram) { x.histogram(name, help, gs, f) }
	h("vllm:request_prompt_tokens", helpReqPrompt, func(m *engineMetrics) *histogram { return m.reqPromptTokens })
	if names == MetricsV1 {
		h("vllm:request_prefill_kv_computed_tokens", helpReqPrefillKV, func(m *engineMetrics) *histogram { return m.reqPrefillKV })
	}
	h("vllm:request_generation_tokens", helpReqGen, func(m *engineMetrics) *histogram { return m.reqGenTokens })
	h("vllm:iteration_tokens_total", helpIteration, func(m *engineMetrics) *histogram { return m.iterationTokens })
	h("vllm:request_max_num_generation_tokens", helpMaxGen, func(m *engineMetrics) *histogram { return m.reqMaxGenTokens })
	h("vllm:request_params_n", helpParamsN, func(m *engineMetrics) *histogram { return m.reqParamsN })
	h("vllm:request_params_max_tokens", helpParamsMaxTokens, func(m *engineMetrics) *histogram { return m.reqMaxTokens })
	h("vllm:time_to_first_token_seconds", helpTTFT, func(m *engineMetrics) *histogram { return m.ttft })
	if names != MetricsV1 {
		h("vllm:time_per_output_token_seconds", helpTPOTOld, func(m *engineMetrics) *histogram { return m.itl })
	}
	if names != MetricsLegacy {
		h("vllm:inter_token_latency_seconds", helpITL, func(m *engineMetrics) *histogram { return m.itl })
		h("vllm:request_time_per_output_token_seconds", helpReqTPOT, func(m *engineMetrics) *histogram { return m.tpot })
	}
	h("vllm:e2e_request_latency_seconds", helpE2E, func(m *engineMetrics) *histogram { return m.e2e })
	h("vllm:request_queue_time_seconds", helpQueue, func(m *engineMetrics) *histogram { return m.queue })
	h("vllm:request_inference_time_seconds", helpInference, func(m *engineMetrics) *histogram { return m.inference })
	h("vllm:request_prefill_time_seconds", helpPrefill, func(m *engineMetrics) *histogram { return m.prefill })
	h("vllm:request_decode_time_seconds", helpDecode, func(m *engineMetrics) *histogram { return m.decode })
	if names == MetricsV1 {
		h("vllm:request_num_preemptions", helpReqPreemptions, func(m *engineMetrics) *histogram { return m.reqPreemptions })
	}
	if names == MetricsV1 && s.cfg.KVTransfer.Connector == KVConnectorNixl {
		s.renderNixl(x, gs)
	}
	x.header("vllm:cache_config_info", helpCacheConfig, "gauge")
	for _, g := range gs {
		x.sample("vllm:cache_config_info", s.cacheConfigLabels(g), 1)
	}
	return x.b
}

// cacheConfigLabels mirrors CacheConfig.metrics_info() for each surface.
func (s *Simulator) cacheConfigLabels(g *group) []lbl {
	e := g.engines[0]
	blocks := strconv.Itoa(e.totalBlocks)
	ls := []lbl{
		{"block_size", strconv.Itoa(s.cfg.BlockSize)},
		{"cache_dtype", "auto"},
		{"calculate_kv_scales", "False"},
		{"enable_prefix_caching", "True"},
		{"gpu_memory_utilization", "0.9"},
		{"is_attention_free", "False"},
		{"num_gpu_blocks", blocks},
		{"num_gpu_blocks_override", "None"},
		{"sliding_window", "None"},
	}
	switch s.cfg.MetricsNames {
	case MetricsLegacy:
		ls = append(ls, lbl{"cpu_offload_gb", "0"}, lbl{"num_cpu_blocks", "2048"}, lbl{"swap_space_bytes", "4294967296"})
	case MetricsV010:
		ls = append(ls, lbl{"cpu_offload_gb", "0"}, lbl{"num_cpu_blocks", "None"}, lbl{"prefix_caching_hash_algo", "builtin"},
			lbl{"swap_space", "4"}, lbl{"swap_space_bytes", "4294967296"})
	default:
		tokens := e.totalBlocks * e.blockSize
		ls = append(ls, lbl{"num_cpu_blocks", "None"}, lbl{"prefix_caching_hash_algo", "sha256"},
			lbl{"kv_cache_memory_bytes", "None"}, lbl{"kv_offloading_backend", "None"}, lbl{"kv_offloading_size", "None"},
			lbl{"kv_cache_size_tokens", strconv.Itoa(tokens)},
			lbl{"kv_cache_max_concurrency", pyRepr(float64(tokens) / float64(s.cfg.MaxModelLen))})
	}
	if s.cfg.MetricsNames != MetricsLegacy {
		// Info metric: engine label, never model_name.
		ls = append(ls, lbl{"engine", strconv.Itoa(e.idx)})
	}
	return ls
}

func (s *Simulator) handleMetrics(w http.ResponseWriter, r *http.Request) {
	k := s.currentKnobs()
	if k.Fault == FaultSlowMetrics && s.drawFault(k) {
		t := time.NewTimer(k.FaultDelay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.done:
			t.Stop()
			return
		}
	}
	b := s.renderEngineMetrics()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
