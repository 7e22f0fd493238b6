package compare

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/bench"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestRegressionRatioBurst is the burst case: on an unchanged server with
// max_num_seqs 4, a burst of 8 clients sending long requests makes the
// probes queue. Comparing the probes of the window with the baseline at the
// load of the scrape gave a TTFT ratio of 0.077 during the burst and 202
// after it. Each probe is now compared at the load it saw when it started,
// so no ratio leaves [0.5, 2] before, during or after the burst.
func TestRegressionRatioBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	// Few, slow tokens: the test measures queueing, and must not be a CPU
	// benchmark of a shared machine.
	const longTokens = 40
	cfg := simulator.DefaultConfig()
	cfg.Model = "sim/model"
	cfg.MaxNumSeqs = 4
	cfg.TTFT = 50 * time.Millisecond
	cfg.ITL = 20 * time.Millisecond
	cfg.BatchSlowdown = 0
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	defer sim.Close()

	// The baseline: the same simulator benchmarked with the burst's long
	// requests, below, at and beyond its 4 batch slots.
	// A baseline benchmarked while the machine could not keep the
	// simulator's schedule is not a baseline of the unchanged server: bench
	// again (3 tries), checking the levels below the 4 slots, where TTFT and
	// TPOT are the configured ones.
	var rep *bench.Report
	for try := 1; ; try++ {
		rep = nil
		for _, lv := range []struct{ c, n int }{{1, 2}, {4, 8}, {8, 16}, {12, 24}} {
			r, err := bench.Run(context.Background(), bench.Options{URL: srv.URL, Requests: lv.n, Concurrencies: []int{lv.c},
				MaxTokens: longTokens, IgnoreEOS: true, Name: "burstbase", PollInterval: 250 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if rep == nil {
				rep = r
			} else {
				rep.Levels = append(rep.Levels, r.Levels...)
			}
		}
		sane := true
		for _, lv := range rep.Levels[:2] {
			ttft, tpot := lv.Metrics.TTFT.Mean, lv.Metrics.TPOT.Mean
			if math.Abs(ttft-cfg.TTFT.Seconds()) > 0.25*cfg.TTFT.Seconds() || math.Abs(tpot-cfg.ITL.Seconds()) > 0.25*cfg.ITL.Seconds() {
				sane = false
				t.Logf("bench try %d: %s TTFT %.3fs TPOT %.4fs, configured %s and %s: busy machine", try, lv.Level, ttft, tpot, cfg.TTFT, cfg.ITL)
			}
		}
		if sane {
			break
		}
		if try == 3 {
			t.Skip("the machine never kept the simulator's schedule while benchmarking: no baseline to compare with")
		}
	}
	for _, lv := range rep.Levels {
		t.Logf("baseline %s: TTFT %.3fs TPOT %.4fs", lv.Level, lv.Metrics.TTFT.Mean, lv.Metrics.TPOT.Mean)
	}
	dir := t.TempDir()
	files, err := bench.WriteAll(dir, rep)
	if err != nil {
		t.Fatal(err)
	}

	pcfg, err := config.Load([]byte(fmt.Sprintf(`
global: {probe_interval: 300ms, scrape_interval: 100ms, scrape_timeout: 100ms, rate_window: 2s, stall_timeout: 10s}
modules:
  short: {prober: completions, prompt: "hello there", max_tokens: 4, ignore_eos: true}
baselines: [{name: sim, file: %s}]
targets: [{name: sim, url: %q, baseline: sim}]
`, filepath.Join(dir, files.Baseline), srv.URL)), dir)
	if err != nil {
		t.Fatal(err)
	}
	const window = 3 * time.Second
	reg, pm := startStack(t, pcfg, 10*time.Second, window)

	metrics := []string{"ttft", "tpot", "itl", "e2e"}
	type span struct{ lo, hi float64 }
	seen := map[string]map[string]*span{} // phase -> metric -> range
	// A sample counts only when the probes it judges saw the simulator's
	// schedule. With no jitter, no batch slowdown and no preemption the
	// simulator sends every token ITL after the previous one, however many
	// requests queue: queueing delays the first token only. A gap under
	// half or over twice the ITL is the machine's: the simulator's timer
	// fired late and the overdue tokens went out at once (its deadlines are
	// absolute), or the prober read them late. Right after the burst the
	// window holds only one or two probes (each queued for seconds), so the
	// median cannot outvote such a probe: one probe whose first token was
	// 60 ms late has three gaps of ~0 and an ITL ratio of ~0.03. The
	// server's mean ITL, which this test checked before, did not show it:
	// over the rate window it pools the burst's hundreds of on-time gaps.
	// Queueing is not filtered: a ratio computed at the wrong load (the
	// scrape's instead of each probe's) still fails the TTFT bounds.
	skipped := map[string]int{}
	offGaps := map[string][]time.Duration{} // phase -> the gaps that left samples out
	offSchedule := func(since time.Time) (time.Duration, bool) {
		for _, ts := range pm.Status() {
			for _, ms := range ts.Modules {
				for _, r := range ms.History {
					if !r.Success || r.Start.Before(since) {
						continue
					}
					for _, g := range r.ITLs {
						if g < cfg.ITL/2 || g > 2*cfg.ITL {
							return g, true
						}
					}
				}
			}
		}
		return 0, false
	}
	sample := func(phase string, d time.Duration) {
		if seen[phase] == nil {
			seen[phase] = map[string]*span{}
		}
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(150 * time.Millisecond) {
			// since is taken before the ratios are gathered and the
			// probes read after: the probes checked include every probe
			// the ratios' window held.
			since := time.Now().Add(-window)
			ratios := map[string]float64{}
			for _, m := range metrics {
				if r, ok := ratioOf(t, reg, m); ok && !math.IsNaN(r) {
					ratios[m] = r
				}
			}
			if g, off := offSchedule(since); off {
				skipped[phase]++
				if !slices.Contains(offGaps[phase], g) {
					offGaps[phase] = append(offGaps[phase], g)
				}
				continue
			}
			for _, m := range metrics {
				r, ok := ratios[m]
				if !ok {
					continue
				}
				s := seen[phase][m]
				if s == nil {
					s = &span{r, r}
					seen[phase][m] = s
				}
				s.lo, s.hi = math.Min(s.lo, r), math.Max(s.hi, r)
				if r < 0.5 || r > 2 {
					t.Errorf("%s: %s ratio %.3f outside [0.5, 2]", phase, m, r)
				}
			}
		}
	}

	// The first probes run while the daemon and the simulator start (new
	// connections, a cold race detector): their gaps are often ~0, and one
	// such probe stays in the window for 3 s. Let them leave it first, so
	// that the phase before the burst has samples to judge.
	time.Sleep(window)
	sample("before the burst", 2*time.Second)

	burstCtx, stopBurst := context.WithTimeout(t.Context(), 5*time.Second)
	var burst sync.WaitGroup
	body := fmt.Sprintf(`{"model":"sim/model","prompt":"long","max_tokens":%d,"ignore_eos":true}`, longTokens)
	for range 8 {
		burst.Go(func() {
			for burstCtx.Err() == nil {
				req, err := http.NewRequestWithContext(burstCtx, http.MethodPost, srv.URL+"/v1/completions", bytes.NewBufferString(body))
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				var b bytes.Buffer
				_, _ = b.ReadFrom(resp.Body)
				resp.Body.Close()
			}
		})
	}
	burstStart := time.Now()
	sample("during the burst", 5*time.Second)
	// The burst must have queued the probes, or the test proves nothing:
	// a probe that waited for a batch slot has a TTFT of several times the
	// configured one (a ratio at the scrape's load instead of the probe's
	// would then leave the bounds).
	var queued []time.Duration
	for _, ts := range pm.Status() {
		for _, ms := range ts.Modules {
			for _, r := range ms.History {
				if r.Success && !r.Start.Before(burstStart) && r.TTFT > 3*cfg.TTFT {
					queued = append(queued, r.TTFT)
				}
			}
		}
	}
	if len(queued) == 0 {
		t.Errorf("no probe of the burst waited for a batch slot (TTFT > %s): the burst did not queue the probes", 3*cfg.TTFT)
	} else {
		t.Logf("probes queued by the burst: TTFT %v", queued)
	}
	stopBurst()
	burst.Wait()
	sample("after the burst", 4*time.Second)

	for _, phase := range []string{"before the burst", "during the burst", "after the burst"} {
		if skipped[phase] > 0 {
			t.Logf("%s: %d samples left out: a probe of their window did not see the simulator's schedule (gaps %v, configured ITL %s)",
				phase, skipped[phase], offGaps[phase], cfg.ITL)
		}
		if len(seen[phase]) == 0 && skipped[phase] > 0 {
			t.Skipf("%s: the machine never kept the simulator's schedule; nothing to compare", phase)
		}
		for _, m := range metrics {
			if s := seen[phase][m]; s != nil {
				t.Logf("%s: %s ratio in [%.3f, %.3f]", phase, m, s.lo, s.hi)
			} else {
				t.Errorf("%s: no %s ratio seen", phase, m)
			}
		}
	}
	// The burst did queue the probes: the expectation followed it.
	if s := seen["during the burst"]["ttft"]; s == nil {
		t.Error("no TTFT ratio during the burst")
	}
}

func ratioOf(t *testing.T, reg *prometheus.Registry, metric string) (float64, bool) {
	return gaugeWithLabel(t, reg, "vllm_probe_regression_ratio", "metric", metric)
}

// gaugeWithLabel is the value of the first series of gauge name whose label
// has value.
func gaugeWithLabel(t *testing.T, reg *prometheus.Registry, name, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
