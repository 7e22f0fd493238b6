package simulator

import (
	"math"
	"sort"
	"sync/atomic"
	"time"
)

// Bucket families of vLLM's vllm/v1/metrics/buckets.py.
var (
	bucketsRequestLatency = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	bucketsTTFT           = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	bucketsITL            = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	bucketsIteration      = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	bucketsParamsN        = []float64{1, 2, 5, 10, 20}
	bucketsPreemptions    = []float64{1, 2, 3, 4, 5, 10, 20}
)

// buckets125 is build_1_2_5_buckets(max): 1, 2, 5, 10, 20, 50, ... <= max.
func buckets125(max int) []float64 {
	var out []float64
	for exp := 1; ; exp *= 10 {
		for _, m := range []int{1, 2, 5} {
			v := m * exp
			if v > max {
				return out
			}
			out = append(out, float64(v))
		}
	}
}

type counter struct{ v atomic.Uint64 }

func (c *counter) add(n int) { c.v.Add(uint64(n)) }
func (c *counter) get() float64 {
	return float64(c.v.Load())
}

// histogram is a lock-free cumulative histogram. Its count is derived from
// the buckets at render time so that _count always equals the +Inf bucket.
type histogram struct {
	bounds  []float64
	buckets []atomic.Uint64 // len(bounds)+1, not cumulative
	sumBits atomic.Uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, buckets: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v: le is inclusive
	h.buckets[i].Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (h *histogram) snapshot() (cum []uint64, sum float64) {
	cum = make([]uint64, len(h.buckets))
	var acc uint64
	for i := range h.buckets {
		acc += h.buckets[i].Load()
		cum[i] = acc
	}
	return cum, math.Float64frombits(h.sumBits.Load())
}

func (h *histogram) reset() {
	for i := range h.buckets {
		h.buckets[i].Store(0)
	}
	h.sumBits.Store(0)
}

// finishReasons are pre-created at 0, like vLLM does for every FinishReason.
var (
	finishReasonsV1  = []string{"stop", "length", "abort", "error"}
	finishReasonsOld = []string{"stop", "length", "abort"}
)

// engineMetrics holds the counters and histograms of one engine.
type engineMetrics struct {
	createdBits atomic.Uint64 // Unix seconds as float64 bits

	preemptions    counter
	promptTokens   counter
	genTokens      counter
	prefixQueries  counter
	prefixHits     counter
	promptComputed counter
	// Speculative decoding (Config.SpecDecodeTokens > 0).
	specDrafts      counter
	specDraftTokens counter
	specAccepted    counter
	success         map[string]*counter
	reqPromptTokens *histogram
	reqGenTokens    *histogram
	reqMaxGenTokens *histogram
	reqParamsN      *histogram
	reqMaxTokens    *histogram
	reqPrefillKV    *histogram
	iterationTokens *histogram
	ttft            *histogram
	itl             *histogram
	tpot            *histogram
	e2e             *histogram
	queue           *histogram
	inference       *histogram
	prefill         *histogram
	decode          *histogram
	reqPreemptions  *histogram
	kv              *kvTransferMetrics // NIXL, with Config.KVTransfer
}

func newEngineMetrics(maxModelLen int, now time.Time) *engineMetrics {
	tok := buckets125(maxModelLen)
	m := &engineMetrics{
		success:         map[string]*counter{},
		reqPromptTokens: newHistogram(tok),
		reqGenTokens:    newHistogram(tok),
		reqMaxGenTokens: newHistogram(tok),
		reqParamsN:      newHistogram(bucketsParamsN),
		reqMaxTokens:    newHistogram(tok),
		reqPrefillKV:    newHistogram(tok),
		iterationTokens: newHistogram(bucketsIteration),
		ttft:            newHistogram(bucketsTTFT),
		itl:             newHistogram(bucketsITL),
		tpot:            newHistogram(bucketsITL),
		e2e:             newHistogram(bucketsRequestLatency),
		queue:           newHistogram(bucketsRequestLatency),
		inference:       newHistogram(bucketsRequestLatency),
		prefill:         newHistogram(bucketsRequestLatency),
		decode:          newHistogram(bucketsRequestLatency),
		reqPreemptions:  newHistogram(bucketsPreemptions),
		kv:              newKVTransferMetrics(),
	}
	for _, r := range finishReasonsV1 {
		m.success[r] = &counter{}
	}
	m.setCreated(now)
	return m
}

func (m *engineMetrics) setCreated(t time.Time) {
	m.createdBits.Store(math.Float64bits(float64(t.UnixNano()) / 1e9))
}

func (m *engineMetrics) created() float64 { return math.Float64frombits(m.createdBits.Load()) }

func (m *engineMetrics) histograms() []*histogram {
	return []*histogram{m.reqPromptTokens, m.reqGenTokens, m.reqMaxGenTokens, m.reqParamsN, m.reqMaxTokens,
		m.reqPrefillKV, m.iterationTokens, m.ttft, m.itl, m.tpot, m.e2e, m.queue, m.inference, m.prefill,
		m.decode, m.reqPreemptions}
}

// reset zeroes every counter and histogram, as after a server restart.
func (m *engineMetrics) reset(now time.Time) {
	for _, c := range []*counter{&m.preemptions, &m.promptTokens, &m.genTokens, &m.prefixQueries, &m.prefixHits, &m.promptComputed} {
		c.v.Store(0)
	}
	for _, c := range m.success {
		c.v.Store(0)
	}
	for _, h := range m.histograms() {
		h.reset()
	}
	m.kv.reset()
	m.setCreated(now)
}
