package prober

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// value is the count of the series of lv, held-back increments included.
func (l *lazyCounters) value(lv ...string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := 0.0
	if p, ok := l.pending[lazyKey(lv)]; ok {
		v = p.v
	}
	if l.created[lazyKey(lv)] {
		v += testutil.ToFloat64(l.vec.WithLabelValues(lv...))
	}
	return v
}

// collected is what one collection of l exposes, by the reason label.
func collected(t *testing.T, l *lazyCounters) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	l.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, lp := range d.GetLabel() {
			if lp.GetName() == "reason" {
				out[lp.GetValue()] = d.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestLazyCountersExposeZeroFirst: a failure reason's series does not exist
// before the reason occurs; its first collection shows 0 and the next one the
// count, so that Prometheus' increase() sees the first failure; a reason that
// exists counts at once; deleting a pair's series forgets them.
func TestLazyCountersExposeZeroFirst(t *testing.T) {
	l := newLazyCounters(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f_total", Help: "h"}, []string{"target", "reason"}))
	if got := collected(t, l); len(got) != 0 {
		t.Fatalf("before any failure: %v, want no series", got)
	}
	l.add([]string{"a", "timeout"}, 1)
	l.add([]string{"a", "timeout"}, 1) // before any collection: held back too
	if got := collected(t, l); len(got) != 1 || got["timeout"] != 0 {
		t.Fatalf("first collection after the first failures: %v, want timeout at 0", got)
	}
	if got := collected(t, l); got["timeout"] != 2 {
		t.Fatalf("second collection: %v, want timeout at 2", got)
	}
	l.add([]string{"a", "timeout"}, 1)
	if got := collected(t, l); got["timeout"] != 3 {
		t.Fatalf("an existing reason: %v, want timeout at 3 at once", got)
	}
	if v := l.value("a", "timeout"); v != 3 {
		t.Errorf("value = %v, want 3", v)
	}
	l.deleteMatching([]string{"a"})
	if got := collected(t, l); len(got) != 0 {
		t.Fatalf("after deleting the pair: %v, want no series", got)
	}
	l.add([]string{"a", "timeout"}, 1)
	if got := collected(t, l); got["timeout"] != 0 {
		t.Fatalf("a reason of a deleted pair comes back: %v, want timeout at 0 first", got)
	}
}
