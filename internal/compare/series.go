package compare

import (
	"math"
	"sync/atomic"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
)

// series is the fixed part of one exported series, its Desc and its sorted
// label pairs, built once (by client_golang, which also validates the label
// values) so that a collection does not rebuild the labels of every series
// at every scrape: building them was most of a collection's allocations.
type series struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair // immutable, shared by every scrape's metrics
}

// newSeries builds the series of desc with the label values lv; nil (logged)
// when client_golang refuses them (e.g. a label value that is not UTF-8).
func newSeries(logger log.Logger, desc *prometheus.Desc, lv ...string) *series {
	m, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, 0, lv...)
	if err != nil {
		level.Warn(logger).Log("msg", "series not exported", "desc", desc.String(), "err", err)
		return nil
	}
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		level.Warn(logger).Log("msg", "series not exported", "desc", desc.String(), "err", err)
		return nil
	}
	return &series{desc: desc, labels: d.Label}
}

// gaugeMetric is one scrape's value of a series. Its label pairs are the
// series' own: client_golang treats a written dto.Metric's labels as
// immutable (registry.go, checkMetricConsistency).
type gaugeMetric struct {
	s *series
	v float64
}

func (m *gaugeMetric) Desc() *prometheus.Desc { return m.s.desc }

func (m *gaugeMetric) Write(out *dto.Metric) error {
	v := m.v
	out.Label = m.s.labels
	out.Gauge = &dto.Gauge{Value: &v}
	return nil
}

// send exports v on s unless s is nil or v is not a finite number.
func send(ch chan<- prometheus.Metric, s *series, v float64) {
	if s == nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	ch <- &gaugeMetric{s: s, v: v}
}

// targetSeries are the series of one target for one model: the model label
// is the prober's resolved model, which may change at run time.
type targetSeries struct {
	model   string
	expGen  *series
	modules []moduleSeries // the target's modules, in order
}

type moduleSeries struct {
	expTPOT, expTTFT *series
	expGoodput       *series
	ratio            []*series // by baseline.Metrics
}

// seriesCache holds a target's series; SetTargets gives every target a new,
// empty one, so the series follow the configuration's label values.
type seriesCache struct{ p atomic.Pointer[targetSeries] }

// get returns t's series for model, building them when the model changed
// (or on the first scrape after SetTargets). Concurrent scrapes may both
// build them; either result is the same.
func (c *seriesCache) get(logger log.Logger, d map[string]*prometheus.Desc, t *target, model string) *targetSeries {
	if ts := c.p.Load(); ts != nil && ts.model == model {
		return ts
	}
	tlv := append(append([]string{t.name, model}, t.static...), t.baseline)
	ts := &targetSeries{model: model, expGen: newSeries(logger, d[mExpGen], tlv...), modules: make([]moduleSeries, len(t.modules))}
	for i, mod := range t.modules {
		plv := append(append([]string{t.name, mod, model}, t.static...), t.baseline)
		ms := moduleSeries{expTPOT: newSeries(logger, d[mExpTPOT], plv...), expTTFT: newSeries(logger, d[mExpTTFT], plv...),
			expGoodput: newSeries(logger, d[mExpGoodput], plv...),
			ratio:      make([]*series, len(baseline.Metrics))}
		for j, m := range baseline.Metrics {
			ms.ratio[j] = newSeries(logger, d[mRatio], append(plv[:len(plv):len(plv)], string(m))...)
		}
		ts.modules[i] = ms
	}
	c.p.Store(ts)
	return ts
}
