package collector

import (
	"math"
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// descs are the exported families for one set of static label names.
type descs struct {
	up, duration, info              *prometheus.Desc
	promptRate, genRate, requests   *prometheus.Desc
	kvUsage, cpuKVUsage, kvCapacity *prometheus.Desc
	preemptions, success            *prometheus.Desc
	ttft, itl, e2e, queue           *prometheus.Desc
	ttftGap, headroom               *prometheus.Desc
	signal                          *prometheus.Desc
}

func newDescs(static []string) *descs {
	withTarget := append([]string{"target"}, static...)
	base := append([]string{"target", "model"}, static...)
	with := func(extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &descs{
		up:       d("vllm_server_up", "1 if the last scrape of the target's vLLM /metrics succeeded, 0 otherwise.", withTarget),
		duration: d("vllm_server_scrape_duration_seconds", "Duration of the last scrape of the target's vLLM /metrics.", withTarget),
		info: d("vllm_server_info", "vLLM server facts from /version, /v1/models and vllm:cache_config_info; always 1.",
			with("version", "max_model_len", "block_size", "kv_cache_size_tokens", "metrics_schema", "ttft_includes_queue")),
		promptRate:  d("vllm_server_prompt_tokens_per_second", "Prompt (prefill) tokens processed per second over the rate window.", base),
		genRate:     d("vllm_server_generation_tokens_per_second", "Generated tokens per second over the rate window.", base),
		requests:    d("vllm_server_requests", "Requests in the server by state (running, waiting; swapped on legacy servers), summed over engines.", with("state")),
		kvUsage:     d("vllm_server_kv_cache_usage_ratio", "GPU KV cache usage (0-1), the maximum over engines.", base),
		cpuKVUsage:  d("vllm_server_cpu_kv_cache_usage_ratio", "CPU KV cache (swap space) usage (0-1) of legacy V0 servers, the maximum over engines.", base),
		kvCapacity:  d("vllm_server_kv_cache_capacity_tokens", "KV cache capacity in tokens (kv_cache_size_tokens, else num_gpu_blocks × block_size), summed over engines.", base),
		preemptions: d("vllm_server_preemptions_per_second", "Preemptions per second over the rate window.", base),
		success:     d("vllm_server_request_success_per_second", "Finished requests per second over the rate window by finished_reason.", with("finished_reason")),
		ttft:        d("vllm_server_time_to_first_token_seconds", "Server-side time to first token over the rate window (mean, and p50/p99 interpolated in the buckets).", with("stat")),
		itl:         d("vllm_server_inter_token_latency_seconds", "Server-side inter-token latency over the rate window (mean, and p50/p99 interpolated in the buckets).", with("stat")),
		e2e:         d("vllm_server_e2e_latency_seconds", "Server-side end-to-end request latency over the rate window (mean, and p50/p99 interpolated in the buckets).", with("stat")),
		queue:       d("vllm_server_queue_time_seconds", "Server-side queue time over the rate window (mean, and p50/p99 interpolated in the buckets).", with("stat")),
		ttftGap:     d("vllm_probe_server_ttft_gap_seconds", "Mean TTFT of the probes minus the server's mean TTFT (plus its mean queue time when its TTFT excludes queueing) over the same window.", base),
		signal: d("vllm_server_signal_available", "1 if the target's vLLM /metrics exports the signal's family (for any model), 0 if it does not: its panels and alerts then have no data, which is not zero.",
			append(append([]string(nil), withTarget...), "signal")),
		headroom: d("vllm_server_headroom_ratio", "Remaining capacity (0-1) by resource: kv_cache, batch_slots, throughput and overall (their minimum).", with("resource")),
	}
}

// Describe implements prometheus.Collector. It sends nothing: the collector
// is unchecked, because the static label names follow the configuration.
func (m *Manager) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector. It never waits for a scrape: it
// reads the state the scrape loops left.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	d := newDescs(m.labelNames)
	targets := m.sortedTargets()
	m.mu.Unlock()
	for _, s := range targets {
		m.collectTarget(ch, d, s)
	}
}

func (m *Manager) collectTarget(ch chan<- prometheus.Metric, d *descs, s *scraper) {
	s.mu.Lock()
	if !s.attempted {
		s.mu.Unlock()
		return
	}
	static := s.labelValues
	tl := append([]string{s.name}, static...)
	up := 0.0
	if s.up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(d.up, prometheus.GaugeValue, up, tl...)
	ch <- prometheus.MustNewConstMetric(d.duration, prometheus.GaugeValue, s.duration, tl...)
	if !s.up || len(s.ring) == 0 {
		s.mu.Unlock()
		return // no stale derived series while the server does not answer
	}
	latest := s.ring[len(s.ring)-1]
	info := s.info
	maxNumSeqs := s.maxNumSeqs
	derived := s.derived
	includesQueue := make(map[string]bool, len(latest.Models))
	for name := range latest.Models {
		includesQueue[name] = s.ttftIncludesQueueLocked(name)
	}
	s.mu.Unlock()

	for i, ok := range signalAvailability(latest) {
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(d.signal, prometheus.GaugeValue, v, append(append([]string(nil), tl...), signals[i].name)...)
	}

	models := make([]string, 0, len(latest.Models))
	for name := range latest.Models {
		models = append(models, name)
	}
	sort.Strings(models)

	probeModel := ""
	if m.probes != nil {
		probeModel = m.probes.Model(s.name)
	}
	if probeModel == "" && len(models) == 1 {
		probeModel = models[0]
	}
	saturation, hasSaturation := 0.0, false
	if m.baselines != nil {
		saturation, hasSaturation = m.baselines.SaturationOutputThroughput(s.name)
		hasSaturation = hasSaturation && saturation > 0
	}

	for _, name := range models {
		mod := latest.Models[name]
		dv := derived[name]
		labels := append([]string{s.name, name}, static...)
		with := func(extra ...string) []string { return append(append([]string(nil), labels...), extra...) }
		gauge := func(desc *prometheus.Desc, v float64, lv []string) {
			if !math.IsNaN(v) {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, lv...)
			}
		}

		maxLen := ""
		if n, ok := info.MaxModelLen[name]; ok {
			maxLen = strconv.Itoa(n)
		}
		ch <- prometheus.MustNewConstMetric(d.info, prometheus.GaugeValue, 1,
			with(info.Version, maxLen, formatCount(mod.BlockSize), formatCount(mod.KVCapacityTokens), latest.Schema,
				strconv.FormatBool(includesQueue[name]))...)

		gauge(d.requests, mod.Running, with("running"))
		gauge(d.requests, mod.Waiting, with("waiting"))
		gauge(d.requests, mod.Swapped, with("swapped"))
		gauge(d.kvUsage, mod.KVUsage, labels)
		gauge(d.cpuKVUsage, mod.CPUKVUsage, labels)
		gauge(d.kvCapacity, mod.KVCapacityTokens, labels)

		genRate := math.NaN()
		if dv != nil {
			genRate = dv.GenerationTokensPerSecond
			gauge(d.promptRate, dv.PromptTokensPerSecond, labels)
			gauge(d.genRate, dv.GenerationTokensPerSecond, labels)
			gauge(d.preemptions, dv.PreemptionsPerSecond, labels)
			reasons := make([]string, 0, len(dv.RequestSuccessPerSecond))
			for r := range dv.RequestSuccessPerSecond {
				reasons = append(reasons, r)
			}
			sort.Strings(reasons)
			for _, r := range reasons {
				gauge(d.success, dv.RequestSuccessPerSecond[r], with(r))
			}
			for key, desc := range map[string]*prometheus.Desc{"ttft": d.ttft, "itl": d.itl, "e2e": d.e2e, "queue": d.queue} {
				if l, ok := dv.Latencies[key]; ok {
					gauge(desc, l.Mean, with("mean"))
					gauge(desc, l.P50, with("p50"))
					gauge(desc, l.P99, with("p99"))
				}
			}
			if name == probeModel && m.probes != nil && !dv.Start.IsZero() {
				if l, ok := dv.Latencies["ttft"]; ok {
					if probeMean, n := m.probes.MeanTTFT(s.name, dv.Start); n > 0 {
						queue := math.NaN()
						if q, ok := dv.Latencies["queue"]; ok {
							queue = q.Mean
						}
						gauge(d.ttftGap, TTFTGap(probeMean, l.Mean, queue, includesQueue[name]), labels)
					}
				}
			}
		}

		h := ComputeHeadroom(mod, maxNumSeqs, genRate, saturation, hasSaturation)
		for _, r := range []struct {
			name string
			v    float64
		}{{"kv_cache", h.KVCache}, {"batch_slots", h.BatchSlots}, {"throughput", h.Throughput}, {"overall", h.Overall}} {
			gauge(d.headroom, r.v, with(r.name))
		}
	}
}

// formatCount renders a whole count for a label; "" when unknown.
func formatCount(v float64) string {
	if math.IsNaN(v) || v <= 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Headroom holds vllm_server_headroom_ratio by resource; NaN means absent.
type Headroom struct {
	KVCache, BatchSlots, Throughput, Overall float64
}

// ComputeHeadroom derives the headroom ratios of one model, each clamped to [0,1]:
//
//	kv_cache    = 1 − KV usage                                 (absent without a KV usage gauge)
//	batch_slots = 0 while requests wait, else
//	              1 − running ÷ (max_num_seqs × engines)       (absent when max_num_seqs is not configured;
//	                                                            max_num_seqs is per engine scheduler)
//	throughput  = 1 − generation tokens/s ÷ baseline saturation output tokens/s
//	                                                           (absent without a baseline or a rate)
//	overall     = min of the above that are present            (absent when none is)
func ComputeHeadroom(mod *Model, maxNumSeqs int, genRate, saturation float64, hasSaturation bool) Headroom {
	h := Headroom{KVCache: math.NaN(), BatchSlots: math.NaN(), Throughput: math.NaN(), Overall: math.NaN()}
	if !math.IsNaN(mod.KVUsage) {
		h.KVCache = clamp01(1 - mod.KVUsage)
	}
	if maxNumSeqs > 0 && !math.IsNaN(mod.Running) {
		engines := mod.Engines
		if engines < 1 {
			engines = 1
		}
		if !math.IsNaN(mod.Waiting) && mod.Waiting > 0 {
			h.BatchSlots = 0
		} else {
			h.BatchSlots = clamp01(1 - mod.Running/float64(maxNumSeqs*engines))
		}
	}
	if hasSaturation && saturation > 0 && !math.IsNaN(genRate) {
		h.Throughput = clamp01(1 - genRate/saturation)
	}
	for _, v := range []float64{h.KVCache, h.BatchSlots, h.Throughput} {
		if !math.IsNaN(v) && (math.IsNaN(h.Overall) || v < h.Overall) {
			h.Overall = v
		}
	}
	return h
}

func clamp01(v float64) float64 {
	return math.Max(0, math.Min(1, v))
}
