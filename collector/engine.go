package collector

import (
	"math"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// EngineUnknown is the engine of a /metrics that answers but matches no
// profile: vllm_server_engine_recognized is then 0.
const EngineUnknown = "unknown"

// Field is a scalar of Model that a profile fills.
type Field int

// The scalars a profile can fill. Each names the Model field of the same name.
const (
	FieldRunning Field = iota
	FieldWaiting
	FieldKVUsage
	FieldKVCapacityTokens
	FieldPromptTokens
	FieldGenerationTokens
	FieldPreemptions
	FieldPrefixCacheQueries
	FieldPrefixCacheHits
	FieldSpecDrafts
	FieldSpecDraftTokens
	FieldSpecAcceptedTokens
	FieldKVTransferFailures
)

// ptr is the Model field f names.
func (m *Model) ptr(f Field) *float64 {
	return [...]*float64{
		FieldRunning: &m.Running, FieldWaiting: &m.Waiting, FieldKVUsage: &m.KVUsage,
		FieldKVCapacityTokens: &m.KVCapacityTokens, FieldPromptTokens: &m.PromptTokens,
		FieldGenerationTokens: &m.GenerationTokens, FieldPreemptions: &m.Preemptions,
		FieldPrefixCacheQueries: &m.PrefixCacheQueries, FieldPrefixCacheHits: &m.PrefixCacheHits,
		FieldSpecDrafts: &m.SpecDrafts, FieldSpecDraftTokens: &m.SpecDraftTokens, FieldSpecAcceptedTokens: &m.SpecAcceptedTokens,
		FieldKVTransferFailures: &m.KVTransferFailures,
	}[f]
}

// HistField is a histogram of Model that a profile fills.
type HistField int

// The histograms a profile can fill.
const (
	HistTTFT HistField = iota
	HistITL
	HistE2E
	HistQueue
	HistPrefill
	HistGenerationTokensPerRequest
	HistKVTransfer
)

// hist is the Model histogram f names.
func (m *Model) hist(f HistField) **Histogram {
	return [...]**Histogram{
		HistTTFT: &m.TTFT, HistITL: &m.ITL, HistE2E: &m.E2E, HistQueue: &m.Queue, HistPrefill: &m.Prefill,
		HistGenerationTokensPerRequest: &m.GenerationTokensPerRequest, HistKVTransfer: &m.KVTransfer,
	}[f]
}

// Source reads one value per model from a family: the sum (or, for a
// ScalarRule with Max, the maximum) of its series that carry every label
// value of Match, times Scale. Over and Times, when set, divide or
// multiply the result by another source's value for the same model (a
// used/max block ratio, blocks × tokens per block), and Plus adds one
// (evaluated and cached prompt tokens); the model must expose both.
type Source struct {
	Family string
	Match  map[string]string
	Scale  float64 // 0 means 1
	// HistogramSum reads a histogram's sample sum: a token count kept as a
	// histogram of per-request sizes is a counter of its own.
	HistogramSum bool
	Over, Times  *Source
	Plus         *Source
}

// ScalarRule fills Field from the first of Sources that the model exposes:
// newer names first, their predecessors after.
type ScalarRule struct {
	Field   Field
	Max     bool // a ratio across engines: the maximum, not the sum
	Sources []Source
}

// HistSource reads a histogram. Family names a classic histogram whose
// bounds and sum are multiplied by Scale; or SumFamily and CountFamilies
// name cumulative counters (Triton's microsecond durations and request
// counts), which make a histogram with a sum and a count only: its mean is
// known, its quantiles are not.
type HistSource struct {
	Family        string
	Scale         float64 // 0 means 1
	SumFamily     string
	CountFamilies []string
}

// HistRule fills Field from the first of Sources that the model exposes.
type HistRule struct {
	Field   HistField
	Sources []HistSource
}

// Profile is how one engine's /metrics maps into Model. Every family it
// reads appears in its table (Families), so that a scrape can be cut down
// to them before decoding.
type Profile struct {
	// Engine is the value of the engine label of vllm_server_info and of a
	// target's engine key.
	Engine string
	// Detect are families only this engine exports: any of them present
	// (with a model label where ModelLabels names one) picks the profile.
	Detect []string
	// VLLMPrefixes, for engines that export vLLM's own families under
	// another prefix (Ray Serve, NIM), are the prefixes that replace
	// "vllm:"; such a payload is read by vLLM's rules (normaliseVLLM) and
	// keeps vLLM's metric schemas. vLLM's own profile has "vllm:".
	VLLMPrefixes []string
	// ModelLabels name the model, the first one a series carries wins. Nil
	// when the engine names no model (llama.cpp): its values then belong to
	// unlabeledModel, which the scraper renames after /v1/models.
	ModelLabels []string
	// EngineLabel counts engines (data-parallel ranks, replicas); "" counts one.
	EngineLabel string
	Scalars     []ScalarRule
	Histograms  []HistRule
	// RequestSuccess are counters of finished requests by finished_reason
	// (vLLM's label, which engines adapted from its metrics keep): the
	// first the model exposes fills Model.RequestSuccess.
	RequestSuccess []string
	// Sleep reads vLLM's sleep mode: sleep_state="awake"|"weights_offloaded"|"discard_all".
	Sleep bool
}

// unlabeledModel names the model of an engine whose series carry no model
// label, until /v1/models says which model it serves.
const unlabeledModel = ""

// Families lists every family p reads, sorted.
func (p *Profile) Families() []string {
	set := map[string]bool{}
	for _, f := range p.Detect {
		set[f] = true
	}
	for _, prefix := range p.VLLMPrefixes {
		for f := range vllmFamilies {
			set[prefix+strings.TrimPrefix(f, "vllm:")] = true
		}
	}
	var addSource func(s *Source)
	addSource = func(s *Source) {
		if s == nil {
			return
		}
		set[s.Family] = true
		addSource(s.Over)
		addSource(s.Times)
		addSource(s.Plus)
	}
	for _, r := range p.Scalars {
		for i := range r.Sources {
			addSource(&r.Sources[i])
		}
	}
	for _, r := range p.Histograms {
		for _, s := range r.Sources {
			for _, f := range append([]string{s.Family, s.SumFamily}, s.CountFamilies...) {
				if f != "" {
					set[f] = true
				}
			}
		}
	}
	for _, f := range p.RequestSuccess {
		set[f] = true
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// ProfileOf returns the profile of engine, false when there is none.
func ProfileOf(engine string) (*Profile, bool) {
	for _, p := range profiles {
		if p.Engine == engine {
			return p, true
		}
	}
	return nil, false
}

// Engines lists the engines that have a profile, in detection order.
func Engines() []string {
	out := make([]string, len(profiles))
	for i, p := range profiles {
		out[i] = p.Engine
	}
	return out
}

// modelOf is the model a series of p belongs to; false when it names none
// while p expects one.
func (p *Profile) modelOf(m *dto.Metric) (string, bool) {
	if p.ModelLabels == nil {
		return unlabeledModel, true
	}
	for _, l := range p.ModelLabels {
		if v, ok := labelValue(m, l); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// present reports whether family name has a series p can attribute to a model.
func (p *Profile) present(fs families, name string) bool {
	mf := fs[name]
	if mf == nil {
		return false
	}
	for _, m := range mf.GetMetric() {
		if _, ok := p.modelOf(m); ok {
			return true
		}
	}
	return false
}

// detects reports whether fs carries a family of p's Detect list.
func (p *Profile) detects(fs families) bool {
	for _, name := range p.Detect {
		if p.VLLMPrefixes != nil {
			// vLLM-named families need model_name: a router re-exporting
			// them with a server label is not an engine.
			if fs.has(name) {
				return true
			}
			continue
		}
		if p.present(fs, name) {
			return true
		}
	}
	return false
}

// detectProfile picks the profile of fs: the forced engine's when set and
// fs carries any family it reads, else the first whose Detect families fs
// carries. Nil when none matches: a forced profile that reads nothing of
// fs would leave the target silently empty.
func detectProfile(fs families, forced string) *Profile {
	if forced != "" {
		if p, ok := ProfileOf(forced); ok && p.readsAny(fs) {
			return p
		}
		return nil
	}
	for _, p := range profiles {
		if p.detects(fs) {
			return p
		}
	}
	return nil
}

// readsAny reports whether fs carries a family p reads.
func (p *Profile) readsAny(fs families) bool {
	for _, name := range p.Families() {
		if fs[name] != nil {
			return true
		}
	}
	return false
}

// renameToVLLM returns the families of fs that p exports under one of its
// VLLMPrefixes, keyed by vLLM's own name.
func (p *Profile) renameToVLLM(fs families) families {
	if len(p.VLLMPrefixes) == 1 && p.VLLMPrefixes[0] == "vllm:" {
		return fs
	}
	out := families{}
	for name := range vllmFamilies {
		bare := strings.TrimPrefix(name, "vllm:")
		for _, prefix := range p.VLLMPrefixes {
			if mf := fs[prefix+bare]; mf != nil {
				out[name] = mf
				break
			}
		}
	}
	return out
}

// normaliseProfile maps fs by p's table.
func normaliseProfile(p *Profile, fs families, s *Snapshot) {
	engines := map[string]map[string]struct{}{}
	get := func(model string) *Model {
		m := s.Models[model]
		if m == nil {
			m = newModel(model)
			s.Models[model] = m
			engines[model] = map[string]struct{}{}
		}
		return m
	}
	// Every family that names a model registers it.
	for _, name := range p.Families() {
		mf := fs[name]
		if mf == nil {
			continue
		}
		for _, mt := range mf.GetMetric() {
			model, ok := p.modelOf(mt)
			if !ok {
				continue
			}
			get(model)
			e := ""
			if p.EngineLabel != "" {
				e, _ = labelValue(mt, p.EngineLabel)
			}
			engines[model][e] = struct{}{}
		}
	}
	for model, m := range s.Models {
		m.Engines = len(engines[model])
		for _, r := range p.Scalars {
			for i := range r.Sources {
				if v, ok := p.readSource(fs, &r.Sources[i], model, r.Max); ok {
					*m.ptr(r.Field) = v
					break
				}
			}
		}
		for _, r := range p.Histograms {
			for _, src := range r.Sources {
				if h := p.readHistogram(fs, src, model); h != nil {
					*m.hist(r.Field) = h
					break
				}
			}
		}
		for _, f := range p.RequestSuccess {
			if m.RequestSuccess = p.readByReason(fs, f, model); m.RequestSuccess != nil {
				break
			}
		}
	}
}

// readByReason is family's value for model by finished_reason, nil when
// model has no series of it.
func (p *Profile) readByReason(fs families, family, model string) map[string]float64 {
	var out map[string]float64
	for _, mt := range fs[family].GetMetric() {
		v, isScalar := scalar(mt)
		if mod, named := p.modelOf(mt); !named || mod != model || !isScalar {
			continue
		}
		reason, _ := labelValue(mt, "finished_reason")
		if out == nil {
			out = map[string]float64{}
		}
		out[reason] += v
	}
	return out
}

// readSource is src's value for model; false when model has no series of it.
func (p *Profile) readSource(fs families, src *Source, model string, useMax bool) (float64, bool) {
	mf := fs[src.Family]
	if mf == nil {
		return 0, false
	}
	v, ok := 0.0, false
	for _, mt := range mf.GetMetric() {
		if mod, named := p.modelOf(mt); !named || mod != model || !matches(mt, src.Match) {
			continue
		}
		var x float64
		if src.HistogramSum {
			if mt.Histogram == nil {
				continue
			}
			x = mt.Histogram.GetSampleSum()
		} else {
			var isScalar bool
			if x, isScalar = scalar(mt); !isScalar {
				continue
			}
		}
		switch {
		case !ok:
			v = x
		case useMax:
			v = math.Max(v, x)
		default:
			v += x
		}
		ok = true
	}
	if !ok {
		return 0, false
	}
	if src.Scale != 0 {
		v *= src.Scale
	}
	if src.Over != nil {
		d, ok := p.readSource(fs, src.Over, model, useMax)
		if !ok || d <= 0 {
			return 0, false
		}
		v /= d
	}
	if src.Times != nil {
		f, ok := p.readSource(fs, src.Times, model, useMax)
		if !ok {
			return 0, false
		}
		v *= f
	}
	if src.Plus != nil {
		a, ok := p.readSource(fs, src.Plus, model, useMax)
		if !ok {
			return 0, false
		}
		v += a
	}
	return v, true
}

// readHistogram is src's histogram for model, nil when model has none.
func (p *Profile) readHistogram(fs families, src HistSource, model string) *Histogram {
	scale := src.Scale
	if scale == 0 {
		scale = 1
	}
	if src.Family != "" {
		h := histogramOf(fs[src.Family], func(mt *dto.Metric) bool {
			mod, ok := p.modelOf(mt)
			return ok && mod == model
		})
		if h != nil && scale != 1 {
			h.Sum *= scale
			for i := range h.Buckets {
				h.Buckets[i].UpperBound *= scale
			}
		}
		return h
	}
	sum, ok := p.readSource(fs, &Source{Family: src.SumFamily, Scale: scale}, model, false)
	if !ok {
		return nil
	}
	count, any := 0.0, false
	for _, f := range src.CountFamilies {
		if c, ok := p.readSource(fs, &Source{Family: f}, model, false); ok {
			count += c
			any = true
		}
	}
	if !any {
		return nil
	}
	return &Histogram{Sum: sum, Count: count, Buckets: []Bucket{{UpperBound: math.Inf(+1), Count: count}}}
}

// matches reports whether m carries every label value of want.
func matches(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labelValue(m, k); !ok || got != v {
			return false
		}
	}
	return true
}
