// Command footprint prints figure P2 of docs/performance.md: the footprint of
// one vllm_prober with -targets targets (spread over -sims in-process vllm_sim
// servers, each serving many target names), probing every 30 s and scraping
// every 15 s. The daemon runs in a child process (this program re-executed), so
// its CPU seconds per minute, RSS and goroutines are its own; the simulators
// run in this process. After a warm-up of one probe interval (every pair has
// probed once) it samples the child every -sample for -duration and reports
// CPU seconds per minute, peak RSS, goroutines and the time to render /metrics.
//
//	go run ./perf/footprint [-targets 1000] [-duration 2m]
package main

import (
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
	"github.com/vllm-prober/vllm_prober/simulator"
)

func main() {
	perfutil.MaybeRunDaemonChild()
	targets := flag.Int("targets", 1000, "targets")
	sims := flag.Int("sims", 4, "simulators serving the targets")
	duration := flag.Duration("duration", 2*time.Minute, "measurement time after the warm-up")
	warmup := flag.Duration("warmup", 35*time.Second, "warm-up before measuring (one probe interval)")
	sample := flag.Duration("sample", 10*time.Second, "sampling period")
	profileDir := flag.String("profile", "", "when set, write the daemon's CPU (over the measurement), heap and goroutine profiles to this directory")
	memLimit := flag.String("gomemlimit", "", "when set, the daemon child's GOMEMLIMIT (e.g. 128MiB): trades GC CPU for RSS")
	maxProcs := flag.Int("gomaxprocs", 0, "when > 0, the daemon child's GOMAXPROCS")
	flag.Parse()
	var env []string
	if *memLimit != "" {
		env = append(env, "GOMEMLIMIT="+*memLimit)
	}
	if *maxProcs > 0 {
		env = append(env, fmt.Sprintf("GOMAXPROCS=%d", *maxProcs))
	}
	if err := run(*targets, *sims, *duration, *warmup, *sample, *profileDir, env); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
}

func run(targets, sims int, duration, warmup, sample time.Duration, profileDir string, env []string) error {
	if profileDir != "" {
		// Fail now, not after the warm-up.
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			return fmt.Errorf("profile directory: %w", err)
		}
	}
	var urls []string
	for range sims {
		cfg := simulator.DefaultConfig()
		cfg.TTFT, cfg.ITL = 20*time.Millisecond, 5*time.Millisecond
		sim, err := simulator.New(cfg, log.NewNopLogger())
		if err != nil {
			return fmt.Errorf("starting a simulator: %w", err)
		}
		defer sim.Close()
		srv := httptest.NewServer(sim.Handler())
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	var b strings.Builder
	b.WriteString(`global:
  probe_interval: 30s
  scrape_interval: 15s
modules:
  short:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
targets:
`)
	for i := range targets {
		fmt.Fprintf(&b, "  - name: t%04d\n    url: %s\n    model: %s\n", i, urls[i%len(urls)], simulator.DefaultConfig().Model)
	}
	dir, err := os.MkdirTemp("", "vllm-prober-p2-")
	if err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	d, err := perfutil.StartDaemonWith(dir, b.String(), profileDir != "", env...)
	if err != nil {
		return err
	}
	defer d.Stop()

	fmt.Print("P2 footprint\n", perfutil.Machine())
	fmt.Printf("targets=%d over %d simulators, 1 module (max_tokens 64), probe_interval 30s, scrape_interval 15s; warm-up %s, measured %s",
		targets, sims, warmup, duration)
	if len(env) > 0 {
		fmt.Printf("; daemon %s", strings.Join(env, " "))
	}
	fmt.Print("\n\n")
	time.Sleep(warmup)
	p0, err := perfutil.ReadProc(d.Pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	cpuProfile := make(chan error, 1)
	if profileDir != "" {
		go func() {
			secs := max(int(duration.Seconds())-5, 1)
			cpuProfile <- d.Profile("profile", fmt.Sprintf("seconds=%d", secs), filepath.Join(profileDir, "cpu.pprof"))
		}()
	}
	fmt.Printf("%8s %12s %10s %11s %12s %8s\n", "t", "cpu-s/min", "rss-MiB", "goroutines", "render-ms", "load1")
	var renders []float64
	var peakRSS int64
	maxG := 0
	prev, prevT := p0, t0
	for time.Since(t0) < duration {
		time.Sleep(sample)
		p, err := perfutil.ReadProc(d.Pid())
		if err != nil {
			return err
		}
		now := time.Now()
		took, _, g, err := d.Scrape()
		if err != nil {
			return err
		}
		renders = append(renders, float64(took.Microseconds())/1000)
		peakRSS, maxG = max(peakRSS, p.RSS), max(maxG, g)
		fmt.Printf("%8s %12.3f %10.1f %11d %12.1f %8.2f\n", now.Sub(t0).Round(time.Second),
			(p.CPU-prev.CPU).Seconds()/now.Sub(prevT).Minutes(), float64(p.RSS)/(1<<20), g, renders[len(renders)-1], perfutil.Load1())
		prev, prevT = p, now
	}
	if profileDir != "" {
		if err := <-cpuProfile; err != nil {
			return err
		}
		for _, name := range []string{"heap", "goroutine", "allocs"} {
			if err := d.Profile(name, "", filepath.Join(profileDir, name+".pprof")); err != nil {
				return err
			}
		}
		fmt.Printf("profiles written to %s\n", profileDir)
	}
	cpuPerMin := (prev.CPU - p0.CPU).Seconds() / prevT.Sub(t0).Minutes()
	_, size, _, _ := d.Scrape()
	fmt.Printf("\nCPU: %.2f s/min = %.2f%% of one core (target < 5%%)\n", cpuPerMin, cpuPerMin/60*100)
	fmt.Printf("RSS peak: %.1f MiB (target < 128 MiB)\n", float64(peakRSS)/(1<<20))
	fmt.Printf("goroutines max: %d\n", maxG)
	fmt.Printf("/metrics render: median %.1f ms, max %.1f ms over %d scrapes, %d bytes (target < 100 ms)\n",
		perfutil.Median(slices.Clone(renders)), slices.Max(renders), len(renders), size)
	return nil
}
