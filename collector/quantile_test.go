package collector

import (
	"math"
	"testing"
)

// TestBoundedQuantile: an idle vLLM's queue time (every request in the
// lowest bucket, le 0.3 s, mean 0) reads p50 0 and p99 0, not the 0.15 s and
// 0.297 s of plain interpolation; where the buckets resolve the latencies,
// the bound does not bind and the figure is histogram_quantile's.
func TestBoundedQuantile(t *testing.T) {
	inf := math.Inf(1)
	idleQueue := []Bucket{{0.3, 100}, {0.5, 100}, {1, 100}, {inf, 100}}
	if got := bucketQuantile(0.5, idleQueue); math.Abs(got-0.15) > 1e-12 {
		t.Fatalf("plain interpolation reads %g, want the artefact 0.15 this test is about", got)
	}
	for _, q := range []float64{0.5, 0.99} {
		if got := boundedQuantile(q, idleQueue, 0); got != 0 {
			t.Errorf("idle queue p%g = %g, want 0", q*100, got)
		}
	}
	// 100 requests spread over (0.3, 1]: mean 0.65, p50 interpolated in (0.5, 1].
	spread := []Bucket{{0.3, 0}, {0.5, 30}, {1, 100}, {inf, 100}}
	for _, q := range []float64{0.5, 0.99} {
		if got, want := boundedQuantile(q, spread, 0.65), bucketQuantile(q, spread); got != want {
			t.Errorf("p%g = %g, want histogram_quantile's %g", q*100, got, want)
		}
	}
	// Every request in the lowest bucket, mean 0.01: p50 ≤ 2 × mean.
	if got := boundedQuantile(0.5, []Bucket{{0.1, 10}, {inf, 10}}, 0.01); math.Abs(got-0.02) > 1e-12 {
		t.Errorf("p50 = %g, want the bound 0.02", got)
	}
}
