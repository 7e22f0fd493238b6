package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
)

// footprintBaseline is a two-point vllm bench serve baseline in vllm_prober's
// baseline format (docs/baselines.md): every target is compared with it.
const footprintBaseline = `version: 1
baselines:
  - name: sim
    model: %s
    source: {tool: vllm bench serve, format: vllm-serve-json, files: [sim.json]}
    points:
      - {concurrency: 1, request_throughput: 2, output_throughput: 128, ttft_seconds: {mean: 0.02}, tpot_seconds: {mean: 0.005}, itl_seconds: {mean: 0.005}, e2e_seconds: {mean: 0.04}}
      - {concurrency: 8, request_throughput: 8, output_throughput: 512, ttft_seconds: {mean: 0.06}, tpot_seconds: {mean: 0.01}, itl_seconds: {mean: 0.01}, e2e_seconds: {mean: 0.1}}
`

// baselineRun measures the /metrics render with every target baselined
// against the same daemon without baselines, at each fleet size, in one run:
// for each size, the two daemons run side by side (so that they share the
// machine's load alike) and probe until every pair's history is full
// (history+1 probe intervals), then their /metrics are timed alternately,
// samples times each, one second apart, the two taking turns going first.
// The probe interval grows with the fleet (size/rate, at least minInterval)
// so that the probe rate, and with it the load on a shared machine, stays
// the same at every size. The regression series read the prober's per-pair
// statistics: the render with baselines must stay within 1.25× the render
// without.
func baselineRun(sizes []int, sims int, minInterval time.Duration, rate float64, history, samples int) error {
	urls, stop, err := startSims(sims, false)
	if err != nil {
		return err
	}
	defer stop()
	dir, err := os.MkdirTemp("", "vllm-prober-p2b-")
	if err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	model := simulator.DefaultConfig().Model
	if err := os.WriteFile(filepath.Join(dir, "sim.yaml"), fmt.Appendf(nil, footprintBaseline, model), 0o600); err != nil {
		return fmt.Errorf("writing the baseline: %w", err)
	}

	fmt.Print("P2 /metrics render with and without baselines\n", perfutil.Machine())
	fmt.Printf("1 module (max_tokens 2), probe_interval max(%s, targets/%g per s), scrape_interval 30s, --history.limit %d, %d simulators; "+
		"per size the two daemons run side by side, warm up history+1 probe intervals (histories full), "+
		"then each /metrics is timed %d times, the two taking turns going first, 1 s before each render\n\n", minInterval, rate, history, sims, samples)
	fmt.Printf("%8s %9s %24s %24s %7s\n", "targets", "interval", "render-ms no baselines", "render-ms baselines", "ratio")
	failed := false
	for _, n := range sizes {
		interval := max(minInterval, time.Duration(float64(n)/rate*float64(time.Second)).Round(time.Second))
		var ds [2]*perfutil.Daemon
		for i, baselined := range []bool{false, true} {
			var b strings.Builder
			fmt.Fprintf(&b, "global: {probe_interval: %s, scrape_interval: 30s, max_concurrent_probes: 1000}\n", interval)
			b.WriteString("modules:\n  short: {prober: completions, prompt: \"Let's explore\", max_tokens: 2}\n")
			if baselined {
				b.WriteString("baselines: [{name: sim, file: " + filepath.Join(dir, "sim.yaml") + "}]\n")
			}
			b.WriteString("targets:\n")
			for j := range n {
				fmt.Fprintf(&b, "  - {name: t%04d, url: %q, model: %s", j, urls[j%len(urls)], model)
				if baselined {
					b.WriteString(", baseline: sim")
				}
				b.WriteString("}\n")
			}
			rdir := filepath.Join(dir, fmt.Sprintf("%d-%v", n, baselined))
			if err := os.Mkdir(rdir, 0o700); err != nil {
				return fmt.Errorf("creating a temporary directory: %w", err)
			}
			d, err := perfutil.StartDaemonWith(rdir, b.String(), false, perfutil.HistoryEnv+"="+strconv.Itoa(history))
			if err != nil {
				return err
			}
			ds[i] = d
			defer func() {
				if ds[i] != nil { // not stopped below
					_ = ds[i].Stop()
				}
			}()
		}
		time.Sleep(time.Duration(history+1)*interval + 5*time.Second)
		var renders [2][]float64
		var size [2]int
		for k := range samples {
			// The daemons take turns going first, and each render follows a
			// second's pause: a render leaves its daemon a garbage
			// collection to run, and on a small machine the render timed
			// right after it shares the cores with it. In a fixed order the
			// daemon timed second (the baselined one) paid for the first
			// one's collection at every sample, although CPU profiles of
			// both show the same CPU per render.
			for j := range ds {
				i := (j + k) % len(ds)
				took, sz, _, err := ds[i].Scrape()
				if err != nil {
					return err
				}
				renders[i] = append(renders[i], float64(took.Microseconds())/1000)
				size[i] = sz
				time.Sleep(time.Second)
			}
		}
		for i, d := range ds {
			ds[i] = nil
			if err := d.Stop(); err != nil {
				return err
			}
		}
		med := [2]float64{perfutil.Median(slices.Clone(renders[0])), perfutil.Median(slices.Clone(renders[1]))}
		ratio := med[1] / med[0]
		verdict := "ok"
		if ratio > 1.25 {
			verdict, failed = "FAIL (> 1.25×)", true
		}
		fmt.Printf("%8d %9s %13.1f (%5d KiB) %13.1f (%5d KiB) %7.2f %s\n", n, interval, med[0], size[0]>>10, med[1], size[1]>>10, ratio, verdict)
	}
	if failed {
		return fmt.Errorf("the render with baselines exceeds 1.25× the render without")
	}
	return nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sizes: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
