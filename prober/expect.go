package prober

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

const (
	metricAnswerCorrect      = "vllm_probe_answer_correct"
	metricAnswerChecks       = "vllm_probe_answer_checks_total"
	metricEmbeddingDimension = "vllm_probe_embedding_dimension"
)

// answerMetrics are the answer-check series of a metrics generation.
type answerMetrics struct {
	correct   *prometheus.GaugeVec
	checks    *prometheus.CounterVec
	dimension *prometheus.GaugeVec
}

func newAnswerMetrics(pair []string) answerMetrics {
	return answerMetrics{
		correct: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricAnswerCorrect,
			Help: "1 if the answer of the last checked probe of the target and module passed its expect, else 0."}, pair),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricAnswerChecks,
			Help: "Answer checks of probes by result (correct, wrong)."}, append(slices.Clone(pair), "result")),
		dimension: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricEmbeddingDimension,
			Help: "Length of the vector of the last embeddings probe that returned one."}, pair),
	}
}

// init creates a checking pair's counters at 0.
func (a answerMetrics) init(lv []string) {
	for _, r := range []string{"correct", "wrong"} {
		a.checks.WithLabelValues(append(slices.Clone(lv), r)...)
	}
}

func (a answerMetrics) delete(lv []string) {
	a.correct.DeleteLabelValues(lv...)
	a.dimension.DeleteLabelValues(lv...)
	for _, r := range []string{"correct", "wrong"} {
		a.checks.DeleteLabelValues(append(slices.Clone(lv), r)...)
	}
}

// observe records a probe's verdict and vector length, where it has them.
func (a answerMetrics) observe(lv []string, r *probe.Result) {
	if r.Dimension > 0 {
		a.dimension.WithLabelValues(lv...).Set(float64(r.Dimension))
	}
	if r.Answer == probe.AnswerNotChecked {
		return
	}
	a.correct.WithLabelValues(lv...).Set(b2f(r.Answer == probe.AnswerCorrect))
	result := "wrong"
	if r.Answer == probe.AnswerCorrect {
		result = "correct"
	}
	a.checks.WithLabelValues(append(slices.Clone(lv), result)...).Inc()
}
