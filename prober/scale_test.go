package prober_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// scaleBaseline is a two-point vllm bench serve baseline in vllm_prober's
// baseline format (docs/baselines.md).
const scaleBaseline = `version: 1
baselines:
  - name: b
    model: m
    source: {tool: vllm bench serve, format: vllm-serve-json, files: [a.json]}
    points:
      - {concurrency: 1, request_throughput: 2, output_throughput: 128, ttft_seconds: {mean: 0.125}, tpot_seconds: {mean: 0.015625}, itl_seconds: {mean: 0.015625}, e2e_seconds: {mean: 1}}
      - {concurrency: 5, request_throughput: 4, output_throughput: 384, ttft_seconds: {mean: 0.375}, tpot_seconds: {mean: 0.03125}, itl_seconds: {mean: 0.03125}, e2e_seconds: {mean: 2}}
`

type busyServer struct{}

func (busyServer) Load(string) (float64, float64, bool)               { return 2, 1, true }
func (busyServer) StreamOutputTokensPerSecond(string) (float64, bool) { return 50, true }
func (busyServer) View(string) (collector.View, bool)                 { return collector.View{}, false }

// regressionAllocsPerTarget builds n baselined targets with full histories and
// returns the allocations of one regression collection, per target.
func regressionAllocsPerTarget(t *testing.T, n int) float64 {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(scaleBaseline), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("global: {probe_interval: 15s, rate_window: 1m}\nmodules:\n  m: {prober: completions, prompt: hi, max_tokens: 16}\nbaselines: [{name: b, file: b.yaml}]\ntargets:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: t%04d, url: \"http://127.0.0.1:%d\", model: m, baseline: b}\n", i, 10000+i)
	}
	cfg, err := config.Load([]byte(b.String()), dir)
	if err != nil {
		t.Fatal(err)
	}
	red := redact.New()
	pm := prober.NewManager(prober.Options{Clients: httpclient.New(red), Redactor: red})
	if err := pm.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-30 * time.Second)
	ms := time.Millisecond
	for i := range n {
		for j := range prober.DefaultHistoryLimit {
			pm.RecordForTest(fmt.Sprintf("t%04d", i), "m", probe.Result{
				Start: start.Add(time.Duration(j) * ms), Success: j%5 != 0, Reason: "",
				TTFT: 100 * ms, E2E: 400 * ms, OutputTokens: 16,
				ITLs: []time.Duration{20 * ms, 20 * ms, 20 * ms, 20 * ms, 20 * ms},
			})
		}
	}
	rc := compare.New(compare.Options{Probes: compare.FromProber(pm), Server: busyServer{}})
	if err := rc.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ch := make(chan prometheus.Metric, 64)
	done := make(chan struct{})
	series := 0
	go func() {
		for range ch {
			series++
		}
		close(done)
	}()
	allocs := testing.AllocsPerRun(3, func() { rc.Collect(ch) })
	close(ch)
	<-done
	if series < 4*n {
		t.Fatalf("%d targets gave %d regression series: the fixture is not baselined", n, series)
	}
	return allocs / float64(n)
}

// TestRegressionCollectLinear is the proof that the regression series cost
// O(targets) per scrape: with every target baselined and every history full,
// one collection allocates as much per target at 1,000 targets as at 10. Reading
// the means from a copy of every target's history (Manager.Status, once per
// pair) made it quadratic: ~100× more per target at 1,000.
func TestRegressionCollectLinear(t *testing.T) {
	sizes := []int{10, 100, 1000}
	if testing.Short() {
		sizes = []int{10, 300}
	}
	per := make([]float64, len(sizes))
	for i, n := range sizes {
		per[i] = regressionAllocsPerTarget(t, n)
		t.Logf("%5d targets: %.1f allocations per target", n, per[i])
	}
	for i := 1; i < len(sizes); i++ {
		if per[i] > 1.25*per[0]+2 {
			t.Errorf("allocations per target grow with the fleet: %.1f at %d targets, %.1f at %d", per[0], sizes[0], per[i], sizes[i])
		}
	}
}

// BenchmarkCollectBaselines is one gathering of the prober's and the
// regression collector's series of 1,000 targets of one module, every
// history full (one probe every 3 s of the last minute, load known): without
// baselines; with every target baselined, its joins computed at every
// collection; and with them pushed, computed when a probe is recorded or a
// scrape arrives (compare.Options.Pushed, as the daemon runs it) and read
// by the collection. What is left between none and pushed is the cost of
// the baselined series themselves in client_golang's gathering.
func BenchmarkCollectBaselines(b *testing.B) {
	for _, bc := range []struct {
		name              string
		baselined, pushed bool
	}{{"none", false, false}, {"every-collection", true, false}, {"pushed", true, true}} {
		b.Run("baselines="+bc.name, func(b *testing.B) {
			reg, _ := baselinedFleet(b, 1000, bc.baselined, bc.pushed)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRegressionCollect is the regression collector's part of
// BenchmarkCollectBaselines alone: one collection of 1,000 baselined
// targets, the joins computed at every collection or pushed.
func BenchmarkRegressionCollect(b *testing.B) {
	for _, pushed := range []bool{false, true} {
		b.Run(fmt.Sprintf("pushed=%v", pushed), func(b *testing.B) {
			_, rc := baselinedFleet(b, 1000, true, pushed)
			ch := make(chan prometheus.Metric, 16*1000)
			b.ReportAllocs()
			for b.Loop() {
				rc.Collect(ch)
				for len(ch) > 0 {
					<-ch
				}
			}
		})
	}
}

// baselinedFleet returns a registry of a prober's and a regression
// collector's series of n targets of one module, every history full, and
// the regression collector; baselined gives every target a baseline,
// pushed tells the collector of every probe and scrape as the daemon does.
func baselinedFleet(b *testing.B, n int, baselined, pushed bool) (*prometheus.Registry, *compare.Collector) {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(scaleBaseline), 0o600); err != nil {
		b.Fatal(err)
	}
	var text strings.Builder
	text.WriteString("global: {probe_interval: 15s, rate_window: 1m}\nmodules:\n  m: {prober: completions, prompt: hi, max_tokens: 16}\nbaselines: [{name: b, file: b.yaml}]\ntargets:\n")
	for i := range n {
		fmt.Fprintf(&text, "  - {name: t%04d, url: \"http://127.0.0.1:%d\", model: m", i, 10000+i)
		if baselined {
			text.WriteString(", baseline: b")
		}
		text.WriteString("}\n")
	}
	cfg, err := config.Load([]byte(text.String()), dir)
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	red := redact.New()
	pm := prober.NewManager(prober.Options{Registerer: reg, Clients: httpclient.New(red), Redactor: red})
	if err := pm.Apply(cfg); err != nil {
		b.Fatal(err)
	}
	rc := compare.New(compare.Options{Registerer: reg, Probes: compare.FromProber(pm), Server: busyServer{}, Pushed: pushed})
	if err := rc.Apply(cfg); err != nil {
		b.Fatal(err)
	}
	start := time.Now().Add(-time.Minute)
	ms := time.Millisecond
	for i := range n {
		name := fmt.Sprintf("t%04d", i)
		for j := range prober.DefaultHistoryLimit {
			pm.RecordForTest(name, "m", probe.Result{
				Start: start.Add(time.Duration(j) * 3 * time.Second), Success: j%5 != 0, Load: 3,
				TTFT: 100 * ms, E2E: 400 * ms, OutputTokens: 16,
				ITLs: []time.Duration{20 * ms, 20 * ms, 20 * ms, 20 * ms, 20 * ms},
			})
			rc.ProbeRecorded(name, "m")
		}
		rc.Scraped(name)
	}
	return reg, rc
}
