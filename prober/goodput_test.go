package prober

import (
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// TestGoodputOnSimulator probes vllm_sim (TTFT 50 ms, ITL 10 ms) with two
// modules: one whose objectives the probes meet, one whose TPOT objective
// (2 ms) successful probes miss. The first counts good probes, the second
// bad ones and a TPOT miss each, and no other miss; a module without
// objectives has no goodput series.
func TestGoodputOnSimulator(t *testing.T) {
	_, ts, _ := startSim(t, func(c *simulator.Config) {
		c.TTFT, c.ITL = 50*time.Millisecond, 10*time.Millisecond
	})
	cfg := loadConfig(t, `
global:
  probe_interval: 1h
slos:
  ttft: 2s
  e2e: 10s
modules:
  meets:
    prober: completions
    prompt: "Hello"
    max_tokens: 6
    ignore_eos: true
  misses_tpot:
    prober: completions
    prompt: "Hello"
    max_tokens: 6
    ignore_eos: true
    slos: {ttft: 2s, tpot: 2ms, itl_p99: 1s}
targets:
  - name: sim
    url: `+ts.URL+`
`)
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, log.NewNopLogger()))
	m.offset = func(pairKey, time.Duration) time.Duration { return 0 }
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	stop := running(t, m)
	lastOf(t, m, "sim", "meets", "", 0)
	lastOf(t, m, "sim", "misses_tpot", "", 0)
	stop()

	model := m.Model("sim")
	goodput, misses := family{m: m, name: metricGoodput}, family{m: m, name: metricObjectiveMisses}
	for _, c := range []struct {
		module, result string
		want           float64
	}{{"meets", "good", 1}, {"meets", "bad", 0}, {"misses_tpot", "good", 0}, {"misses_tpot", "bad", 1}} {
		lv := []string{"sim", c.module, model, c.result}
		got, ok := counter(t, goodput.WithLabelValues(lv...)), goodput.has(lv...)
		if !ok || got != c.want {
			t.Errorf("%s{module=%q,result=%q} = %v (present %v), want %v", metricGoodput, c.module, c.result, got, ok, c.want)
		}
	}
	for _, c := range []struct {
		module, objective string
		want              float64
		present           bool
	}{
		{"misses_tpot", "tpot", 1, true}, {"misses_tpot", "ttft", 0, true}, {"misses_tpot", "itl_p99", 0, true},
		{"misses_tpot", "e2e", 0, false}, // not set for this module
		{"meets", "ttft", 0, true}, {"meets", "e2e", 0, true}, {"meets", "tpot", 0, false},
	} {
		lv := []string{"sim", c.module, model, c.objective}
		got, ok := counter(t, misses.WithLabelValues(lv...)), misses.has(lv...)
		if ok != c.present || got != c.want {
			t.Errorf("%s{module=%q,objective=%q} = %v (present %v), want %v (present %v)", metricObjectiveMisses, c.module, c.objective, got, ok, c.want, c.present)
		}
	}
}

// TestGoodputJudge: a failed probe is bad whatever its latencies, a probe
// exactly at an objective meets it (vLLM's bench: slo >= value), the ITL
// objective reads the probe's 99th percentile, not its mean.
func TestGoodputJudge(t *testing.T) {
	o := &config.Objectives{TTFT: model.Duration(200 * time.Millisecond), ITLP99: model.Duration(50 * time.Millisecond)}
	s := newSeries(histOpts{}, true)
	s.objectives = o
	ok := func(ttft time.Duration, itls ...time.Duration) *probe.Result {
		return &probe.Result{Success: true, TTFT: ttft, E2E: time.Second, ITLs: itls}
	}
	s.judge(&probe.Result{Success: false, Reason: probe.ReasonTimeout, Err: "deadline"})
	s.judge(ok(200 * time.Millisecond))                                                              // at the objective: good
	s.judge(ok(10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond, 500*time.Millisecond)) // one slow gap of four: p99 misses
	s.judge(ok(201 * time.Millisecond))
	if s.goodput != [2]float64{1, 3} {
		t.Errorf("good, bad = %v, want [1 3]", s.goodput)
	}
	if s.misses != [4]float64{1, 0, 1, 0} {
		t.Errorf("misses (ttft, tpot, itl_p99, e2e) = %v, want [1 0 1 0]", s.misses)
	}
}
