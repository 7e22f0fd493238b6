// Command soak runs one vllm_prober daemon (a child process: this program
// re-executed) against in-process vllm_sim servers for -duration (30 min by
// default) while the simulator faults cycle through /admin/config, samples the
// daemon's RSS and goroutines every -sample (a minute), prints a table and a
// verdict. Samples are taken in the healthy gaps only, at least 6 s (the probe
// timeout plus a second) after a fault was cleared, so that probes a fault left
// in flight are not counted as growth. Both stayed flat when the last third of the samples is no higher
// than the first third's maximum plus the slack (-rss-slack, -goroutine-slack).
//
//	go run ./perf/soak [-duration 30m] [-sample 1m]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
)

// faults cycle on the faulty simulator, each for one fault period, with a
// healthy period after each.
var faults = []string{
	`{"fault":"http_status","fault_status":500}`,
	`{"fault":"http_status","fault_status":429}`,
	`{"fault":"hang_before_headers"}`,
	`{"fault":"stall","fault_after":2}`,
	`{"fault":"cut_stream","fault_after":2}`,
	`{"fault":"malformed_chunk","fault_after":2}`,
	`{"fault":"error_event","fault_after":2}`,
	`{"fault":"huge_line","fault_after":2}`,
	`{"fault":"engine_dead"}`,
	`{"fault":"slow_metrics","fault_delay":"20s"}`,
	`{"fault":"metrics_reset"}`,
}

func main() {
	perfutil.MaybeRunDaemonChild()
	duration := flag.Duration("duration", 30*time.Minute, "soak time")
	sample := flag.Duration("sample", time.Minute, "sampling period")
	faultPeriod := flag.Duration("fault-period", 20*time.Second, "how long each fault (and each healthy gap) lasts")
	rssSlack := flag.Float64("rss-slack", 8, "allowed RSS growth, MiB")
	gSlack := flag.Int("goroutine-slack", 10, "allowed goroutine growth")
	targets := flag.Int("targets", 20, "targets (half on the faulty simulator)")
	flag.Parse()
	if *faultPeriod < 8*time.Second {
		fmt.Fprintln(os.Stderr, "soak: -fault-period must be at least 8s (samples wait 6s into a healthy gap)")
		os.Exit(2)
	}
	if err := run(*duration, *sample, *faultPeriod, *rssSlack, *gSlack, *targets); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(duration, sample, faultPeriod time.Duration, rssSlack float64, gSlack, targets int) error {
	var urls []string
	for range 2 {
		cfg := simulator.DefaultConfig()
		cfg.TTFT, cfg.ITL = 20*time.Millisecond, 5*time.Millisecond
		cfg.HugeLineBytes = 2 << 20
		sim, err := simulator.New(cfg, log.NewNopLogger())
		if err != nil {
			return fmt.Errorf("starting a simulator: %w", err)
		}
		defer sim.Close()
		srv := httptest.NewServer(sim.Handler())
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	faulty := urls[1]
	var b strings.Builder
	b.WriteString(`global:
  probe_interval: 2s
  stall_timeout: 1s
  scrape_interval: 2s
  scrape_timeout: 1s
modules:
  short:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
    max_tokens: 16
targets:
`)
	for i := range targets {
		fmt.Fprintf(&b, "  - name: t%02d\n    url: %s\n    model: %s\n", i, urls[i%2], simulator.DefaultConfig().Model)
	}
	dir, err := os.MkdirTemp("", "vllm-prober-soak-")
	if err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	d, err := perfutil.StartDaemon(dir, b.String())
	if err != nil {
		return err
	}
	defer d.Stop()
	fmt.Print("Soak\n", perfutil.Machine())
	fmt.Printf("%d targets (half on %s, whose faults cycle every %s: %d faults), probe and scrape every 2s, %s, sample every %s\n\n",
		targets, faulty, faultPeriod, len(faults), duration, sample)

	setFault := func(body string) error {
		resp, err := http.Post(faulty+"/admin/config", "application/json", bytes.NewBufferString(body))
		if err != nil {
			return fmt.Errorf("setting fault %s: %w", body, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("setting fault %s: HTTP %d", body, resp.StatusCode)
		}
		return nil
	}

	start := time.Now()
	nextSample := start
	nextFault, fi, on := start, 0, false
	cleared := start
	var rss []float64
	var gs []int
	fmt.Printf("%8s %10s %11s %8s  %s\n", "t", "rss-MiB", "goroutines", "load1", "last fault")
	current := "none"
	for time.Since(start) <= duration {
		now := time.Now()
		if !now.Before(nextFault) {
			if on {
				if err := setFault(`{"fault":""}`); err != nil {
					return err
				}
				cleared = now
			} else {
				if err := setFault(faults[fi%len(faults)]); err != nil {
					return err
				}
				current = faults[fi%len(faults)]
				fi++
			}
			on = !on
			nextFault = now.Add(faultPeriod)
		}
		if !now.Before(nextSample) && !on && now.Sub(cleared) >= 6*time.Second {
			p, err := perfutil.ReadProc(d.Pid())
			if err != nil {
				return err
			}
			_, _, g, err := d.Scrape()
			if err != nil {
				return err
			}
			rss = append(rss, float64(p.RSS)/(1<<20))
			gs = append(gs, g)
			fmt.Printf("%8s %10.1f %11d %8.2f  %s\n", now.Sub(start).Round(time.Second), rss[len(rss)-1], g, perfutil.Load1(), current)
			nextSample = now.Add(sample)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := setFault(`{"fault":""}`); err != nil {
		return err
	}
	if len(rss) < 3 {
		return fmt.Errorf("only %d samples: run longer than 2 sample periods", len(rss))
	}
	third := len(rss) / 3
	rssFirst, rssLast := slices.Max(rss[:third]), slices.Max(rss[len(rss)-third:])
	gFirst, gLast := slices.Max(gs[:third]), slices.Max(gs[len(gs)-third:])
	flat := rssLast <= rssFirst+rssSlack && gLast <= gFirst+gSlack
	fmt.Printf("\nfirst third max: RSS %.1f MiB, %d goroutines; last third max: RSS %.1f MiB, %d goroutines\n", rssFirst, gFirst, rssLast, gLast)
	if flat {
		fmt.Printf("verdict: FLAT (growth within %.0f MiB and %d goroutines)\n", rssSlack, gSlack)
		return nil
	}
	fmt.Printf("verdict: GROWING (allowed %.0f MiB and %d goroutines)\n", rssSlack, gSlack)
	return fmt.Errorf("RSS or goroutines grew")
}
