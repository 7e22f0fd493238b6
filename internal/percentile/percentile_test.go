package percentile

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// The expected values are computed by hand with numpy's linear method:
// h = (n-1)p/100, x[floor h] + frac(h)(x[floor h+1]-x[floor h]).
func TestLinearNumpy(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		p    float64
		want float64
	}{
		{nil, 99, 0},
		{[]float64{7}, 99, 7},
		{[]float64{1, 2, 3, 4}, 50, 2.5},             // h=1.5
		{[]float64{1, 2, 3, 4}, 90, 3.7},             // h=2.7
		{[]float64{1, 2, 3, 4}, 99, 3.97},            // h=2.97
		{[]float64{15, 20, 35, 40, 50}, 40, 29},      // h=1.6: 20+0.6*15
		{[]float64{15, 20, 35, 40, 50}, 99, 49.6},    // h=3.96: 40+0.96*10
		{[]float64{15, 20, 35, 40, 50}, 50, 35},      // h=2 exactly
		{[]float64{15, 20, 35, 40, 50}, 99.9, 49.96}, // h=3.996
		{[]float64{1, 2, 3, 4}, 100, 4},
		{[]float64{1, 2, 3, 4}, 0, 1},
	} {
		if got := Linear(c.x, c.p); !near(got, c.want) {
			t.Errorf("Linear(%v, %v) = %v, want %v", c.x, c.p, got, c.want)
		}
	}
}
