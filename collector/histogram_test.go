package collector

import (
	"cmp"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// histogramOfByMap is how histogramOf merged every family before it summed
// series of equal bounds bucket by bucket: through a map of the bounds. It
// is the reference the tests below compare with.
func histogramOfByMap(mf *dto.MetricFamily, keep func(*dto.Metric) bool) *Histogram {
	byLE := map[float64]float64{}
	var h *Histogram
	for _, mt := range mf.GetMetric() {
		if mt.Histogram == nil || !keep(mt) {
			continue
		}
		if h == nil {
			h = &Histogram{}
		}
		hh := mt.Histogram
		count := float64(hh.GetSampleCount())
		if hh.SampleCountFloat != nil {
			count = hh.GetSampleCountFloat()
		}
		h.Count += count
		h.Sum += hh.GetSampleSum()
		hasInf := false
		for _, b := range hh.GetBucket() {
			c := float64(b.GetCumulativeCount())
			if b.CumulativeCountFloat != nil {
				c = b.GetCumulativeCountFloat()
			}
			byLE[b.GetUpperBound()] += c
			if math.IsInf(b.GetUpperBound(), +1) {
				hasInf = true
			}
		}
		if !hasInf {
			byLE[math.Inf(+1)] += count
		}
	}
	if h == nil {
		return nil
	}
	for le, c := range byLE {
		h.Buckets = append(h.Buckets, Bucket{UpperBound: le, Count: c})
	}
	slices.SortFunc(h.Buckets, func(a, b Bucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
	return h
}

// randomFamily is a histogram family of a few series whose bounds are
// mostly shared, sometimes not: another layout, an explicit or implicit
// +Inf, bounds out of order or repeated.
func randomFamily(r *rand.Rand) *dto.MetricFamily {
	layouts := [][]float64{
		{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10},
		{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 20, 40, 80},
		{1, 0.5, 2},          // out of order
		{0.5, 0.5, 1},        // repeated
		{},                   // +Inf alone
		{1, math.Inf(+1), 2}, // +Inf inside
	}
	mf := &dto.MetricFamily{Name: proto.String("h"), Type: dto.MetricType_HISTOGRAM.Enum()}
	first := r.IntN(len(layouts))
	for range 1 + r.IntN(4) {
		bounds := layouts[first]
		if r.IntN(5) == 0 {
			bounds = layouts[r.IntN(len(layouts))]
		}
		count := uint64(r.IntN(100))
		h := &dto.Histogram{SampleCount: proto.Uint64(count), SampleSum: proto.Float64(r.Float64() * 10)}
		if r.IntN(4) == 0 {
			h.SampleCountFloat = proto.Float64(float64(count) + 0.5)
		}
		var c uint64
		for _, b := range bounds {
			c += uint64(r.IntN(10))
			bk := &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(c)}
			if r.IntN(8) == 0 {
				bk.CumulativeCountFloat = proto.Float64(float64(c) + 0.25)
			}
			h.Bucket = append(h.Bucket, bk)
		}
		if r.IntN(2) == 0 && !slices.Contains(bounds, math.Inf(+1)) {
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(math.Inf(+1)), CumulativeCount: proto.Uint64(count)})
		}
		m := &dto.Metric{Histogram: h}
		if r.IntN(6) == 0 {
			m.Histogram = nil
			m.Gauge = &dto.Gauge{Value: proto.Float64(1)}
		}
		mf.Metric = append(mf.Metric, m)
	}
	return mf
}

// TestHistogramOfMatchesMerge: histogramOf sums the buckets of series that
// share their bounds without a map, and gives what merging every bound
// through a map gives, whatever the layouts (10,000 random families).
func TestHistogramOfMatchesMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keepAll := func(*dto.Metric) bool { return true }
	for i := range 10000 {
		mf := randomFamily(r)
		got, want := histogramOf(mf, keepAll), histogramOfByMap(mf, keepAll)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("family %d %v:\ngot  %+v\nwant %+v", i, mf, got, want)
		}
		if got != nil && cap(got.Buckets) != len(got.Buckets) {
			t.Fatalf("family %d: %d buckets in a slice of %d", i, len(got.Buckets), cap(got.Buckets))
		}
	}
}

// histogramIncreaseAlloc is histogramIncrease as it was before it reused
// one slice for every pair's increase: the reference of the test below.
func histogramIncreaseAlloc(hs []*Histogram) *Histogram {
	var acc *Histogram
	for i := 1; i < len(hs); i++ {
		prev, cur := hs[i-1], hs[i]
		if cur == nil || prev == nil {
			continue
		}
		var delta *Histogram
		if cur.Count < prev.Count || !sameBounds(prev, cur) {
			delta = cur
		} else {
			delta = &Histogram{Sum: cur.Sum - prev.Sum, Count: cur.Count - prev.Count, Buckets: make([]Bucket, len(cur.Buckets))}
			if delta.Sum < 0 {
				delta.Sum = 0
			}
			for j, b := range cur.Buckets {
				delta.Buckets[j] = Bucket{UpperBound: b.UpperBound, Count: math.Max(0, b.Count-prev.Buckets[j].Count)}
			}
		}
		switch {
		case acc == nil || !sameBounds(acc, delta):
			acc = &Histogram{Sum: delta.Sum, Count: delta.Count, Buckets: append([]Bucket(nil), delta.Buckets...)}
		default:
			acc.Sum += delta.Sum
			acc.Count += delta.Count
			for j := range acc.Buckets {
				acc.Buckets[j].Count += delta.Buckets[j].Count
			}
		}
	}
	return acc
}

// TestHistogramIncreaseMatches: a window's increase is the same with the
// pairs' increases in one reused slice, across resets, layout changes and
// gaps (10,000 random windows); the histograms of the window are left as
// they were.
func TestHistogramIncreaseMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	keepAll := func(*dto.Metric) bool { return true }
	for i := range 10000 {
		hs := make([]*Histogram, 2+r.IntN(6))
		for j := range hs {
			if r.IntN(8) != 0 {
				hs[j] = histogramOf(randomFamily(r), keepAll)
			}
		}
		if r.IntN(2) == 0 { // a growing series: most windows
			for j := 1; j < len(hs); j++ {
				if hs[j] != nil && hs[j-1] != nil && sameBounds(hs[j], hs[j-1]) {
					hs[j].Count += hs[j-1].Count
					hs[j].Sum += hs[j-1].Sum
					for k := range hs[j].Buckets {
						hs[j].Buckets[k].Count += hs[j-1].Buckets[k].Count
					}
				}
			}
		}
		before := make([]Histogram, len(hs))
		for j, h := range hs {
			if h != nil {
				before[j] = Histogram{Sum: h.Sum, Count: h.Count, Buckets: slices.Clone(h.Buckets)}
			}
		}
		got, want := histogramIncrease(hs), histogramIncreaseAlloc(hs)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("window %d:\ngot  %+v\nwant %+v", i, got, want)
		}
		for j, h := range hs {
			if h != nil && !reflect.DeepEqual(*h, before[j]) {
				t.Fatalf("window %d: histogram %d changed from %+v to %+v", i, j, before[j], *h)
			}
		}
	}
}
