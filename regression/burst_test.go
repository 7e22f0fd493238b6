package regression

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/bench"
	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/simulator"
)

// TestRegressionRatioBurst is issue 15's burst: on an unchanged server with
// max_num_seqs 4, a burst of 8 clients sending long requests makes the
// probes queue. Comparing the probes of the window with the baseline at the
// load of the scrape gave a TTFT ratio of 0.077 during the burst and 202
// after it. Each probe is now compared at the load it saw when it started,
// so no ratio leaves [0.5, 2] before, during or after the burst.
func TestRegressionRatioBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const longTokens = 100
	cfg := simulator.DefaultConfig()
	cfg.Model = "sim/model"
	cfg.MaxNumSeqs = 4
	cfg.TTFT = 50 * time.Millisecond
	cfg.ITL = 5 * time.Millisecond
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
	var rep *bench.Report
	for _, lv := range []struct{ c, n int }{{1, 3}, {4, 8}, {8, 16}, {12, 24}} {
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
	for _, lv := range rep.Levels {
		t.Logf("baseline %s: TTFT %.3fs TPOT %.4fs", lv.Level, lv.Metrics.TTFT.Mean, lv.Metrics.TPOT.Mean)
	}
	dir := t.TempDir()
	files, err := bench.WriteAll(dir, rep)
	if err != nil {
		t.Fatal(err)
	}

	pcfg, err := config.Load([]byte(fmt.Sprintf(`
global: {probe_interval: 300ms, probe_timeout: 10s, scrape_interval: 100ms, scrape_timeout: 100ms, rate_window: 2s, stall_timeout: 10s}
modules:
  short: {prober: completions, prompt: "hello there", max_tokens: 4, ignore_eos: true}
baselines: [{name: sim, file: %s}]
targets: [{name: sim, url: %q, baseline: sim}]
`, filepath.Join(dir, files.Baseline), srv.URL)), dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	pm := prober.NewManager(reg, nil)
	rc := New(reg, nil, FromProber(pm), nil)
	cm := collector.NewManager(reg, nil, pm, rc)
	rc.SetServer(cm)
	pm.SetLoadSource(cm.Load) // as the daemon wires it
	rc.SetWindow(3 * time.Second)
	for _, apply := range []func(*config.Config) error{pm.Apply, cm.Apply, rc.Apply} {
		if err := apply(pcfg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { pm.Run(ctx) })
	wg.Go(func() { cm.Run(ctx) })
	defer func() {
		cancel()
		wg.Wait()
	}()

	metrics := []string{"ttft", "tpot", "itl", "e2e"}
	type span struct{ lo, hi float64 }
	seen := map[string]map[string]*span{} // phase -> metric -> range
	sample := func(phase string, d time.Duration) {
		if seen[phase] == nil {
			seen[phase] = map[string]*span{}
		}
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(150 * time.Millisecond) {
			for _, m := range metrics {
				r, ok := ratioOf(t, reg, m)
				if !ok || math.IsNaN(r) {
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

	sample("before the burst", 3*time.Second)

	burstCtx, stopBurst := context.WithTimeout(ctx, 6*time.Second)
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
	sample("during the burst", 6*time.Second)
	stopBurst()
	burst.Wait()
	sample("after the burst", 5*time.Second)

	for _, phase := range []string{"before the burst", "during the burst", "after the burst"} {
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
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vllm_probe_regression_ratio" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "metric" && l.GetValue() == metric {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
