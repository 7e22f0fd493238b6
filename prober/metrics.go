package prober

import (
	"slices"

	"github.com/vllm-prober/vllm_prober/prober/probe"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names of the exported-metric contract.
const (
	metricSuccess       = "vllm_probe_success"
	metricLastTimestamp = "vllm_probe_last_timestamp_seconds"
	metricLastSuccess   = "vllm_probe_last_success_timestamp_seconds"
	metricDuration      = "vllm_probe_duration_seconds"
	metricTTFT          = "vllm_probe_time_to_first_token_seconds"
	metricITL           = "vllm_probe_inter_token_latency_seconds"
	metricTPOT          = "vllm_probe_time_per_output_token_seconds"
	metricE2E           = "vllm_probe_e2e_latency_seconds"
	metricOutputTPS     = "vllm_probe_output_tokens_per_second"
	metricOutputEst     = "vllm_probe_output_tokens_estimated"
	metricTokens        = "vllm_probe_tokens_total"
	metricAttempts      = "vllm_probe_attempts_total"
	metricFailures      = "vllm_probe_failures_total"
	metricSkipped       = "vllm_probe_skipped_total"
	metricHealthUp      = "vllm_probe_health_up"
	metricModelsUp      = "vllm_probe_models_up"
)

// histOpts says how the latency histograms are bucketed.
type histOpts struct {
	buckets      []float64 // TTFT and E2E
	tokenBuckets []float64 // ITL and TPOT
	nativeFactor float64   // > 1 adds native histograms
}

func (o histOpts) equal(p histOpts) bool {
	return o.nativeFactor == p.nativeFactor && slices.Equal(o.buckets, p.buckets) && slices.Equal(o.tokenBuckets, p.tokenBuckets)
}

func (o histOpts) histogram(name, help string) prometheus.HistogramOpts {
	return o.histogramWith(o.buckets, name, help)
}

// tokenHistogram is for per-token latencies: ITL and TPOT.
func (o histOpts) tokenHistogram(name, help string) prometheus.HistogramOpts {
	return o.histogramWith(o.tokenBuckets, name, help)
}

func (o histOpts) histogramWith(buckets []float64, name, help string) prometheus.HistogramOpts {
	h := prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}
	if o.nativeFactor > 1 {
		h.NativeHistogramBucketFactor = o.nativeFactor
		h.NativeHistogramMaxBucketNumber = 160
		h.NativeHistogramMinResetDuration = 0
	}
	return h
}

// metrics is one generation of the long-lived probe metric vectors. Their label
// names are target, module, model and the configuration's static label names; a
// new generation replaces the old one when those names or the buckets change.
type metrics struct {
	static []string
	hist   histOpts

	success, lastTimestamp, outputTPS *prometheus.GaugeVec
	outputEstimated                   *prometheus.GaugeVec
	lastSuccess, duration             *prometheus.GaugeVec
	ttft, itl, tpot, e2e              *prometheus.HistogramVec
	tokens, attempts                  *prometheus.CounterVec
	failures, skipped                 *prometheus.CounterVec
	healthUp, modelsUp                *prometheus.GaugeVec
	answers                           answerMetrics
}

func newMetrics(static []string, hist histOpts) *metrics {
	return newMetricsLabels(
		append([]string{"target", "module", "model"}, static...),
		append([]string{"target", "model"}, static...),
		static, hist)
}

// newMetricsLabels builds the vectors with the given pair and target label names.
// ProbeNow uses it with none: the scraper of /probe sets target and module itself.
func newMetricsLabels(pair, tgt, static []string, hist histOpts) *metrics {
	with := func(extra string) []string { return append(slices.Clone(pair), extra) }
	return &metrics{
		static: slices.Clone(static),
		hist:   hist,
		success: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricSuccess,
			Help: "1 if the last probe of the target and module succeeded, else 0."}, pair),
		lastTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricLastTimestamp,
			Help: "Unix time the last probe of the target and module finished."}, pair),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricLastSuccess,
			Help: "Unix time the last successful probe of the target and module finished; absent before the first success."}, pair),
		duration: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricDuration,
			Help: "Duration of the last probe of the target and module, failures included, from the start of model resolution or of the request to its end or failure."}, pair),
		outputTPS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricOutputTPS,
			Help: "Output tokens per second (output tokens / end-to-end latency) of the last successful probe."}, pair),
		outputEstimated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricOutputEst,
			Help: "1 if the last successful probe's output tokens were counted from content events because the server reported none (no usage chunk, no llama.cpp timings): an estimate; 0 if the server reported them."}, pair),
		ttft: prometheus.NewHistogramVec(hist.histogram(metricTTFT,
			"Time from sending the request to the first event carrying generated text, of successful probes."), pair),
		itl: prometheus.NewHistogramVec(hist.tokenHistogram(metricITL,
			"Gaps between consecutive content events of successful probes."), pair),
		tpot: prometheus.NewHistogramVec(hist.tokenHistogram(metricTPOT,
			"(End-to-end latency - time to first token) / (output tokens - 1) of successful probes with more than one output token."), pair),
		e2e: prometheus.NewHistogramVec(hist.histogram(metricE2E,
			"Time from sending the request to the last content event, of successful probes."), pair),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricTokens,
			Help: "Tokens spent by probes, as reported by the server's usage (output tokens counted from events when it sent none)."}, with("kind")),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricAttempts,
			Help: "Probes started."}, pair),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricFailures,
			Help: "Failed probes by reason."}, with("reason")),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricSkipped,
			Help: "Scheduled probes not started, by reason (budget, in_flight, concurrency)."}, with("reason")),
		healthUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricHealthUp,
			Help: "1 if the target's /health answered 200 at the last check, else 0."}, tgt),
		modelsUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricModelsUp,
			Help: "1 if the target's /v1/models answered and listed the probed model at the last check, else 0."}, tgt),
		answers: newAnswerMetrics(pair),
	}
}

// probeCollectors are the metrics of one probe served by /probe.
func (mt *metrics) probeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		mt.success, mt.lastTimestamp, mt.duration, mt.outputTPS, mt.outputEstimated, mt.ttft, mt.itl, mt.tpot, mt.e2e,
		mt.tokens, mt.attempts, mt.failures, mt.answers.correct, mt.answers.checks, mt.answers.dimension,
	}
}

func (mt *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		mt.success, mt.lastTimestamp, mt.lastSuccess, mt.duration, mt.outputTPS, mt.outputEstimated, mt.ttft, mt.itl, mt.tpot, mt.e2e,
		mt.tokens, mt.attempts, mt.failures, mt.skipped, mt.healthUp, mt.modelsUp,
		mt.answers.correct, mt.answers.checks, mt.answers.dimension,
	}
}

// generations is the one collector a Manager registers. It collects whichever
// generation of vectors is current. It is unchecked (Describe sends nothing)
// because a registry pins the label names of a metric name for the life of the
// program, even across Unregister, while ours change with the static labels of
// the configuration.
type generations struct {
	current func() *metrics
}

// Describe implements prometheus.Collector. It sends nothing: see generations.
func (g generations) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (g generations) Collect(ch chan<- prometheus.Metric) {
	mt := g.current()
	if mt == nil {
		return
	}
	for _, c := range mt.collectors() {
		c.Collect(ch)
	}
}

// initPair creates the pair's counters at 0 so that rate() and absent() work
// from the first scrape.
func (mt *metrics) initPair(lv []string) {
	mt.attempts.WithLabelValues(lv...)
	for _, k := range []string{"prompt", "output"} {
		mt.tokens.WithLabelValues(append(slices.Clone(lv), k)...)
	}
	for _, r := range probe.Reasons() {
		mt.failures.WithLabelValues(append(slices.Clone(lv), string(r))...)
	}
	for _, r := range SkipReasons() {
		mt.skipped.WithLabelValues(append(slices.Clone(lv), r)...)
	}
}

// deletePair removes every series of a pair.
func (mt *metrics) deletePair(lv []string) {
	for _, v := range []*prometheus.GaugeVec{mt.success, mt.lastTimestamp, mt.lastSuccess, mt.duration, mt.outputTPS, mt.outputEstimated} {
		v.DeleteLabelValues(lv...)
	}
	for _, v := range []*prometheus.HistogramVec{mt.ttft, mt.itl, mt.tpot, mt.e2e} {
		v.DeleteLabelValues(lv...)
	}
	mt.attempts.DeleteLabelValues(lv...)
	for _, k := range []string{"prompt", "output"} {
		mt.tokens.DeleteLabelValues(append(slices.Clone(lv), k)...)
	}
	for _, r := range probe.Reasons() {
		mt.failures.DeleteLabelValues(append(slices.Clone(lv), string(r))...)
	}
	for _, r := range SkipReasons() {
		mt.skipped.DeleteLabelValues(append(slices.Clone(lv), r)...)
	}
	mt.answers.delete(lv)
}

func (mt *metrics) skip(lv []string, reason string) {
	mt.skipped.WithLabelValues(append(slices.Clone(lv), reason)...).Inc()
}

// observe records a finished probe.
func (mt *metrics) observe(lv []string, r *probe.Result, end float64) {
	mt.lastTimestamp.WithLabelValues(lv...).Set(end)
	mt.duration.WithLabelValues(lv...).Set(r.Duration.Seconds())
	mt.tokens.WithLabelValues(append(slices.Clone(lv), "prompt")...).Add(float64(r.PromptTokens))
	mt.tokens.WithLabelValues(append(slices.Clone(lv), "output")...).Add(float64(r.OutputTokens))
	mt.answers.observe(lv, r)
	if !r.Success {
		mt.success.WithLabelValues(lv...).Set(0)
		mt.failures.WithLabelValues(append(slices.Clone(lv), string(r.Reason))...).Inc()
		return
	}
	mt.success.WithLabelValues(lv...).Set(1)
	mt.lastSuccess.WithLabelValues(lv...).Set(end)
	mt.e2e.WithLabelValues(lv...).Observe(r.E2E.Seconds())
	if r.Dimension > 0 {
		return // an embeddings probe: no tokens to time
	}
	mt.ttft.WithLabelValues(lv...).Observe(r.TTFT.Seconds())
	itl := mt.itl.WithLabelValues(lv...)
	for _, d := range r.ITLs {
		itl.Observe(d.Seconds())
	}
	if r.OutputTokens > 1 {
		mt.tpot.WithLabelValues(lv...).Observe(r.TPOT.Seconds())
	}
	mt.outputTPS.WithLabelValues(lv...).Set(r.OutputTokensPerSecond())
	mt.outputEstimated.WithLabelValues(lv...).Set(b2f(r.OutputTokensEstimated()))
}
