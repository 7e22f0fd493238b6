package compare

import (
	"math"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/prober"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
)

// probeLog is a ProbeSource over a list of probes, with the prober's means.
type probeLog []struct {
	start           time.Time
	ttft, tpot, out float64
	load            float64 // NaN: unknown
}

func (p probeLog) Model(string) string { return "m" }

func (p probeLog) Window(_, _ string) ProbeWindow { return p }

func (p probeLog) Means(since time.Time) prober.Means {
	var m prober.Means
	var nLoad int
	for _, r := range p {
		if r.start.Before(since) {
			continue
		}
		m.N++
		m.TTFT += r.ttft
		m.TPOT += r.tpot
		m.ITL += r.tpot
		m.E2E += r.ttft + r.tpot*(r.out-1)
		m.OutputTokens += r.out
		if !math.IsNaN(r.load) {
			m.Load += r.load
			nLoad++
		}
	}
	if m.N == 0 {
		nan := math.NaN()
		return prober.Means{TTFT: nan, TPOT: nan, ITL: nan, E2E: nan, OutputTokens: nan, Load: nan}
	}
	n := float64(m.N)
	m.NTPOT, m.NITL, m.NLoad = m.N, m.N, nLoad
	m.TTFT, m.TPOT, m.ITL, m.E2E, m.OutputTokens = m.TTFT/n, m.TPOT/n, m.ITL/n, m.E2E/n, m.OutputTokens/n
	if nLoad > 0 {
		m.Load /= float64(nLoad)
	} else {
		m.Load = math.NaN()
	}
	return m
}

const twoLoads = `
version: 1
baselines:
  - name: b
    model: m
    source: {tool: vllm bench serve, format: vllm-serve-json, files: [a.json]}
    points:
      - {concurrency: 1, output_throughput: 50, ttft_seconds: {mean: 0.05}, tpot_seconds: {mean: 0.02}, itl_seconds: {mean: 0.02}}
      - {concurrency: 9, output_throughput: 200, ttft_seconds: {mean: 1.0}, tpot_seconds: {mean: 0.02}, itl_seconds: {mean: 0.02}}
`

// TestProbeExpectationPerProbeLoad: in one window, idle probes that match
// the idle expectation and queued probes that match the expectation at the
// burst's load give ratios of 1, whatever the load at the moment; a probe
// misjudged at a burst's edge does not move the median; probes without a
// load are left out while others have one.
func TestProbeExpectationPerProbeLoad(t *testing.T) {
	f, err := baseline.Parse([]byte(twoLoads))
	if err != nil {
		t.Fatal(err)
	}
	b := f.Baselines[0]
	now := time.Unix(1_700_000_000, 0)
	at := func(sec float64) time.Time { return now.Add(time.Duration((sec - 30) * float64(time.Second))) }
	nan := math.NaN()
	log := probeLog{
		{start: at(1), ttft: 0.05, tpot: 0.02, out: 8, load: 1},
		{start: at(5), ttft: 0.05, tpot: 0.02, out: 8, load: 1},
		// the burst's edge: the scrape before this probe saw an idle server
		{start: at(10), ttft: 1.0, tpot: 0.02, out: 8, load: 1},
		{start: at(13), ttft: 1.0, tpot: 0.02, out: 8, load: 9},
		{start: at(17), ttft: 1.0, tpot: 0.02, out: 8, load: 9},
		{start: at(21), ttft: 1.0, tpot: 0.02, out: 8, load: 9},
		// the scrape before it failed: no load
		{start: at(25), ttft: 7.0, tpot: 0.02, out: 8, load: nan},
	}
	for _, tc := range []struct {
		name string
		log  probeLog
	}{
		{"every load known", log[:6]},
		// A probe without load is left out, means included: its slice's
		// load sum is turned back from the mean with the count of probes
		// that knew theirs (prober.Means.NLoad), so it neither borrows a
		// neighbour's load nor biases it.
		{"one load unknown", log},
	} {
		for _, fallback := range []float64{1, 9} {
			live, exp, ratios, ok := probeExpectation(tc.log, b.Curve(), "t", "m", now, 30*time.Second, fallback)
			if !ok {
				t.Fatalf("%s: no expectation", tc.name)
			}
			for _, m := range []baseline.Metric{baseline.MetricTTFT, baseline.MetricTPOT, baseline.MetricITL, baseline.MetricE2E} {
				if got := ratios[m]; math.Abs(got-1) > 1e-9 {
					t.Errorf("%s, scrape-time load %g: %s ratio = %g, want 1", tc.name, fallback, m, got)
				}
			}
			if live.N != 6 || math.Abs(exp.Concurrency-(1+1+1+9+9+9)/6.0) > 1e-9 ||
				math.Abs(exp.TTFTMean-(0.05*3+1.0*3)/6) > 1e-9 || math.Abs(live.TTFT-(0.05*2+1.0*4)/6) > 1e-9 {
				t.Errorf("%s: live N %d TTFT %g, expected load %g TTFT %g", tc.name, live.N, live.TTFT, exp.Concurrency, exp.TTFTMean)
			}
		}
	}
	// No probe knew its load: the scrape-time load stands in.
	var blind probeLog
	for _, r := range log[:2] {
		r.load = nan
		blind = append(blind, r)
	}
	if _, exp, ratios, ok := probeExpectation(blind, b.Curve(), "t", "m", now, 30*time.Second, 1); !ok || exp.Concurrency != 1 || ratios[baseline.MetricTTFT] != 1 {
		t.Errorf("without loads: expectation at %g, TTFT ratio %g", exp.Concurrency, ratios[baseline.MetricTTFT])
	}
	if _, _, _, ok := probeExpectation(probeLog{}, b.Curve(), "t", "m", now, 30*time.Second, 1); ok {
		t.Error("an expectation without probes")
	}
}
