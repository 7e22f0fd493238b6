package prober

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// lazyCounters is a CounterVec whose series appear only once they count
// something (a failure reason, a skip reason), instead of one series per
// possible label value created at 0.
//
// A counter that appears at 1 would lose its first increment to Prometheus:
// increase() and rate() see no step from a series' first sample. So a new
// series is created at 0 and the increment is held back until a collection
// has exposed the 0; the collection after it shows the increment. The
// first event of a reason therefore reaches Prometheus one scrape later than
// it would with the series created at 0 in advance, and is counted.
type lazyCounters struct {
	vec *prometheus.CounterVec

	mu      sync.Mutex
	created map[string]bool        // series that exist, by key
	pending map[string]*pendingAdd // held-back increments of series created since the last collection
}

type pendingAdd struct {
	lv      []string
	v       float64
	exposed bool // a collection has sent the series at 0
}

func newLazyCounters(vec *prometheus.CounterVec) *lazyCounters {
	return &lazyCounters{vec: vec, created: map[string]bool{}, pending: map[string]*pendingAdd{}}
}

func lazyKey(lv []string) string { return strings.Join(lv, "\xff") }

// add adds v to the series of lv, creating it at 0 first if it does not exist.
func (l *lazyCounters) add(lv []string, v float64) {
	k := lazyKey(lv)
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.pending[k]; ok {
		p.v += v
		return
	}
	if !l.created[k] {
		l.vec.WithLabelValues(lv...)
		l.created[k] = true
		l.pending[k] = &pendingAdd{lv: lv, v: v}
		return
	}
	l.vec.WithLabelValues(lv...).Add(v)
}

// collect applies the increments held back for series whose 0 an earlier
// collection exposed, then collects the series. The registry writes the
// collected metrics after collect returns, so an increment made here, after
// the collection, could still show in it: new series wait for the next one.
func (l *lazyCounters) collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, p := range l.pending {
		if p.exposed {
			l.vec.WithLabelValues(p.lv...).Add(p.v)
			delete(l.pending, k)
		}
	}
	l.vec.Collect(ch)
	for _, p := range l.pending {
		p.exposed = true
	}
}

// deleteMatching removes every series whose label values start with prefix.
func (l *lazyCounters) deleteMatching(prefix []string) {
	pk := lazyKey(prefix) + "\xff"
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.created {
		if strings.HasPrefix(k, pk) {
			l.vec.DeleteLabelValues(strings.Split(k, "\xff")...)
			delete(l.created, k)
			delete(l.pending, k)
		}
	}
}

// Describe implements prometheus.Collector.
func (l *lazyCounters) Describe(ch chan<- *prometheus.Desc) { l.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (l *lazyCounters) Collect(ch chan<- prometheus.Metric) { l.collect(ch) }
