package prober

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// testMetrics names the Manager's series families for tests, which read one
// series by its label values in the order of the family's label names
// (target, module, model, the static labels, then the family's own), as
// WithLabelValues of a vector takes them.
type testMetrics struct {
	success, lastTimestamp, lastSuccess, duration, outputTPS family
	tokens, attempts, failures, skipped                      family
	healthUp, modelsUp                                       family
	answers                                                  struct{ correct, checks, dimension family }
}

func (m *Manager) testMetrics() testMetrics {
	pair := func(name string) family { return family{m: m, name: name} }
	tgt := func(name string) family { return family{m: m, name: name, target: true} }
	tm := testMetrics{
		success: pair(metricSuccess), lastTimestamp: pair(metricLastTimestamp), lastSuccess: pair(metricLastSuccess),
		duration: pair(metricDuration), outputTPS: pair(metricOutputTPS),
		tokens: pair(metricTokens), attempts: pair(metricAttempts), failures: pair(metricFailures), skipped: pair(metricSkipped),
		healthUp: tgt(metricHealthUp), modelsUp: tgt(metricModelsUp),
	}
	tm.answers.correct, tm.answers.checks, tm.answers.dimension = pair(metricAnswerCorrect), pair(metricAnswerChecks), pair(metricEmbeddingDimension)
	return tm
}

// family is one family of the Manager's series.
type family struct {
	m      *Manager
	name   string
	target bool // labelled target, model, static (the health series)
}

// WithLabelValues returns the one series of f with the label values lv, as
// a collector of one metric (testutil.ToFloat64); one of value 0 when the
// Manager renders none, as a vector creates it.
func (f family) WithLabelValues(lv ...string) prometheus.Collector {
	v, _ := f.lookup(lv)
	return constant(v)
}

// has reports whether the Manager renders the series of f with the label values lv.
func (f family) has(lv ...string) bool {
	_, ok := f.lookup(lv)
	return ok
}

func (f family) lookup(lv []string) (float64, bool) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collector{f.m})
	// Twice: a failure or skip reason that just occurred renders 0 at the
	// first collection and its count at the next (reasonState).
	if _, err := reg.Gather(); err != nil {
		panic(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	f.m.mu.Lock()
	names := []string{"target", "module", "model"}
	if f.target {
		names = []string{"target", "model"}
	}
	names = append(names, f.m.static...)
	f.m.mu.Unlock()
	for _, mf := range mfs {
		if mf.GetName() != f.name {
			continue
		}
	metrics:
		for _, met := range mf.GetMetric() {
			for i, v := range lv {
				if i >= len(names) {
					// the family's own label: the one not among names
					if !slices.ContainsFunc(met.GetLabel(), func(l *dto.LabelPair) bool { return !slices.Contains(names, l.GetName()) && l.GetValue() == v }) {
						continue metrics
					}
					continue
				}
				if labelValue(met, names[i]) != v {
					continue metrics
				}
			}
			switch {
			case met.Counter != nil:
				return met.Counter.GetValue(), true
			case met.Gauge != nil:
				return met.Gauge.GetValue(), true
			}
		}
	}
	return 0, false
}

// constant is a collector of one gauge of value v.
type constant float64

func (constant) Describe(chan<- *prometheus.Desc) {}

func (c constant) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("test_value", "A value read from the Manager's series.", nil, nil), prometheus.GaugeValue, float64(c))
}
