package baseline

import "testing"

// BenchmarkExpected is one interpolation of a baseline of four points (one
// all-failed), at a load between two of them, on the curve built once: what
// the regression collector asks for every baselined target at every scrape of
// /metrics. Before Curve, Baseline.Expected placed, sorted and filtered the
// points at every call (1.4–3.7 µs and 11 allocations here).
func BenchmarkExpected(b *testing.B) {
	f, err := Parse([]byte(minimalYAML))
	if err != nil {
		b.Fatal(err)
	}
	c := f.Baselines[0].Curve()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Expected(2.5); !ok {
			b.Fatal("no expectation")
		}
	}
}
