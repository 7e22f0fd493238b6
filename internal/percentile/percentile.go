// Package percentile computes percentiles of sorted samples, as numpy does
// by default: one implementation for the benchmark runner (vLLM's
// calculate_metrics) and the joins of package compare.
package percentile

import "math"

// Linear returns the p-th percentile (0 <= p <= 100) of sorted, ascending
// values with numpy's default "linear" method (Hyndman-Fan type 7):
// h = (n-1)·p/100, v = x[⌊h⌋] + (h-⌊h⌋)·(x[⌊h⌋+1] - x[⌊h⌋]). An empty slice
// yields 0, like vLLM's np.percentile(x or 0, p).
func Linear(sorted []float64, p float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return 0
	case n == 1 || p <= 0:
		return sorted[0]
	case p >= 100:
		return sorted[n-1]
	}
	h := float64(n-1) * p / 100
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= n {
		return sorted[n-1]
	}
	return sorted[i] + (h-lo)*(sorted[i+1]-sorted[i])
}
