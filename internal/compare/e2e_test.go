package compare

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/bench"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestBenchBaselineRegression is the end-to-end check: bench the
// simulator into a baseline file, run the real prober and collector managers
// against the unchanged simulator (TPOT ratio near 1), then raise the
// simulator's itl 30 % through /admin/config (TPOT ratio at least 1.25).
func TestBenchBaselineRegression(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Model = "sim/model"
	cfg.TTFT = 50 * time.Millisecond
	cfg.ITL = 40 * time.Millisecond
	cfg.BatchSlowdown = 0 // every load level has the same TPOT, whatever load the scrape sees
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	defer sim.Close()

	// A baseline benchmarked while the machine was too busy for the
	// simulator to keep its schedule is not a baseline: bench again (3 tries).
	dir := t.TempDir()
	var rep *bench.Report
	for try := 1; ; try++ {
		rep, err = bench.Run(context.Background(), bench.Options{URL: srv.URL, Requests: 4, Concurrencies: []int{1, 2},
			MaxTokens: 12, IgnoreEOS: true, Name: "simbase", PollInterval: 250 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		sane := true
		for _, lr := range rep.Levels {
			if tp := lr.Metrics.TPOT.Mean; tp < 0.036 || tp > 0.044 {
				sane = false
				t.Logf("bench try %d: %s TPOT %.4fs, configured 0.040s: busy machine", try, lr.Level, tp)
			}
		}
		if sane || try == 3 {
			break
		}
	}
	files, err := bench.WriteAll(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	loTPOT, hiTPOT := rep.Levels[0].Metrics.TPOT.Mean, rep.Levels[1].Metrics.TPOT.Mean
	if loTPOT > hiTPOT {
		loTPOT, hiTPOT = hiTPOT, loTPOT
	}

	pcfg, err := config.Load([]byte(fmt.Sprintf(`
global: {probe_interval: 400ms, scrape_interval: 200ms, scrape_timeout: 150ms, rate_window: 2s, stall_timeout: 5s}
modules:
  tpot: {prober: completions, prompt: "hello there", max_tokens: 12, ignore_eos: true}
baselines: [{name: sim, file: %s}]
targets: [{name: sim, url: %q, baseline: sim, labels: {preset: test}}]
`, filepath.Join(dir, files.Baseline), srv.URL)), dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := startStack(t, pcfg, 5*time.Second, 3*time.Second)

	ratio := func(metric string) (float64, bool) { return ratioOf(t, reg, metric) }
	// eventually waits for the metric's ratio to satisfy ok; the ratios seen
	// are reported on failure.
	eventually := func(what, metric string, ok func(float64) bool) float64 {
		t.Helper()
		var seen []float64
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if r, found := ratio(metric); found {
				seen = append(seen, r)
				if ok(r) {
					return r
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s: %s regression ratio never got there; seen %v", what, metric, seen)
		return 0
	}
	r := eventually("unchanged simulator", "tpot", func(r float64) bool { return r >= 0.9 && r <= 1.1 })
	t.Logf("unchanged simulator: TPOT ratio %.3f", r)
	// The probes run alone on the simulator, far below the benchmark's load:
	// neither throughput (compared per stream) nor E2E (scaled to the
	// probes' length) may call that a regression.
	near1 := func(r float64) bool { return r >= 0.8 && r <= 1.2 }
	r = eventually("unchanged simulator", "output_throughput", near1)
	t.Logf("unchanged simulator: output_throughput ratio %.3f", r)
	r = eventually("unchanged simulator", "e2e", near1)
	t.Logf("unchanged simulator: e2e ratio %.3f", r)

	// The expected TPOT is interpolated between the benchmark's levels.
	var buf bytes.Buffer
	if n, err := gatherValue(reg, "vllm_probe_expected_time_per_output_token_seconds"); err != nil || n < loTPOT || n > hiTPOT {
		t.Errorf("expected TPOT %v (%v), want within the bench's [%v, %v]", n, err, loTPOT, hiTPOT)
	}

	resp, err := http.Post(srv.URL+"/admin/config", "application/json", bytes.NewBufferString(`{"itl":"52ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /admin/config: %d %s", resp.StatusCode, buf.String())
	}
	r = eventually("itl raised 30 %", "tpot", func(r float64) bool { return r >= 1.25 })
	t.Logf("itl raised 30 %%: TPOT ratio %.3f", r)
	// 50ms + 11 × 52ms against 50ms + 11 × 40ms per request: about 1.27.
	r = eventually("itl raised 30 %", "output_throughput", func(r float64) bool { return r >= 1.15 })
	t.Logf("itl raised 30 %%: output_throughput ratio %.3f", r)
}

func gatherValue(reg *prometheus.Registry, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no %s series", name)
}
