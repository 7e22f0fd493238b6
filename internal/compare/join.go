package compare

import (
	"math"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/collector"
)

// The series that join the collector's scrapes with the probes and the
// baselines: vllm_probe_server_ttft_gap_seconds (probes and server) and
// vllm_server_headroom_ratio (server, and the baseline's saturation for its
// throughput resource). The collector exports what /metrics alone tells.

// scraped is a target the collector scrapes.
type scraped struct {
	name   string
	static []string // static label values, in state.static order
	price  *float64 // price_per_hour; nil: no cost series (cost.go)
}

// collectJoined sends the joined series of t.
func (c *Collector) collectJoined(ch chan<- prometheus.Metric, st *state, server ServerSource, t scraped) {
	v, ok := server.View(t.name)
	if !ok {
		return // no stale joined series while the server does not answer
	}
	if t.price != nil {
		collectCost(ch, c.errs, st, &v, t)
	}
	probeModel := c.probes.Model(t.name)
	if probeModel == "" && len(v.Models) == 1 {
		probeModel = v.Models[0].Name
	}
	// vLLM counts a LoRA adapter's traffic under its base model's
	// model_name: the probes of an adapter are joined with the base
	// model's server figures.
	serverModel := serverModelOf(&v, probeModel)
	saturation, hasSaturation := st.saturation(t.name)
	gauge := func(desc *prometheus.Desc, v float64, lv ...string) {
		if !math.IsNaN(v) {
			c.errs.Send(ch, t.name, desc, prometheus.GaugeValue, v, lv...)
		}
	}
	for i := range v.Models {
		mv := &v.Models[i]
		labels := append([]string{t.name, mv.Name}, t.static...)
		genRate := math.NaN()
		if dv := mv.Derived; dv != nil {
			genRate = dv.GenerationTokensPerSecond
			if mv.Name == serverModel && !dv.Start.IsZero() {
				if l, ok := dv.Latencies["ttft"]; ok {
					if probeMean, n := c.probes.MeanTTFT(t.name, dv.Start); n > 0 {
						queue := math.NaN()
						if q, ok := dv.Latencies["queue"]; ok {
							queue = q.Mean
						}
						// Under the probes' model (the adapter's name when
						// they probe one), with the base model's figures.
						gauge(st.descs[mTTFTGap], TTFTGap(probeMean, l.Mean, queue, mv.TTFTIncludesQueue),
							append([]string{t.name, probeModel}, t.static...)...)
					}
				}
			}
		}
		h := ComputeHeadroom(mv.Model, v.MaxNumSeqs, genRate, saturation, hasSaturation)
		for _, r := range []struct {
			name string
			v    float64
		}{{"kv_cache", h.KVCache}, {"batch_slots", h.BatchSlots}, {"throughput", h.Throughput}, {"overall", h.Overall}} {
			gauge(st.descs[mHeadroom], r.v, append(labels, r.name)...)
		}
	}
}

// TTFTGap is vllm_probe_server_ttft_gap_seconds, the time the probes wait for
// their first token that the server does not account for (network, proxies,
// TLS, the HTTP front end):
//
//	gap = mean TTFT of the successful probes since the window start
//	      − Δsum/Δcount of vllm:time_to_first_token_seconds over the same window
//	      − (when the server's TTFT excludes queueing) Δsum/Δcount of
//	        vllm:request_queue_time_seconds over the same window
func TTFTGap(probeMeanTTFT, serverMeanTTFT, serverMeanQueue float64, includesQueue bool) float64 {
	gap := probeMeanTTFT - serverMeanTTFT
	if !includesQueue && !math.IsNaN(serverMeanQueue) {
		gap -= serverMeanQueue
	}
	return gap
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
func ComputeHeadroom(mod *collector.Model, maxNumSeqs int, genRate, saturation float64, hasSaturation bool) Headroom {
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

// serverModelOf is the model of v whose server figures the probes of
// probeModel are joined with: the model itself, a LoRA adapter's base
// (vLLM counts an adapter's traffic under its base model_name), the same
// name in another case (Dynamo's frontend lower-cases its model label), or
// the one model a server reports under another name (Triton's model name).
//
// The base comes first: /v1/models maps every model it lists, to itself
// or to an adapter's base, and that name is then looked for in /metrics.
func serverModelOf(v *collector.View, probeModel string) string {
	name := probeModel
	if base := v.Base[probeModel]; base != "" {
		name = base
	}
	if _, ok := v.Model(name); ok {
		return name
	}
	for _, mv := range v.Models {
		if strings.EqualFold(mv.Name, name) {
			return mv.Name
		}
	}
	if len(v.Models) == 1 {
		return v.Models[0].Name
	}
	return name
}
