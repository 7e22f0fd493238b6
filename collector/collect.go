package collector

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/safemetric"
)

// descs are the exported families for one set of static label names.
type descs struct {
	up, duration, info              *prometheus.Desc
	promptRate, genRate, requests   *prometheus.Desc
	kvUsage, cpuKVUsage, kvCapacity *prometheus.Desc
	preemptions, success            *prometheus.Desc
	ttft, itl, e2e, queue           *prometheus.Desc
	kvTransfer, kvTransferFailures  *prometheus.Desc
	waitingByReason, promptSource   *prometheus.Desc
	promptCached, flops, memory     *prometheus.Desc
	mfu, kvBlockLifetime, admission *prometheus.Desc
	signal, servedModel             *prometheus.Desc
	recognized, sleepLevel          *prometheus.Desc
	specAcceptance, specPerDraft    *prometheus.Desc
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
		info: d("vllm_server_info", "Server facts from /version, /v1/models and the engine's /metrics (engine profile, vLLM's metrics schema and cache config); always 1.",
			with("engine", "version", "max_model_len", "block_size", "kv_cache_size_tokens", "metrics_schema", "ttft_includes_queue")),
		recognized: d("vllm_server_engine_recognized", "1 if the target's /metrics matched an engine profile (engine label: the profile), 0 if it answered but matched none (engine=\"unknown\"): then no engine signal is read.",
			append(append([]string(nil), withTarget...), "engine")),
		sleepLevel:         d("vllm_server_sleep_level", "vLLM sleep mode from vllm:engine_sleep_state: 0 awake, 1 weights offloaded (level 1), 2 weights and KV cache discarded (level 2); the deepest over engines. Absent when the engine does not report it.", base),
		specAcceptance:     d("vllm_server_spec_decode_acceptance_ratio", "Speculative decoding draft acceptance rate over the rate window: accepted draft tokens / draft tokens.", base),
		specPerDraft:       d("vllm_server_spec_decode_accepted_tokens_per_draft", "Mean draft tokens accepted per speculative draft over the rate window.", base),
		promptRate:         d("vllm_server_prompt_tokens_per_second", "Prompt (prefill) tokens processed per second over the rate window.", base),
		genRate:            d("vllm_server_generation_tokens_per_second", "Generated tokens per second over the rate window.", base),
		requests:           d("vllm_server_requests", "Requests in the server by state (running, waiting; swapped on legacy servers), summed over engines.", with("state")),
		kvUsage:            d("vllm_server_kv_cache_usage_ratio", "GPU KV cache usage (0-1), the maximum over engines.", base),
		cpuKVUsage:         d("vllm_server_cpu_kv_cache_usage_ratio", "CPU KV cache (swap space) usage (0-1) of legacy V0 servers, the maximum over engines.", base),
		kvCapacity:         d("vllm_server_kv_cache_capacity_tokens", "KV cache capacity in tokens (kv_cache_size_tokens, else num_gpu_blocks × block_size), summed over engines.", base),
		preemptions:        d("vllm_server_preemptions_per_second", "Preemptions per second over the rate window.", base),
		success:            d("vllm_server_request_success_per_second", "Finished requests per second over the rate window by finished_reason.", with("finished_reason")),
		ttft:               d("vllm_server_time_to_first_token_seconds", "Server-side time to first token over the rate window (mean, and p50/p99 interpolated in the buckets).", with("stat")),
		itl:                d("vllm_server_inter_token_latency_seconds", "Server-side inter-token latency over the rate window (mean, and p50/p99 interpolated in the buckets).", with("stat")),
		e2e:                d("vllm_server_e2e_latency_seconds", "Server-side end-to-end request latency over the rate window (mean, and p50/p99 interpolated in the buckets).", with("stat")),
		queue:              d("vllm_server_queue_time_seconds", "Server-side queue time over the rate window (mean, and p50/p99 interpolated in the buckets).", with("stat")),
		kvTransfer:         d("vllm_server_kv_transfer_seconds", "Duration of the KV cache transfers of prefill/decode disaggregation over the rate window (vLLM's NIXL transfers on the pod that pulls them, SGLang's KV transfer latency): mean, and p50/p99 interpolated in the buckets.", with("stat")),
		kvTransferFailures: d("vllm_server_kv_transfer_failures_per_second", "Failed KV cache transfers of prefill/decode disaggregation per second over the rate window.", base),
		waitingByReason:    d("vllm_server_waiting_requests", "Requests waiting in the server by reason (vllm:num_requests_waiting_by_reason): capacity (no room in the batch), deferred (waiting for a LoRA slot, remote KV blocks or a grammar).", with("reason")),
		promptSource:       d("vllm_server_prompt_tokens_source_ratio", "Share of the prompt tokens over the rate window by source (vllm:prompt_tokens_by_source_total): local_compute, local_cache_hit (the prefix cache), external_kv_transfer (a remote prefill).", with("source")),
		promptCached:       d("vllm_server_prompt_tokens_cached_ratio", "Cached prompt tokens (local and external, vllm:prompt_tokens_cached_total) over prompt tokens, over the rate window.", base),
		flops:              d("vllm_server_flops_per_gpu_per_second", "Estimated floating-point operations per second per GPU over the rate window (vllm:estimated_flops_per_gpu_total, --enable-mfu-metrics).", base),
		memory:             d("vllm_server_memory_bytes_per_gpu_per_second", "Estimated memory traffic per GPU over the rate window by kind, read or write (vllm:estimated_read_bytes_per_gpu_total, vllm:estimated_write_bytes_per_gpu_total).", with("kind")),
		mfu:                d("vllm_server_mfu_ratio", "Model FLOPs utilisation: vllm_server_flops_per_gpu_per_second over the target's peak_flops_per_gpu; absent where the peak is not configured.", base),
		kvBlockLifetime:    d("vllm_server_kv_block_lifetime_seconds", "How long KV cache blocks stayed resident over the rate window (vllm:kv_block_lifetime_seconds, --kv-cache-metrics): mean, and p50/p99 interpolated in the buckets.", with("stat")),
		admission:          d("vllm_server_admission_rejections_per_second", "Requests the engine refused at admission per second by reason (vllm:admission_rejections_total): its own load shedding, the 503 the probes read as overloaded.", with("reason")),
		signal: d("vllm_server_signal_available", "1 if the target's vLLM /metrics exports the signal's family (for any model), 0 if it does not: its panels and alerts then have no data, which is not zero.",
			append(append([]string(nil), withTarget...), "signal")),
		servedModel: d("vllm_server_served_model_info", "Models the target serves (/v1/models) and the model_name their traffic is counted under in vLLM's /metrics: a LoRA adapter's base model, else the model itself; always 1.",
			with("base_model")),
	}
}

// Describe implements prometheus.Collector. It sends nothing: the collector
// is unchecked, because the static label names follow the configuration.
func (m *Manager) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector. It never waits for a scrape: it
// reads the state the scrape loops left.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	d := m.descs
	targets := m.sortedTargets()
	m.mu.Unlock()
	if d == nil {
		return
	}
	for _, s := range targets {
		m.collectTarget(ch, d, s)
	}
}

// ExpositionTargets implements exposition.Partitioned.
func (m *Manager) ExpositionTargets() []string {
	byName := m.byName.Load()
	if byName == nil {
		return nil
	}
	names := make([]string, 0, len(*byName))
	for name := range *byName {
		names = append(names, name)
	}
	return names
}

// ExpositionVersion implements exposition.Partitioned: the epoch of the
// targets and the scrapes of target.
func (m *Manager) ExpositionVersion(target string) uint64 {
	v := m.epoch.Load() << 40
	if s := m.target(target); s != nil {
		v |= s.version.Load() & (1<<40 - 1)
	}
	return v
}

// ExpositionIndependent implements exposition.Independent: a target's
// series are made of its scrapes alone.
func (*Manager) ExpositionIndependent() {}

// CollectTarget implements exposition.Partitioned.
func (m *Manager) CollectTarget(target string, ch chan<- prometheus.Metric) {
	m.mu.Lock()
	d := m.descs
	m.mu.Unlock()
	if s := m.target(target); s != nil && d != nil {
		m.collectTarget(ch, d, s)
	}
}

// CollectShared implements exposition.Partitioned: every series of the
// collector belongs to a target.
func (m *Manager) CollectShared(chan<- prometheus.Metric) {}

func (m *Manager) collectTarget(ch chan<- prometheus.Metric, d *descs, s *scraper) {
	s.mu.Lock()
	if !s.attempted {
		s.mu.Unlock()
		return
	}
	if s.gateway {
		gw := s.gw
		s.mu.Unlock()
		if gw == nil {
			m.errs.Send(ch, s.name, gwUpDesc, prometheus.GaugeValue, 0, s.name)
			return
		}
		m.errs.Send(ch, s.name, gwUpDesc, prometheus.GaugeValue, 1, s.name)
		gw.collect(s.name, ch, m.errs)
		return
	}
	static := s.labelValues
	tl := append([]string{s.name}, static...)
	m.errs.Send(ch, s.name, d.up, prometheus.GaugeValue, b2f(s.up), tl...)
	m.errs.Send(ch, s.name, d.duration, prometheus.GaugeValue, s.duration, tl...)
	v, ok := s.viewLocked()
	s.mu.Unlock()
	if !ok {
		return // no stale derived series while the server does not answer
	}
	m.errs.Send(ch, s.name, d.recognized, prometheus.GaugeValue, b2f(v.latest.Engine != EngineUnknown),
		append(slices.Clone(tl), v.latest.Engine)...)
	for i, ok := range signalAvailability(v.latest) {
		m.errs.Send(ch, s.name, d.signal, prometheus.GaugeValue, b2f(ok), append(slices.Clone(tl), signals[i].name)...)
	}
	for _, id := range slices.Sorted(maps.Keys(v.Base)) {
		m.errs.Send(ch, s.name, d.servedModel, prometheus.GaugeValue, 1,
			append(append([]string{s.name, id}, static...), v.Base[id])...)
	}
	for _, mv := range v.Models {
		collectModel(ch, m.errs, s.name, d, &v, &mv, append([]string{s.name, mv.Name}, static...))
	}
}

// collectModel sends the series of one model of a scraped target; labels
// are its target, model and static label values.
func collectModel(ch chan<- prometheus.Metric, errs safemetric.Sender, target string, d *descs, v *View, mv *ModelView, labels []string) {
	with := func(extra ...string) []string { return append(slices.Clone(labels), extra...) }
	gauge := func(desc *prometheus.Desc, v float64, lv []string) {
		if !math.IsNaN(v) {
			errs.Send(ch, target, desc, prometheus.GaugeValue, v, lv...)
		}
	}
	mod := mv.Model
	maxLen := ""
	if n, ok := v.info.MaxModelLen[mv.Name]; ok {
		maxLen = strconv.Itoa(n)
	}
	errs.Send(ch, target, d.info, prometheus.GaugeValue, 1,
		with(v.latest.Engine, v.info.Version, maxLen, formatCount(mod.BlockSize), formatCount(mod.KVCapacityTokens), v.latest.Schema,
			strconv.FormatBool(mv.TTFTIncludesQueue))...)
	gauge(d.sleepLevel, mod.SleepLevel, labels)
	gauge(d.requests, mod.Running, with("running"))
	gauge(d.requests, mod.Waiting, with("waiting"))
	gauge(d.requests, mod.Swapped, with("swapped"))
	gauge(d.kvUsage, mod.KVUsage, labels)
	gauge(d.cpuKVUsage, mod.CPUKVUsage, labels)
	gauge(d.kvCapacity, mod.KVCapacityTokens, labels)
	for _, r := range slices.Sorted(maps.Keys(mod.WaitingByReason)) {
		gauge(d.waitingByReason, mod.WaitingByReason[r], with(r))
	}
	dv := mv.Derived
	if dv == nil {
		return
	}
	gauge(d.promptRate, dv.PromptTokensPerSecond, labels)
	gauge(d.genRate, dv.GenerationTokensPerSecond, labels)
	gauge(d.preemptions, dv.PreemptionsPerSecond, labels)
	gauge(d.kvTransferFailures, dv.KVTransferFailuresPerSecond, labels)
	for _, src := range slices.Sorted(maps.Keys(dv.PromptSourceRatio)) {
		gauge(d.promptSource, dv.PromptSourceRatio[src], with(src))
	}
	gauge(d.promptCached, dv.PromptCachedRatio, labels)
	gauge(d.flops, dv.FLOPsPerGPUPerSecond, labels)
	gauge(d.memory, dv.ReadBytesPerGPUPerSecond, with("read"))
	gauge(d.memory, dv.WriteBytesPerGPUPerSecond, with("write"))
	if v.PeakFLOPSPerGPU > 0 {
		gauge(d.mfu, dv.FLOPsPerGPUPerSecond/v.PeakFLOPSPerGPU, labels)
	}
	for _, r := range slices.Sorted(maps.Keys(dv.AdmissionRejectionsPerSecond)) {
		gauge(d.admission, dv.AdmissionRejectionsPerSecond[r], with(r))
	}
	gauge(d.specAcceptance, dv.SpecAcceptanceRate, labels)
	gauge(d.specPerDraft, dv.SpecAcceptedPerDraft, labels)
	for _, r := range slices.Sorted(maps.Keys(dv.RequestSuccessPerSecond)) {
		gauge(d.success, dv.RequestSuccessPerSecond[r], with(r))
	}
	for _, lat := range [...]struct {
		key  string
		desc *prometheus.Desc
	}{{"ttft", d.ttft}, {"itl", d.itl}, {"e2e", d.e2e}, {"queue", d.queue}, {"kv_transfer", d.kvTransfer}, {"kv_block_lifetime", d.kvBlockLifetime}} {
		if l, ok := dv.Latencies[lat.key]; ok {
			gauge(lat.desc, l.Mean, with("mean"))
			gauge(lat.desc, l.P50, with("p50"))
			gauge(lat.desc, l.P99, with("p99"))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// formatCount renders a whole count for a label; "" when unknown.
func formatCount(v float64) string {
	if math.IsNaN(v) || v <= 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
