package prober

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Metric names of the exported-metric contract.
const (
	metricSuccess            = "vllm_probe_success"
	metricLastTimestamp      = "vllm_probe_last_timestamp_seconds"
	metricLastSuccess        = "vllm_probe_last_success_timestamp_seconds"
	metricDuration           = "vllm_probe_duration_seconds"
	metricTTFT               = "vllm_probe_time_to_first_token_seconds"
	metricTTFA               = "vllm_probe_time_to_first_answer_token_seconds"
	metricITL                = "vllm_probe_inter_token_latency_seconds"
	metricTPOT               = "vllm_probe_time_per_output_token_seconds"
	metricE2E                = "vllm_probe_e2e_latency_seconds"
	metricOutputTPS          = "vllm_probe_output_tokens_per_second"
	metricOutputEst          = "vllm_probe_output_tokens_estimated"
	metricTokens             = "vllm_probe_tokens_total"
	metricAttempts           = "vllm_probe_attempts_total"
	metricFailures           = "vllm_probe_failures_total"
	metricSkipped            = "vllm_probe_skipped_total"
	metricHealthUp           = "vllm_probe_health_up"
	metricModelsUp           = "vllm_probe_models_up"
	metricAnswerCorrect      = "vllm_probe_answer_correct"
	metricAnswerChecks       = "vllm_probe_answer_checks_total"
	metricEmbeddingDimension = "vllm_probe_embedding_dimension"
	metricGoodput            = "vllm_probe_goodput_probes_total"
	metricObjectiveMisses    = "vllm_probe_objective_misses_total"
)

// The prober's series are rendered at Collect from per-pair state, as the
// collector's and compare's are: a pair keeps its counters, last-probe gauges
// and latency histograms (series), and Collect reads its label values
// (target, module, model and the configuration's static labels) from the pair
// as they are then. Nothing is relabelled when a model is resolved or a
// static label appears: the series are simply rendered with the new values.

// histOpts says how the latency histograms are bucketed and which optional
// families are exposed.
type histOpts struct {
	buckets      []float64 // TTFT and E2E
	tokenBuckets []float64 // ITL and TPOT
	nativeFactor float64   // > 1 adds native histograms
	nativeOnly   bool      // no classic buckets (global.histograms: native)
	disabled     []string  // families not exposed (global.metrics.disable)
}

// histOptsOf is the histOpts of a configuration's global section.
func histOptsOf(g *config.Global) histOpts {
	return histOpts{buckets: slices.Clone(g.Buckets), tokenBuckets: slices.Clone(g.TokenLatencyBuckets),
		nativeFactor: g.NativeFactor(), nativeOnly: !g.ClassicBuckets(), disabled: slices.Clone(g.Metrics.Disable)}
}

func (o histOpts) equal(p histOpts) bool {
	return o.nativeFactor == p.nativeFactor && o.nativeOnly == p.nativeOnly && slices.Equal(o.buckets, p.buckets) &&
		slices.Equal(o.tokenBuckets, p.tokenBuckets) && slices.Equal(o.disabled, p.disabled)
}

// on reports whether family is exposed.
func (o histOpts) on(family string) bool { return !slices.Contains(o.disabled, family) }

// The latency histograms of a pair, indexes of series.latency.
const (
	histTTFT = iota
	histITL
	histTPOT
	histE2E
	histTTFA
	numHists
)

// newHistogram is the one place a latency histogram is built: classic buckets
// of the configuration, plus native buckets when
// native_histogram_bucket_factor asks for them. It carries no label: Collect
// gives it its pair's (labelled).
func (o histOpts) newHistogram(i int) prometheus.Histogram {
	buckets := o.buckets
	if i == histITL || i == histTPOT {
		buckets = o.tokenBuckets
	}
	h := prometheus.HistogramOpts{Name: histNames[i], Help: histHelps[i], Buckets: buckets}
	if o.nativeOnly && o.nativeFactor > 1 {
		h.Buckets = nil // with a native factor, no classic buckets at all
	}
	if o.nativeFactor > 1 {
		h.NativeHistogramBucketFactor = o.nativeFactor
		h.NativeHistogramMaxBucketNumber = 160
		h.NativeHistogramMinResetDuration = 0
	}
	return prometheus.NewHistogram(h)
}

var (
	histNames = [numHists]string{metricTTFT, metricITL, metricTPOT, metricE2E, metricTTFA}
	histHelps = [numHists]string{
		"Time from sending the request to the first event carrying generated text, of successful probes.",
		"Gaps between consecutive content events of successful probes.",
		"(End-to-end latency - time to first token) / (output tokens - 1) of successful probes with more than one output token.",
		"Time from sending the request to the last content event, of successful probes.",
		"Time from sending the request to the first event carrying answer text or a tool call, not only reasoning, of successful probes that got an answer: the time to first token of a reasoning model's answer.",
	}
)

// descs are the probe series' families for one set of pair label names
// (target, module, model and the static label names; none for /probe's
// one-shot series) and target label names (target, model, static).
type descs struct {
	success, lastTimestamp, lastSuccess, duration, outputTPS *prometheus.Desc
	outputEst                                                *prometheus.Desc
	latency                                                  [numHists]*prometheus.Desc
	tokens, attempts, failures, skipped                      *prometheus.Desc
	healthUp, modelsUp                                       *prometheus.Desc
	correct, checks, dimension                               *prometheus.Desc
	goodput, objectiveMisses                                 *prometheus.Desc
}

// newDescs returns the families of the long-lived series with the given static label names.
func newDescs(static []string) *descs {
	return newDescsLabels(append([]string{"target", "module", "model"}, static...), append([]string{"target", "model"}, static...))
}

func newDescsLabels(pair, tgt []string) *descs {
	with := func(extra string) []string { return append(slices.Clone(pair), extra) }
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	ds := &descs{
		success:       d(metricSuccess, "1 if the last probe of the target and module succeeded, else 0.", pair),
		lastTimestamp: d(metricLastTimestamp, "Unix time the last probe of the target and module finished.", pair),
		lastSuccess:   d(metricLastSuccess, "Unix time the last successful probe of the target and module finished; absent before the first success.", pair),
		duration: d(metricDuration, "Duration of the last probe of the target and module, failures included, from the start of model resolution or of the request to its end or failure.",
			pair),
		outputTPS: d(metricOutputTPS, "Output tokens per second (output tokens / end-to-end latency) of the last successful probe.", pair),
		outputEst: d(metricOutputEst, "1 if the last successful probe's output tokens were counted from content events because the server reported none (no usage chunk, no llama.cpp timings): an estimate; 0 if the server reported them.", pair),
		tokens:    d(metricTokens, "Tokens spent by probes, as reported by the server's usage (output tokens counted from events when it sent none).", with("kind")),
		attempts:  d(metricAttempts, "Probes started.", pair),
		failures:  d(metricFailures, "Failed probes by reason.", with("reason")),
		skipped:   d(metricSkipped, "Scheduled probes not started, by reason (budget, in_flight, concurrency).", with("reason")),
		healthUp:  d(metricHealthUp, "1 if the target answered at the last check (its /metrics scrape when scraped and its probes succeed, else /health with 200), else 0.", tgt),
		modelsUp:  d(metricModelsUp, "1 if the target's /v1/models answered and listed the probed model at the last check, else 0.", tgt),
		correct:   d(metricAnswerCorrect, "1 if the answer of the last checked probe of the target and module passed its expect, else 0.", pair),
		checks:    d(metricAnswerChecks, "Answer checks of probes by result (correct, wrong).", with("result")),
		dimension: d(metricEmbeddingDimension, "Length of the vector of the last embeddings probe that returned one.", pair),
		goodput: d(metricGoodput, "Probes of a module with goodput objectives (slos) by result: good (succeeded and met every objective) or bad (failed, or missed one).",
			with("result")),
		objectiveMisses: d(metricObjectiveMisses, "Successful probes of a module with goodput objectives that missed the objective (ttft, tpot, itl_p99, e2e).", with("objective")),
	}
	for i := range numHists {
		ds.latency[i] = d(histNames[i], histHelps[i], pair)
	}
	return ds
}

var (
	tokenKinds     = [2]string{"prompt", "output"}
	checkResults   = [2]string{"correct", "wrong"}
	goodputResults = [2]string{"good", "bad"}
)

// series is what the series of one pair (or of one probe /probe ran) say:
// counters, the last probe's gauges and the latency histograms. Their label
// values are not here: Collect takes them from the pair.
type series struct {
	// scheduled: a pair's series, with skipped counters and the last
	// success's time; else /probe's one-shot series.
	scheduled bool
	// allChecks: render both answer-check counters from 0 (a module that
	// checks answers); else only those counted.
	allChecks bool

	attempts float64
	tokens   [2]float64 // by tokenKinds
	failures []float64  // by probe.Reasons()
	skipped  [3]float64 // by SkipReasons()
	checks   [2]float64 // by checkResults
	// objectives are the module's goodput objectives (nil: no goodput
	// series); goodput counts probes by goodputResults, misses successful
	// probes that missed each objective, by config.ObjectiveNames.
	objectives *config.Objectives
	goodput    [2]float64
	misses     [4]float64
	// failShown and skipShown say how a scheduled pair's failure and skip
	// reasons render (reasonState): a reason's series appears once it
	// occurs, not at 0 in advance.
	failShown []reasonState
	skipShown [3]reasonState
	// failCreated and skipCreated are when each reason first occurred
	// (Unix seconds): the created timestamp of its counter.
	failCreated []float64
	skipCreated [3]float64

	observed                                        bool // success, lastEnd and duration are set
	success, lastEnd, duration                      float64
	lastSuccess, outputTPS, outputEst, correct, dim float64
	hasLastSuccess, hasTPS, hasCorrect, hasDim      bool

	hist    histOpts
	latency [numHists]prometheus.Histogram // nil until first observed
}

func newSeries(hist histOpts, scheduled bool) *series {
	return &series{scheduled: scheduled, hist: hist, failures: make([]float64, len(probe.Reasons())),
		failShown: make([]reasonState, len(probe.Reasons())), failCreated: make([]float64, len(probe.Reasons()))}
}

// reasonState is how a failure or skip reason of a scheduled pair renders.
// A counter that appeared at its first count would lose that count to
// Prometheus: increase() and rate() see no step from a series' first sample.
// So a reason that first occurs renders 0 at the next collection, and its
// count from the collection after (one scrape later than a series created at
// 0 in advance would show it; the count is not lost).
type reasonState uint8

const (
	reasonAbsent  reasonState = iota // never occurred: no series
	reasonPending                    // occurred; the next collection renders 0
	reasonShown                      // a collection rendered 0: render the count
)

// occurred notes an occurrence at (Unix seconds) of a reason in state *st,
// whose counter was created at *created. Its series appears now: at is its
// created timestamp, which a second scraper needs, since its first sample
// may already be the count (a Prometheus 3 with
// created-timestamp-zero-ingestion stores a 0 at the created time).
func occurred(st *reasonState, created *float64, at float64) {
	if *st == reasonAbsent {
		*st, *created = reasonPending, at
	}
}

// exposed notes that a collection rendered s: the pending reasons' zeros are
// out, their counts render from the next collection. It reports whether a
// reason changed state. m.mu must be held.
func (s *series) exposed() (changed bool) {
	for i, st := range s.failShown {
		if st == reasonPending {
			s.failShown[i] = reasonShown
			changed = true
		}
	}
	for i, st := range s.skipShown {
		if st == reasonPending {
			s.skipShown[i] = reasonShown
			changed = true
		}
	}
	return changed
}

// reasonValue is the value a reason in state st with count v renders, and
// whether it renders at all.
func reasonValue(st reasonState, v float64) (float64, bool) {
	switch st {
	case reasonPending:
		return 0, true
	case reasonShown:
		return v, true
	}
	return 0, false
}

// rebucket drops the latency histograms when the buckets changed: their
// series start again with the new ones.
func (s *series) rebucket(hist histOpts) {
	if !s.hist.equal(hist) {
		s.hist, s.latency = hist, [numHists]prometheus.Histogram{}
	}
}

// skip counts a scheduled probe skipped at (Unix seconds) for reason.
func (s *series) skip(reason string, at float64) {
	i := slices.Index(SkipReasons(), reason)
	s.skipped[i]++
	occurred(&s.skipShown[i], &s.skipCreated[i], at)
}

// histogram returns latency histogram i, created at its first observation.
func (s *series) histogram(i int) prometheus.Histogram {
	if s.latency[i] == nil {
		s.latency[i] = s.hist.newHistogram(i)
	}
	return s.latency[i]
}

// observe records a finished probe that ended at end (Unix seconds).
// recordID, when not "", is the exemplar of its TTFT, E2E and TPOT
// observations: the id /probe/record opens.
func (s *series) observe(r *probe.Result, end float64, recordID string) {
	s.observed, s.lastEnd, s.duration = true, end, r.Duration.Seconds()
	s.tokens[0] += float64(r.PromptTokens)
	s.tokens[1] += float64(r.OutputTokens)
	if r.Dimension > 0 {
		s.dim, s.hasDim = float64(r.Dimension), true
	}
	if r.Answer != probe.AnswerNotChecked {
		s.correct, s.hasCorrect = b2f(r.Answer == probe.AnswerCorrect), true
		if r.Answer == probe.AnswerCorrect {
			s.checks[0]++
		} else {
			s.checks[1]++
		}
	}
	s.judge(r)
	if !r.Success {
		s.success = 0
		if i := slices.Index(probe.Reasons(), r.Reason); i >= 0 {
			s.failures[i]++
			occurred(&s.failShown[i], &s.failCreated[i], end)
		}
		return
	}
	s.success, s.lastSuccess, s.hasLastSuccess = 1, end, true
	var ex prometheus.Labels
	if recordID != "" {
		ex = prometheus.Labels{ExemplarLabel: recordID}
	}
	observe(s.histogram(histE2E), r.E2E.Seconds(), ex)
	if r.Dimension > 0 {
		return // an embeddings probe: no tokens to time
	}
	observe(s.histogram(histTTFT), r.TTFT.Seconds(), ex)
	// The time to first answer is its own histogram only once the pair met
	// a reasoning model (an answer after the first delta, or reasoning
	// tokens): for any other model it equals TTFT, and 13 more series per
	// pair (classic) would break the pair's series budget for nothing.
	if r.TTFA > 0 && s.hist.on(metricTTFA) && (s.latency[histTTFA] != nil || r.TTFA > r.TTFT || r.ReasoningTokens > 0) {
		observe(s.histogram(histTTFA), r.TTFA.Seconds(), ex)
	}
	if s.hist.on(metricITL) {
		itl := s.histogram(histITL)
		for _, d := range r.ITLs {
			itl.Observe(d.Seconds())
		}
	}
	if r.OutputTokens > 1 && s.hist.on(metricTPOT) {
		observe(s.histogram(histTPOT), r.TPOT.Seconds(), ex)
	}
	s.outputTPS, s.hasTPS = r.OutputTokensPerSecond(), true
	s.outputEst = b2f(r.OutputTokensEstimated())
}

// judge counts r against the goodput objectives, if any: a failed probe is
// bad, a successful one good when it missed none.
func (s *series) judge(r *probe.Result) {
	if s.objectives == nil {
		return
	}
	if !r.Success {
		s.goodput[1]++
		return
	}
	good := true
	for i, miss := range s.objectives.Misses(r.Latencies()) {
		if miss {
			s.misses[i]++
			good = false
		}
	}
	if good {
		s.goodput[0]++
	} else {
		s.goodput[1]++
	}
}

// snapshot copies s for rendering outside the Manager's lock (the
// histograms are safe to read concurrently).
func (s *series) snapshot() series {
	c := *s
	c.failures = slices.Clone(s.failures)
	c.failShown = slices.Clone(s.failShown)
	c.failCreated = slices.Clone(s.failCreated)
	return c
}

// selection is which of a pair's series a collection renders: the
// exposition cache holds a target's attempt counts apart from its other
// series (attemptsPart), since a probe's start moves only them.
type selection uint8

const (
	allSeries     selection = iota // every series (Collect, /probe)
	outcomeSeries                  // every series but the attempt counts
	attemptSeries                  // the attempt counts alone
)

// collect renders s with the label pairs ls of d's pair families, those of
// sel.
func (s *series) collect(ch chan<- prometheus.Metric, d *descs, ls *labelSet, sel selection) {
	if sel != outcomeSeries {
		ch <- constMetric{desc: d.attempts, v: s.attempts, counter: true, labels: ls.base}
	}
	if sel == attemptSeries {
		return
	}
	gauge := func(desc *prometheus.Desc, v float64) {
		ch <- constMetric{desc: desc, v: v, labels: ls.base}
	}
	counterAt := func(desc *prometheus.Desc, v, created float64, extra ...string) {
		labels := ls.base
		if len(extra) == 2 {
			labels = ls.with(extra[0], extra[1])
		}
		ch <- constMetric{desc: desc, v: v, counter: true, created: created, labels: labels}
	}
	counter := func(desc *prometheus.Desc, v float64, extra ...string) { counterAt(desc, v, 0, extra...) }
	if s.hist.on(metricTokens) {
		for i, k := range tokenKinds {
			counter(d.tokens, s.tokens[i], "kind", k)
		}
	}
	for i, r := range probe.Reasons() {
		if !s.scheduled { // /probe's one-shot series: every reason, as blackbox_exporter's
			counter(d.failures, s.failures[i], "reason", string(r))
		} else if v, ok := reasonValue(s.failShown[i], s.failures[i]); ok {
			counterAt(d.failures, v, s.failCreated[i], "reason", string(r))
		}
	}
	if s.scheduled {
		for i, r := range SkipReasons() {
			if v, ok := reasonValue(s.skipShown[i], s.skipped[i]); ok {
				counterAt(d.skipped, v, s.skipCreated[i], "reason", r)
			}
		}
	}
	for i, r := range checkResults {
		if s.allChecks || s.checks[i] > 0 {
			counter(d.checks, s.checks[i], "result", r)
		}
	}
	if s.objectives != nil {
		for i, r := range goodputResults {
			counter(d.goodput, s.goodput[i], "result", r)
		}
		for i, set := range s.objectives.Has() {
			if set {
				counter(d.objectiveMisses, s.misses[i], "objective", config.ObjectiveNames()[i])
			}
		}
	}
	if s.observed {
		gauge(d.success, s.success)
		gauge(d.lastTimestamp, s.lastEnd)
		if s.hist.on(metricDuration) {
			gauge(d.duration, s.duration)
		}
	}
	if s.hasLastSuccess && s.scheduled {
		gauge(d.lastSuccess, s.lastSuccess)
	}
	if s.hasTPS && s.hist.on(metricOutputTPS) {
		gauge(d.outputTPS, s.outputTPS)
		gauge(d.outputEst, s.outputEst)
	}
	if s.hasCorrect {
		gauge(d.correct, s.correct)
	}
	if s.hasDim {
		gauge(d.dimension, s.dim)
	}
	for i, h := range s.latency {
		if h != nil && s.hist.on(histNames[i]) {
			ch <- labelled{desc: d.latency[i], metric: h, labels: ls.base}
		}
	}
}

// labelSet holds the label pairs of a pair's series, built once for its
// label values and shared by every collection until they change: building
// them (client_golang's MakeLabelPairs, as NewConstMetric does) for every
// series at every scrape of /metrics was a large part of a render's
// allocations. Readers never modify the pairs.
type labelSet struct {
	names, values []string // the pair's label names and values
	base          []*dto.LabelPair
	// err is why the pair's series cannot be exported (a label name twice,
	// a value that is not valid UTF-8), checked once as NewConstMetric
	// would at every series; the pair's series are then left out.
	err error

	mu    sync.Mutex
	extra map[[2]string][]*dto.LabelPair // by extra label name and value
}

func newLabelSet(names, values []string) *labelSet {
	ls := &labelSet{names: names, values: values, extra: map[[2]string][]*dto.LabelPair{}}
	ls.base = labelPairsOf(names, values)
	ls.err = checkLabels(names, values)
	return ls
}

// with is the label pairs of the pair's series with one more label.
func (ls *labelSet) with(name, value string) []*dto.LabelPair {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	key := [2]string{name, value}
	if lp, ok := ls.extra[key]; ok {
		return lp
	}
	lp := labelPairsOf(append(slices.Clone(ls.names), name), append(slices.Clone(ls.values), value))
	ls.extra[key] = lp
	return lp
}

// checkLabels is what NewConstMetric checks of a series' labels: each name
// once, each value valid UTF-8.
func checkLabels(names, values []string) error {
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("label %q twice", n)
		}
		if !utf8.ValidString(values[i]) {
			return fmt.Errorf("label %s value %q is not valid UTF-8", n, values[i])
		}
	}
	return nil
}

// labelPairsOf are the label pairs of names and values, sorted by name as
// client_golang exposes them.
func labelPairsOf(names, values []string) []*dto.LabelPair {
	lp := make([]*dto.LabelPair, len(names))
	for i := range names {
		lp[i] = &dto.LabelPair{Name: &names[i], Value: &values[i]}
	}
	slices.SortFunc(lp, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return lp
}

// constMetric is a gauge or counter sample of a pair, with its pair's
// shared label pairs.
type constMetric struct {
	desc    *prometheus.Desc
	v       float64
	counter bool
	// created is a counter's created timestamp (Unix seconds; 0: none), as
	// prometheus.NewConstMetricWithCreatedTimestamp writes it: OpenMetrics'
	// _created, protobuf's created_timestamp.
	created float64
	labels  []*dto.LabelPair
}

func (c constMetric) Desc() *prometheus.Desc { return c.desc }

func (c constMetric) Write(out *dto.Metric) error {
	out.Label = c.labels
	v := c.v
	if c.counter {
		out.Counter = &dto.Counter{Value: &v}
		if c.created > 0 {
			sec, frac := math.Modf(c.created)
			out.Counter.CreatedTimestamp = &timestamppb.Timestamp{Seconds: int64(sec), Nanos: int32(frac * 1e9)}
		}
	} else {
		out.Gauge = &dto.Gauge{Value: &v}
	}
	return nil
}

// labelled is a pair's histogram with its pair's labels: what the histogram
// writes (classic and native buckets, exemplars) with the label pairs of
// desc.
type labelled struct {
	desc   *prometheus.Desc
	metric prometheus.Metric
	labels []*dto.LabelPair
}

func (l labelled) Desc() *prometheus.Desc { return l.desc }

func (l labelled) Write(out *dto.Metric) error {
	if err := l.metric.Write(out); err != nil {
		return err
	}
	out.Label = l.labels
	return nil
}

// collector is the one collector a Manager registers. It is unchecked
// (Describe sends nothing) because a registry pins the label names of a
// metric name for the life of the program, even across Unregister, while
// ours change with the static labels of the configuration.
type collector struct{ m *Manager }

// Describe implements prometheus.Collector. It sends nothing: see collector.
func (collector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: it copies every pair's and
// target's series under the lock and renders them outside it.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	names := make([]string, 0, len(m.targets))
	for name := range m.targets {
		names = append(names, name)
	}
	m.mu.Unlock()
	slices.Sort(names)
	c.collect(ch, names, true, allSeries)
}

// ExpositionTargets implements exposition.Partitioned.
func (c collector) ExpositionTargets() []string {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.targets))
	for name := range m.targets {
		names = append(names, name)
	}
	return names
}

// ExpositionVersion implements exposition.Partitioned: the configuration's
// epoch and the target's version, which every change of its pairs' series
// and of its checks moves.
func (c collector) ExpositionVersion(target string) uint64 {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.epoch << 40
	if t := m.targets[target]; t != nil {
		v |= t.version & (1<<40 - 1)
	}
	return v
}

// ExpositionIndependent implements exposition.Independent: a target's
// series are made of the prober's state alone (its checks keep what they
// read of the collector's scrapes).
func (collector) ExpositionIndependent() {}

// CollectTarget implements exposition.Partitioned: every series of target
// but its attempt counts, which are attemptsPart's.
func (c collector) CollectTarget(target string, ch chan<- prometheus.Metric) {
	c.collect(ch, []string{target}, false, outcomeSeries)
}

// attemptsPart is the exposition cache's part of a target that holds its
// pairs' attempt counts (vllm_probe_attempts_total). A probe's start moves
// them alone; its end, a few seconds later, moves the rest. Kept in the
// collector's part, the start had the cache encode every series of the
// target again: twice per probe instead of once. Collect sends nothing:
// the collector's Collect sends every series, attempt counts included.
type attemptsPart struct{ m *Manager }

// Describe implements prometheus.Collector. It sends nothing: see
// collector.
func (attemptsPart) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: see attemptsPart.
func (attemptsPart) Collect(chan<- prometheus.Metric) {}

// ExpositionTargets implements exposition.Partitioned.
func (a attemptsPart) ExpositionTargets() []string { return collector(a).ExpositionTargets() }

// ExpositionVersion implements exposition.Partitioned: the collector's
// version of target, which moves with the pairs' labels, plus the count of
// its probes started.
func (a attemptsPart) ExpositionVersion(target string) uint64 {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.epoch << 40
	if t := m.targets[target]; t != nil {
		v |= (t.version + t.started) & (1<<40 - 1)
	}
	return v
}

// ExpositionIndependent implements exposition.Independent.
func (attemptsPart) ExpositionIndependent() {}

// ExpositionPrivate implements exposition.Private: no join reads the
// attempt counts, so a probe's start does not encode the joins again.
func (attemptsPart) ExpositionPrivate() {}

// CollectTarget implements exposition.Partitioned: the attempt counts of
// target's pairs.
func (a attemptsPart) CollectTarget(target string, ch chan<- prometheus.Metric) {
	collector(a).collect(ch, []string{target}, false, attemptSeries)
}

// CollectShared implements exposition.Partitioned: none.
func (attemptsPart) CollectShared(chan<- prometheus.Metric) {}

// Exposed implements exposition's exposer: a render served target's
// series as the cache encoded them, so its reasons' first-exposition
// zeros are out and their counts render from now on. The cache's encoding
// ahead does not expose them: only a scrape does.
func (c collector) Exposed(target string) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.targets[target]
	if t == nil {
		return
	}
	for _, p := range t.pairs {
		if p.series.exposed() {
			t.version++
		}
	}
}

// CollectShared implements exposition.Partitioned: every series of the
// prober belongs to a target.
func (collector) CollectShared(chan<- prometheus.Metric) {}

// collect copies the series of the targets names and of their pairs under
// the lock and renders them outside it, those of sel.
// expose: the collection is a scrape's (Collect), which exposes the
// reasons' pending zeros; the cache's (CollectTarget) leaves that to
// Exposed. A pair's label error is reported by the collections of its
// other series, not by those of its attempt counts alone.
func (c collector) collect(ch chan<- prometheus.Metric, names []string, expose bool, sel selection) {
	type row struct {
		ls *labelSet
		s  series
	}
	type health struct {
		lv         []string
		health, up bool
	}
	m := c.m
	m.mu.Lock()
	d := m.descs
	if d == nil {
		m.mu.Unlock()
		return
	}
	var rows []row
	var healths []health
	for _, name := range names {
		t := m.targets[name]
		if t == nil {
			continue
		}
		for _, p := range t.pairs {
			if sel == attemptSeries { // only the count: no copy of the rest
				rows = append(rows, row{ls: m.pairLabelSet(p), s: series{attempts: p.series.attempts}})
				continue
			}
			rows = append(rows, row{ls: m.pairLabelSet(p), s: p.series.snapshot()})
			if expose && p.series.exposed() {
				t.version++ // the pending zeros render their counts from now on
			}
		}
		if t.checked && sel != attemptSeries {
			healths = append(healths, health{lv: append([]string{t.cfg.Name, t.model}, t.cfg.StaticLabelValues(m.static)...), health: t.healthUp, up: t.modelsUp})
		}
	}
	m.mu.Unlock()
	for i := range rows {
		if err := rows[i].ls.err; err != nil {
			if sel != attemptSeries {
				m.errs.Report(rows[i].ls.values[0], err)
			}
			continue
		}
		rows[i].s.collect(ch, d, rows[i].ls, sel)
	}
	for _, h := range healths {
		m.errs.Send(ch, h.lv[0], d.healthUp, prometheus.GaugeValue, b2f(h.health), h.lv...)
		m.errs.Send(ch, h.lv[0], d.modelsUp, prometheus.GaugeValue, b2f(h.up), h.lv...)
	}
}

// pairLabels are the label values of p's series now. m.mu must be held.
func (m *Manager) pairLabels(p *pair) []string {
	return append([]string{p.key.target, p.key.module, pairModel(p)}, p.tgt.cfg.StaticLabelValues(m.static)...)
}

// pairLabelSet is the label set of p's series now, rebuilt when its label
// names or values changed. m.mu must be held.
func (m *Manager) pairLabelSet(p *pair) *labelSet {
	values := m.pairLabels(p)
	names := append([]string{"target", "module", "model"}, m.static...)
	if ls := p.labels; ls != nil && slices.Equal(ls.values, values) && slices.Equal(ls.names, names) {
		return ls
	}
	p.labels = newLabelSet(names, values)
	return p.labels
}

// oneShot renders the series of one probe run outside the schedule
// (ProbeNow, ProbeURLNow), without target, module and model labels: the
// scraper of /probe sets them.
type oneShot struct{ s *series }

func (oneShot) Describe(chan<- *prometheus.Desc) {}

func (o oneShot) Collect(ch chan<- prometheus.Metric) {
	o.s.collect(ch, newDescsLabels(nil, nil), newLabelSet(nil, nil), allSeries)
}

// oneShotRegistry returns the metrics of one probe run outside the schedule
// in a fresh registry.
func oneShotRegistry(hist histOpts, res *probe.Result, end float64) *prometheus.Registry {
	s := newSeries(hist, false)
	s.attempts = 1
	s.observe(res, end, "")
	reg := prometheus.NewRegistry()
	reg.MustRegister(oneShot{s})
	return reg
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ExemplarLabel is the exemplar label of a probe's TTFT, E2E and TPOT
// observations: its record id, which /probe/record?id= opens.
const ExemplarLabel = "record_id"

// observe observes v on o with the exemplar ex when it has one.
func observe(o prometheus.Observer, v float64, ex prometheus.Labels) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok && ex != nil {
		eo.ObserveWithExemplar(v, ex)
		return
	}
	o.Observe(v)
}

// skip counts a scheduled probe of p not started, for reason. m.mu must be
// held.
func (p *pair) skip(reason string, at float64) {
	p.series.skip(reason, at)
	p.touch()
}

// touch notes that p's series changed (ExpositionVersion). m.mu must be
// held.
func (p *pair) touch() {
	if p.tgt != nil {
		p.tgt.version++
	}
}
