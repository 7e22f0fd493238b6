package collector

import (
	"math"
	"testing"
)

func TestStreamOutputRate(t *testing.T) {
	model := func(e2eSum, e2eCount, genSum, genCount float64) *Model {
		return &Model{
			E2E:                        &Histogram{Sum: e2eSum, Count: e2eCount},
			GenerationTokensPerRequest: &Histogram{Sum: genSum, Count: genCount},
		}
	}
	for _, tc := range []struct {
		name string
		ms   []*Model
		want float64
	}{
		{
			// Two requests of 64 tokens took 0.5 s and 0.3 s: 128 / 0.8.
			name: "steady",
			ms:   []*Model{model(10, 4, 256, 4), model(10.5, 5, 320, 5), model(10.8, 6, 384, 6)},
			want: 160,
		},
		{
			// The restart's pair is left out of both sums; the pairs on either side count.
			name: "reset in the middle",
			ms:   []*Model{model(10, 4, 256, 4), model(11, 5, 356, 5), model(0.5, 1, 50, 1), model(1.5, 2, 250, 2)},
			want: 300.0 / 2,
		},
		{
			name: "histograms disagree on the requests",
			ms:   []*Model{model(10, 4, 256, 4), model(10.5, 5, 256, 4)},
			want: math.NaN(),
		},
		{
			name: "nothing finished",
			ms:   []*Model{model(10, 4, 256, 4), model(10, 4, 256, 4)},
			want: math.NaN(),
		},
		{
			name: "server without request_generation_tokens",
			ms:   []*Model{{E2E: &Histogram{Sum: 1, Count: 1}}, {E2E: &Histogram{Sum: 2, Count: 2}}},
			want: math.NaN(),
		},
	} {
		got := streamOutputRate(tc.ms)
		if (math.IsNaN(tc.want) != math.IsNaN(got)) || (!math.IsNaN(tc.want) && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("%s: streamOutputRate = %v, want %v", tc.name, got, tc.want)
		}
	}
}
