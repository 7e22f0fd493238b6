package collector

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Metric schemas of vLLM, the value of vllm_server_info's metrics_schema
// label. They name which family names a server uses, not a vLLM version; each
// is decided from the families that define it (see schema).
const (
	// SchemaV1 is the V1 engine's current names: vllm:kv_cache_usage_perc and
	// vllm:prefix_cache_*_total, no V0-only family. A deprecated family that
	// lives on next to them (vllm:time_per_output_token_seconds until 0.12)
	// does not change it.
	SchemaV1 = "v1"
	// SchemaTransition is the V1 engine with the names it inherited from V0:
	// vllm:gpu_cache_usage_perc / vllm:gpu_prefix_cache_*_total, alone (0.8,
	// 0.9) or next to the new names (0.10), and no V0-only family.
	SchemaTransition = "transition"
	// SchemaLegacy is the V0 engine: its V0-only families (vllm:num_requests_swapped,
	// vllm:cpu_cache_usage_perc, vllm:gpu_prefix_cache_hit_rate, ...) are exported.
	SchemaLegacy = "legacy"
)

// Bucket is one cumulative histogram bucket.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Histogram is a classic cumulative histogram, summed over engines.
type Histogram struct {
	Buckets []Bucket // sorted by UpperBound, cumulative; the last one is +Inf
	Sum     float64
	Count   float64
}

// Model holds the normalised metrics of one served model (one model_name),
// aggregated over every engine: counts and counters are summed, usage ratios
// take the maximum. A scalar that the server did not expose is NaN; an absent
// histogram is nil.
type Model struct {
	Name    string
	Engines int // distinct engine label values (1 for V0 servers without the label)

	Running    float64 // vllm:num_requests_running
	Waiting    float64 // vllm:num_requests_waiting (else the sum of ..._by_reason)
	Swapped    float64 // vllm:num_requests_swapped (legacy only)
	KVUsage    float64 // vllm:kv_cache_usage_perc, else vllm:gpu_cache_usage_perc (0-1)
	CPUKVUsage float64 // vllm:cpu_cache_usage_perc (legacy only, 0-1)

	// KVCapacityTokens is the KV cache capacity in tokens from vllm:cache_config_info
	// (kv_cache_size_tokens, else num_gpu_blocks × block_size), summed over engines.
	KVCapacityTokens float64
	BlockSize        float64 // block_size label of vllm:cache_config_info

	PromptTokens       float64 // vllm:prompt_tokens_total
	GenerationTokens   float64 // vllm:generation_tokens_total
	Preemptions        float64 // vllm:num_preemptions_total
	PrefixCacheQueries float64 // vllm:prefix_cache_queries_total, else gpu_prefix_cache_queries_total
	PrefixCacheHits    float64 // vllm:prefix_cache_hits_total, else gpu_prefix_cache_hits_total
	// RequestSuccess is vllm:request_success_total by finished_reason.
	RequestSuccess map[string]float64

	TTFT  *Histogram // vllm:time_to_first_token_seconds
	ITL   *Histogram // vllm:inter_token_latency_seconds, else vllm:time_per_output_token_seconds
	E2E   *Histogram // vllm:e2e_request_latency_seconds
	Queue *Histogram // vllm:request_queue_time_seconds
	// Prefill is vllm:request_prefill_time_seconds (scheduled → first
	// token); it tells whether TTFT counts the queue (ttftQueueEvidence).
	Prefill *Histogram
	// GenerationTokensPerRequest is vllm:request_generation_tokens: output
	// tokens of each finished request.
	GenerationTokensPerRequest *Histogram

	// Speculative decoding counters (vllm:spec_decode_num_drafts_total,
	// ..._num_draft_tokens_total, ..._num_accepted_tokens_total), summed
	// over engines; NaN without speculative decoding.
	SpecDrafts         float64
	SpecDraftTokens    float64
	SpecAcceptedTokens float64

	// SleepLevel is vLLM's sleep mode from vllm:engine_sleep_state: 0 awake,
	// 1 weights offloaded (sleep level 1), 2 weights and KV cache discarded
	// (level 2); the deepest over engines. NaN when the engine does not say.
	SleepLevel float64

	// KVTransfer is the duration of the KV cache transfers of
	// prefill/decode disaggregation (vllm:nixl_xfer_time_seconds on the
	// pod that pulls them, SGLang's sglang:kv_transfer_latency_ms);
	// KVTransferFailures counts the failed ones (vllm:nixl_num_failed_transfers_total,
	// sglang:num_transfer_failed_reqs_total). Nil and NaN on an engine
	// without a KV connector.
	KVTransfer         *Histogram
	KVTransferFailures float64

	// vLLM's newest series (2026). WaitingByReason is
	// vllm:num_requests_waiting_by_reason by reason (capacity: no room in
	// the batch; deferred: waiting for a LoRA slot, remote KV blocks or a
	// grammar), nil without it. PromptBySource is
	// vllm:prompt_tokens_by_source_total by source (local_compute,
	// local_cache_hit, external_kv_transfer), nil without it; PromptCached
	// is vllm:prompt_tokens_cached_total (local and external).
	WaitingByReason map[string]float64
	PromptBySource  map[string]float64
	PromptCached    float64
	// FLOPsPerGPU, ReadBytesPerGPU and WriteBytesPerGPU are the model FLOPs
	// utilisation inputs (vllm:estimated_flops_per_gpu_total and the read
	// and write byte counters, --enable-mfu-metrics; SGLang's
	// sglang:estimated_*_per_gpu_total), the mean over engines.
	FLOPsPerGPU, ReadBytesPerGPU, WriteBytesPerGPU float64
	// KVBlockLifetime is vllm:kv_block_lifetime_seconds (--kv-cache-metrics):
	// how long KV blocks stay resident.
	KVBlockLifetime *Histogram
	// AdmissionRejections is vllm:admission_rejections_total by reason,
	// nil without it.
	AdmissionRejections map[string]float64
}

// Snapshot is one normalised scrape of an engine's /metrics endpoint.
type Snapshot struct {
	Time time.Time // when the scrape started
	// Engine is the profile the payload was read with (vllm, sglang, ...),
	// EngineUnknown when it matched none.
	Engine string
	// Schema is vLLM's metric schema (SchemaV1, SchemaTransition,
	// SchemaLegacy) for engines read by vLLM's rules, else "".
	Schema string
	Models map[string]*Model // by model name
	// FamiliesSeen names a few families of an unrecognised payload, for the
	// warning that says so; nil otherwise.
	FamiliesSeen []string
}

// Running is the sum of running requests over all models (NaN when none is exposed).
func (s *Snapshot) Running() float64 { return s.Sum(func(m *Model) float64 { return m.Running }) }

// Waiting is the sum of waiting requests over all models (NaN when none is exposed).
func (s *Snapshot) Waiting() float64 { return s.Sum(func(m *Model) float64 { return m.Waiting }) }

// Sum is the sum of f over all models, NaN values left out (NaN when every
// model's is NaN).
func (s *Snapshot) Sum(f func(*Model) float64) float64 {
	total, ok := 0.0, false
	for _, m := range s.Models {
		if v := f(m); !math.IsNaN(v) {
			total += v
			ok = true
		}
	}
	if !ok {
		return math.NaN()
	}
	return total
}

// vLLM metric names, as exposed.
const (
	mRunning          = "vllm:num_requests_running"
	mWaiting          = "vllm:num_requests_waiting"
	mWaitingByReason  = "vllm:num_requests_waiting_by_reason"
	mSwapped          = "vllm:num_requests_swapped"
	mKVUsage          = "vllm:kv_cache_usage_perc"
	mGPUCacheUsage    = "vllm:gpu_cache_usage_perc"
	mCPUCacheUsage    = "vllm:cpu_cache_usage_perc"
	mGPUPrefixHitRate = "vllm:gpu_prefix_cache_hit_rate"
	mCPUPrefixHitRate = "vllm:cpu_prefix_cache_hit_rate"
	mPromptTokens     = "vllm:prompt_tokens_total"
	mGenTokens        = "vllm:generation_tokens_total"
	mPreemptions      = "vllm:num_preemptions_total"
	mPrefixQueries    = "vllm:prefix_cache_queries_total"
	mPrefixHits       = "vllm:prefix_cache_hits_total"
	mGPUPrefixQ       = "vllm:gpu_prefix_cache_queries_total"
	mGPUPrefixH       = "vllm:gpu_prefix_cache_hits_total"
	mRequestSuccess   = "vllm:request_success_total"
	mTTFT             = "vllm:time_to_first_token_seconds"
	mITL              = "vllm:inter_token_latency_seconds"
	mTPOTOld          = "vllm:time_per_output_token_seconds"
	mE2E              = "vllm:e2e_request_latency_seconds"
	mQueue            = "vllm:request_queue_time_seconds"
	mPrefill          = "vllm:request_prefill_time_seconds"
	mReqGenTokens     = "vllm:request_generation_tokens"
	mCacheConfig      = "vllm:cache_config_info"
	mSleepState       = "vllm:engine_sleep_state"
	mSpecDrafts       = "vllm:spec_decode_num_drafts_total"
	mSpecDraftTokens  = "vllm:spec_decode_num_draft_tokens_total"
	mSpecAccepted     = "vllm:spec_decode_num_accepted_tokens_total"
	// NIXL, vLLM's KV connector for prefill/decode disaggregation:
	// NixlPromMetrics in vllm-project/vllm
	// vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py
	// (labels model_name and engine).
	mNixlXferTime = "vllm:nixl_xfer_time_seconds"
	mNixlFailed   = "vllm:nixl_num_failed_transfers_total"
	// vLLM's newest families (vllm/v1/metrics/loggers.py on main, 2026; the
	// MFU counters of vllm/v1/metrics/perf.py with --enable-mfu-metrics, the
	// residency histograms of --kv-cache-metrics, admission control's
	// rejections).
	mPromptBySource   = "vllm:prompt_tokens_by_source_total"
	mPromptCached     = "vllm:prompt_tokens_cached_total"
	mFLOPsPerGPU      = "vllm:estimated_flops_per_gpu_total"
	mReadBytesPerGPU  = "vllm:estimated_read_bytes_per_gpu_total"
	mWriteBytesPerGPU = "vllm:estimated_write_bytes_per_gpu_total"
	mKVBlockLifetime  = "vllm:kv_block_lifetime_seconds"
	mAdmissionRejects = "vllm:admission_rejections_total"

	lModel  = "model_name"
	lEngine = "engine"
)

// families indexes decoded metric families by name.
type families map[string]*dto.MetricFamily

func labelValue(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// scalar is the value of a counter, gauge or untyped sample. The text decoder
// reads OpenMetrics counters as untyped families named ..._total, the text and
// protobuf formats as counters of the same name; only the name matters here.
func scalar(m *dto.Metric) (float64, bool) {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	}
	return 0, false
}

// perModel visits every sample of family name that carries a non-empty
// model_name. Series without model_name (a production-stack router re-exporting
// vLLM names with a server label) are ignored.
func (fs families) perModel(name string, visit func(model, engine string, m *dto.Metric)) {
	mf := fs[name]
	if mf == nil {
		return
	}
	for _, m := range mf.GetMetric() {
		model, ok := labelValue(m, lModel)
		if !ok || model == "" {
			continue
		}
		engine, _ := labelValue(m, lEngine)
		visit(model, engine, m)
	}
}

// has reports whether family name has at least one series with model_name.
func (fs families) has(name string) bool {
	found := false
	fs.perModel(name, func(string, string, *dto.Metric) { found = true })
	return found
}

func newModel(name string) *Model {
	nan := math.NaN()
	return &Model{
		Name: name, Running: nan, Waiting: nan, Swapped: nan, KVUsage: nan, CPUKVUsage: nan,
		KVCapacityTokens: nan, BlockSize: nan, PromptTokens: nan, GenerationTokens: nan,
		Preemptions: nan, PrefixCacheQueries: nan, PrefixCacheHits: nan,
		SpecDrafts: nan, SpecDraftTokens: nan, SpecAcceptedTokens: nan, SleepLevel: nan,
		KVTransferFailures: nan, PromptCached: nan,
		FLOPsPerGPU: nan, ReadBytesPerGPU: nan, WriteBytesPerGPU: nan,
	}
}

// normalise maps decoded families to a Snapshot by the profile of engine
// forced ("": the one detected). seen names a few families of the payload
// for an unrecognised one.
func normalise(fs families, at time.Time, forced string, seen []string) *Snapshot {
	s := &Snapshot{Time: at, Models: map[string]*Model{}}
	p := detectProfile(fs, forced)
	switch {
	case p == nil:
		s.Engine = EngineUnknown
		s.FamiliesSeen = seen
		if len(s.FamiliesSeen) == 0 {
			s.FamiliesSeen = fs.names(maxFamiliesSeen)
		}
	case p.VLLMPrefixes != nil:
		s.Engine = p.Engine
		vfs := p.renameToVLLM(fs)
		s.Schema = schema(vfs)
		normaliseVLLM(vfs, s)
	default:
		s.Engine = p.Engine
		normaliseProfile(p, fs, s)
	}
	return s
}

// maxFamiliesSeen bounds the families an unrecognised payload's warning names.
const maxFamiliesSeen = 5

// names returns up to n family names of fs, sorted.
func (fs families) names(n int) []string {
	out := make([]string, 0, len(fs))
	for name := range fs {
		out = append(out, name)
	}
	sort.Strings(out)
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// normaliseVLLM maps families named by any of vLLM's naming eras into s.
func normaliseVLLM(fs families, s *Snapshot) {
	engines := map[string]map[string]struct{}{}
	get := func(model, engine string) *Model {
		m := s.Models[model]
		if m == nil {
			m = newModel(model)
			s.Models[model] = m
			engines[model] = map[string]struct{}{}
		}
		engines[model][engine] = struct{}{}
		return m
	}
	// Every family read here that names a model registers it, so a model is
	// known even when it exposes only some of the series below, and every
	// rule below finds its model registered (a target sending only, say, the
	// speculative-decoding counters must not crash the collector).
	for name := range vllmFamilies {
		fs.perModel(name, func(model, engine string, _ *dto.Metric) { get(model, engine) })
	}

	// sum adds up every series of name per model; max takes the largest.
	sum := func(name string, field func(*Model) *float64) {
		fs.perModel(name, func(model, _ string, mt *dto.Metric) {
			if v, ok := scalar(mt); ok {
				p := field(s.Models[model])
				if math.IsNaN(*p) {
					*p = 0
				}
				*p += v
			}
		})
	}
	maxOf := func(name string, field func(*Model) *float64) {
		fs.perModel(name, func(model, _ string, mt *dto.Metric) {
			if v, ok := scalar(mt); ok {
				p := field(s.Models[model])
				if math.IsNaN(*p) || v > *p {
					*p = v
				}
			}
		})
	}
	sum(mRunning, func(m *Model) *float64 { return &m.Running })
	sum(mWaiting, func(m *Model) *float64 { return &m.Waiting })
	sum(mSwapped, func(m *Model) *float64 { return &m.Swapped })
	maxOf(mCPUCacheUsage, func(m *Model) *float64 { return &m.CPUKVUsage })
	sum(mPromptTokens, func(m *Model) *float64 { return &m.PromptTokens })
	sum(mGenTokens, func(m *Model) *float64 { return &m.GenerationTokens })
	sum(mPreemptions, func(m *Model) *float64 { return &m.Preemptions })
	sum(mSpecDrafts, func(m *Model) *float64 { return &m.SpecDrafts })
	sum(mSpecDraftTokens, func(m *Model) *float64 { return &m.SpecDraftTokens })
	sum(mSpecAccepted, func(m *Model) *float64 { return &m.SpecAcceptedTokens })
	applySleepState(fs, s)

	// Waiting falls back to the sum over reasons when the total is missing.
	waitingByReason := map[string]float64{}
	fs.perModel(mWaitingByReason, func(model, _ string, mt *dto.Metric) {
		if v, ok := scalar(mt); ok {
			waitingByReason[model] += v
			addTo(&s.Models[model].WaitingByReason, boundedLabel(mt, "reason"), v)
		}
	})
	fs.perModel(mPromptBySource, func(model, _ string, mt *dto.Metric) {
		if v, ok := scalar(mt); ok {
			addTo(&s.Models[model].PromptBySource, boundedLabel(mt, "source"), v)
		}
	})
	fs.perModel(mAdmissionRejects, func(model, _ string, mt *dto.Metric) {
		if v, ok := scalar(mt); ok {
			addTo(&s.Models[model].AdmissionRejections, boundedLabel(mt, "reason"), v)
		}
	})
	sum(mPromptCached, func(m *Model) *float64 { return &m.PromptCached })
	// The MFU inputs are per GPU: the mean over the engines (data-parallel
	// ranks), each a GPU's own count.
	for name, field := range map[string]func(*Model) *float64{
		mFLOPsPerGPU:      func(m *Model) *float64 { return &m.FLOPsPerGPU },
		mReadBytesPerGPU:  func(m *Model) *float64 { return &m.ReadBytesPerGPU },
		mWriteBytesPerGPU: func(m *Model) *float64 { return &m.WriteBytesPerGPU },
	} {
		n := map[string]int{}
		sum(name, field)
		fs.perModel(name, func(model, _ string, _ *dto.Metric) { n[model]++ })
		for model, k := range n {
			*field(s.Models[model]) /= float64(k)
		}
	}
	for model, v := range waitingByReason {
		if m := s.Models[model]; math.IsNaN(m.Waiting) {
			m.Waiting = v
		}
	}

	// Renamed series: prefer the new name per model, fall back to the old one.
	preferNew(fs, s, mKVUsage, mGPUCacheUsage, true, func(m *Model) *float64 { return &m.KVUsage })
	preferNew(fs, s, mPrefixQueries, mGPUPrefixQ, false, func(m *Model) *float64 { return &m.PrefixCacheQueries })
	preferNew(fs, s, mPrefixHits, mGPUPrefixH, false, func(m *Model) *float64 { return &m.PrefixCacheHits })

	fs.perModel(mRequestSuccess, func(model, _ string, mt *dto.Metric) {
		v, ok := scalar(mt)
		if !ok {
			return
		}
		// vLLM labels finished_reason; some servers speaking its names use
		// finish_reason (the OpenAI field's name) instead.
		reason, ok := labelValue(mt, "finished_reason")
		if !ok {
			reason, _ = labelValue(mt, "finish_reason")
		}
		m := s.Models[model]
		if m.RequestSuccess == nil {
			m.RequestSuccess = map[string]float64{}
		}
		m.RequestSuccess[reason] += v
	})

	for model, m := range s.Models {
		m.TTFT = histogram(fs, mTTFT, model)
		if m.ITL = histogram(fs, mITL, model); m.ITL == nil {
			m.ITL = histogram(fs, mTPOTOld, model)
		}
		m.E2E = histogram(fs, mE2E, model)
		m.Queue = histogram(fs, mQueue, model)
		m.Prefill = histogram(fs, mPrefill, model)
		m.GenerationTokensPerRequest = histogram(fs, mReqGenTokens, model)
		m.KVTransfer = histogram(fs, mNixlXferTime, model)
		m.KVBlockLifetime = histogram(fs, mKVBlockLifetime, model)
		m.Engines = len(engines[model])
	}
	fs.perModel(mNixlFailed, func(model, _ string, mt *dto.Metric) {
		if v, ok := scalar(mt); ok {
			m := s.Models[model]
			if math.IsNaN(m.KVTransferFailures) {
				m.KVTransferFailures = 0
			}
			m.KVTransferFailures += v
		}
	})

	applyCacheConfig(fs, s)
}

// applySleepState reads vllm:engine_sleep_state: per engine one series per
// sleep_state, the one set to 1 telling the state. A model's level is the
// deepest of its engines'.
func applySleepState(fs families, s *Snapshot) {
	fs.perModel(mSleepState, func(model, _ string, mt *dto.Metric) {
		v, ok := scalar(mt)
		m := s.Models[model]
		if !ok || m == nil {
			return
		}
		state, _ := labelValue(mt, "sleep_state")
		level, known := map[string]float64{"awake": 0, "weights_offloaded": 1, "discard_all": 2}[state]
		if !known {
			return
		}
		if math.IsNaN(m.SleepLevel) {
			m.SleepLevel = 0
		}
		if v == 1 && level > m.SleepLevel {
			m.SleepLevel = level
		}
	})
}

// preferNew aggregates newName per model (max when useMax, else sum) and uses
// oldName only for models that do not expose newName.
func preferNew(fs families, s *Snapshot, newName, oldName string, useMax bool, field func(*Model) *float64) {
	hasNew := map[string]bool{}
	fs.perModel(newName, func(model, _ string, _ *dto.Metric) { hasNew[model] = true })
	agg := func(name string, want bool) {
		fs.perModel(name, func(model, _ string, mt *dto.Metric) {
			if hasNew[model] != want {
				return
			}
			v, ok := scalar(mt)
			if !ok {
				return
			}
			p := field(s.Models[model])
			switch {
			case math.IsNaN(*p):
				*p = v
			case useMax:
				*p = math.Max(*p, v)
			default:
				*p += v
			}
		})
	}
	agg(newName, true)
	agg(oldName, false)
}

// histogram sums the classic histogram name of model over engines and any
// other label (priority, ...).
func histogram(fs families, name, model string) *Histogram {
	return histogramOf(fs[name], func(mt *dto.Metric) bool {
		mod, ok := labelValue(mt, lModel)
		return ok && mod == model
	})
}

// histogramOf sums the series of classic histogram mf that keep accepts.
// Bucket bounds are read from the le values as exposed (Python floats such
// as "1.0" and "2560.0"). Nil when no series is kept.
func histogramOf(mf *dto.MetricFamily, keep func(*dto.Metric) bool) *Histogram {
	if mf == nil {
		return nil
	}
	// The series of a family share their bounds: their counts are summed
	// bucket by bucket into h.Buckets. Only when their bounds differ, or
	// are not in ascending order, are they merged through byLE.
	var byLE map[float64]float64
	var h *Histogram
	for _, mt := range mf.GetMetric() {
		if mt.Histogram == nil || !keep(mt) {
			continue
		}
		if h == nil {
			h = &Histogram{}
		}
		hh := mt.Histogram
		count := float64(hh.GetSampleCount())
		if hh.SampleCountFloat != nil {
			count = hh.GetSampleCountFloat()
		}
		h.Count += count
		h.Sum += hh.GetSampleSum()
		if byLE == nil && addBuckets(h, hh, count) {
			continue
		}
		if byLE == nil {
			byLE = make(map[float64]float64, len(h.Buckets)+len(hh.GetBucket())+1)
			for _, b := range h.Buckets {
				byLE[b.UpperBound] += b.Count
			}
		}
		hasInf := false
		for _, b := range hh.GetBucket() {
			c := float64(b.GetCumulativeCount())
			if b.CumulativeCountFloat != nil {
				c = b.GetCumulativeCountFloat()
			}
			byLE[b.GetUpperBound()] += c
			if math.IsInf(b.GetUpperBound(), +1) {
				hasInf = true
			}
		}
		// The protobuf format leaves the +Inf bucket implicit: it is the count.
		if !hasInf {
			byLE[math.Inf(+1)] += count
		}
	}
	if h == nil || byLE == nil {
		return h
	}
	// Sized exactly: a target's ring keeps these for the rate window, and
	// append's doubling left up to half of each slice unused.
	h.Buckets = make([]Bucket, 0, len(byLE))
	for le, c := range byLE {
		h.Buckets = append(h.Buckets, Bucket{UpperBound: le, Count: c})
	}
	slices.SortFunc(h.Buckets, func(a, b Bucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
	return h
}

// addBuckets adds the cumulative counts of hh (count observations; the
// +Inf bucket is count when hh leaves it implicit, as the protobuf format
// does) to those of h, and reports whether it could: h has no bucket yet
// and hh's bounds ascend, or they are h's bounds. h's buckets are sized
// exactly.
func addBuckets(h *Histogram, hh *dto.Histogram, count float64) bool {
	bs := hh.GetBucket()
	n := len(bs)
	implicitInf := n == 0 || !math.IsInf(bs[n-1].GetUpperBound(), +1)
	if implicitInf {
		n++
	}
	bound := func(i int) float64 {
		if i == len(bs) {
			return math.Inf(+1)
		}
		return bs[i].GetUpperBound()
	}
	if h.Buckets == nil {
		for i := 1; i < n; i++ {
			if !(bound(i) > bound(i-1)) {
				return false
			}
		}
		h.Buckets = make([]Bucket, n)
		for i := range h.Buckets {
			h.Buckets[i].UpperBound = bound(i)
		}
	} else {
		if len(h.Buckets) != n {
			return false
		}
		for i := range h.Buckets {
			if h.Buckets[i].UpperBound != bound(i) {
				return false
			}
		}
	}
	for i, b := range bs {
		c := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			c = b.GetCumulativeCountFloat()
		}
		h.Buckets[i].Count += c
	}
	if implicitInf {
		h.Buckets[n-1].Count += count
	}
	return true
}

// applyCacheConfig reads the capacity inputs from vllm:cache_config_info. The
// series has an engine label but no model_name: it describes the whole server,
// so it is attached to every model of the scrape (or only to its model, should
// a server add model_name).
func applyCacheConfig(fs families, s *Snapshot) {
	mf := fs[mCacheConfig]
	if mf == nil {
		return
	}
	type engineCap struct{ capacity, blockSize float64 }
	perEngine := map[string]map[string]engineCap{} // model ("" = all) -> engine -> capacity
	for _, m := range mf.GetMetric() {
		model, _ := labelValue(m, lModel)
		engine, _ := labelValue(m, lEngine)
		num := func(label string) float64 {
			v, ok := labelValue(m, label)
			if !ok {
				return 0
			}
			f, err := strconv.ParseFloat(v, 64) // "None" and the like fail
			if err != nil || f <= 0 || math.IsInf(f, 0) {
				return 0
			}
			return f
		}
		ec := engineCap{capacity: num("kv_cache_size_tokens"), blockSize: num("block_size")}
		if ec.capacity == 0 {
			ec.capacity = num("num_gpu_blocks") * ec.blockSize
		}
		if perEngine[model] == nil {
			perEngine[model] = map[string]engineCap{}
		}
		perEngine[model][engine] = ec
	}
	for name, m := range s.Models {
		caps := perEngine[name]
		if caps == nil {
			caps = perEngine[""]
		}
		total, block := 0.0, 0.0
		for _, ec := range caps {
			total += ec.capacity
			block = math.Max(block, ec.blockSize)
		}
		if total > 0 {
			m.KVCapacityTokens = total
		}
		if block > 0 {
			m.BlockSize = block
		}
	}
}

// schema tells the metric schema from the families that define each one,
// counting only series that carry model_name (a router's re-exports do not
// count):
//
//   - legacy: any V0-only family. vLLM's V0 engine exported them until it was
//     removed; the V1 engine never did (vLLM docs/design/metrics.md, "v0
//     Metrics"; PRs #14136, #15458).
//   - transition: no V0-only family, and the pre-rename KV and prefix-cache
//     names (vllm:gpu_cache_usage_perc, vllm:gpu_prefix_cache_*_total) that
//     the V1 engine exported up to 0.10 (alone up to 0.9, next to the new
//     names in 0.10; renamed by PR #18354, removed by PR #29330).
//   - v1: neither, and any engine family.
//
// vllm:time_per_output_token_seconds does not decide anything: V0 and V1 up
// to 0.10 export it as their only inter-token histogram, and 0.11 still
// exports it, deprecated, next to vllm:inter_token_latency_seconds.
func schema(fs families) string {
	for _, name := range v0OnlyFamilies {
		if fs.has(name) {
			return SchemaLegacy
		}
	}
	if fs.has(mGPUCacheUsage) || fs.has(mGPUPrefixQ) || fs.has(mGPUPrefixH) {
		return SchemaTransition
	}
	for _, name := range engineFamilies {
		if fs.has(name) {
			return SchemaV1
		}
	}
	return ""
}

// v0OnlyFamilies are exported by vLLM's V0 engine only.
var v0OnlyFamilies = []string{mSwapped, mCPUCacheUsage, mGPUPrefixHitRate, mCPUPrefixHitRate}

// engineFamilies are the engine families every schema may carry.
var engineFamilies = []string{
	mRunning, mWaiting, mKVUsage, mPromptTokens, mGenTokens, mRequestSuccess, mTTFT, mITL, mTPOTOld, mE2E,
}

// maxByLabel bounds the label values a by-label map of a model keeps (the
// waiting reasons, prompt sources and admission reasons vLLM names are a
// handful); the rest are summed under "_other", as finished reasons are.
const maxByLabel = 8

// addTo adds v under key to *m, created on first use; past maxByLabel keys
// a new key counts under "_other".
func addTo(m *map[string]float64, key string, v float64) {
	if *m == nil {
		*m = map[string]float64{}
	}
	if _, ok := (*m)[key]; !ok && len(*m) >= maxByLabel {
		key = "_other"
	}
	(*m)[key] += v
}

// boundedLabel is the value of label name of mt, cut to MaxLabelValueBytes.
func boundedLabel(mt *dto.Metric, name string) string {
	v, _ := labelValue(mt, name)
	return cutLabel(v)
}
