package main

// With -floor the program measures, instead of the daemon, the least any Go
// client spends on the same network exchanges: a child process that, for
// each target, every 30 s streams the probe's completion (64 tokens, each
// event read and timestamped as it arrives, none decoded), every 5 min reads
// /v1/models (the default models_refresh_interval) and every 15 s reads
// /metrics whole, decoding nothing. It reads no /health: the daemon reads
// none for a scraped target whose scrapes and probes succeed (its health
// folds into the scrape), and every target here is one. It keeps no series and renders no /metrics. The daemon's CPU
// per target less the floor's is what parsing, the series, the joins and
// the exposition cost.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
)

// floorEnv holds the floor child's floorSpec, as JSON.
const floorEnv = "VLLM_PROBER_PERF_FLOOR"

type floorSpec struct {
	URLs    []string
	Targets int
	Model   string
	// Distinct: every target has a host:port and a connection pool of its
	// own, as the daemon holds one per target host.
	Distinct bool
}

// maybeRunFloorChild runs the floor client and exits when this process was
// started as the floor child; otherwise it returns at once.
func maybeRunFloorChild() {
	raw := os.Getenv(floorEnv)
	if raw == "" {
		return
	}
	var spec floorSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "floor child:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// As prometheus/common's clients: many idle connections, no compression.
	newClient := func() *http.Client {
		return &http.Client{Transport: &http.Transport{
			MaxIdleConns: 20000, MaxIdleConnsPerHost: 1000, DisableCompression: true, IdleConnTimeout: 5 * time.Minute,
		}}
	}
	shared := newClient()
	targetURL := targetURLs(spec.URLs, spec.Distinct)
	var streams, tokens, scrapes, failures atomic.Int64
	body, _ := json.Marshal(map[string]any{
		"model": spec.Model, "prompt": "Let's explore some architecture patterns for microservices",
		"max_tokens": 64, "stream": true, "stream_options": map[string]bool{"include_usage": true},
	})
	var wg sync.WaitGroup
	for i := range spec.Targets {
		base, client := targetURL(i), shared
		if spec.Distinct {
			client = newClient()
		}
		// Spread over the interval, as the daemon spreads its targets.
		offset := time.Duration(i) * 15 * time.Second / time.Duration(spec.Targets)
		wg.Go(func() {
			t := time.NewTimer(offset)
			defer t.Stop()
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				t.Reset(15 * time.Second)
				if err := floorGet(ctx, client, base+"/metrics"); err != nil {
					failures.Add(1)
				}
				scrapes.Add(1)
				if n%2 != 0 {
					continue
				}
				if n%20 == 0 { // every 5 min: models_refresh_interval's default
					if err := floorGet(ctx, client, base+"/v1/models"); err != nil {
						failures.Add(1)
					}
				}
				k, err := floorStream(ctx, client, base+"/v1/completions", body)
				if err != nil {
					failures.Add(1)
				}
				streams.Add(1)
				tokens.Add(int64(k))
			}
		})
	}
	wg.Wait()
	fmt.Printf("floor child: %d streams, %d events, %d scrapes, %d failures\n", streams.Load(), tokens.Load(), scrapes.Load(), failures.Load())
	os.Exit(0)
}

func floorGet(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return err
}

// floorStream streams one completion and returns how many events it read,
// each line read as it arrives and given the time it did, as a prober must
// to measure the gaps between tokens.
func floorStream(ctx context.Context, client *http.Client, url string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 4<<10)
	events := 0
	var prev time.Time
	var maxGap time.Duration
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return events, err
		}
		if bytes.HasPrefix(line, []byte("data: ")) {
			events++
			now := time.Now()
			if !prev.IsZero() {
				maxGap = max(maxGap, now.Sub(prev))
			}
			prev = now
			if bytes.HasPrefix(line, []byte("data: [DONE]")) {
				return events, nil
			}
		}
	}
}

// floorRun starts the simulators and the floor child, waits warmup, and
// prints the child's CPU and peak RSS per target over duration.
func floorRun(targets, sims int, distinct bool, duration, warmup, sample time.Duration) error {
	if distinct {
		sims = 1
	}
	urls, stop, err := startSims(sims, distinct)
	if err != nil {
		return err
	}
	defer stop()
	raw, err := json.Marshal(floorSpec{URLs: urls, Targets: targets, Model: simulator.DefaultConfig().Model, Distinct: distinct})
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), floorEnv+"="+string(raw))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the floor child: %w", err)
	}
	stopped := false
	stopChild := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	defer stopChild()
	fmt.Print("P2 floor: the network exchanges alone\n", perfutil.Machine())
	hosts := fmt.Sprintf("%d simulators, one connection pool", sims)
	if distinct {
		hosts = fmt.Sprintf("%d distinct host:ports, a connection pool each", targets)
	}
	fmt.Printf("targets=%d over %s: every 30 s a 64-token stream, every 15 s /metrics, every 5 min /v1/models; warm-up %s, measured %s\n\n",
		targets, hosts, warmup, duration)
	time.Sleep(warmup)
	pid := cmd.Process.Pid
	p0, err := perfutil.ReadProc(pid)
	if err != nil {
		return err
	}
	t0, prev, prevT := time.Now(), p0, time.Now()
	peak := p0.RSS
	fmt.Printf("%8s %12s %10s %8s\n", "t", "cpu-s/min", "rss-MiB", "load1")
	for time.Since(t0) < duration {
		time.Sleep(sample)
		p, err := perfutil.ReadProc(pid)
		if err != nil {
			return err
		}
		now := time.Now()
		peak = max(peak, p.RSS)
		fmt.Printf("%8s %12.3f %10.1f %8.2f\n", now.Sub(t0).Round(time.Second),
			(p.CPU-prev.CPU).Seconds()/now.Sub(prevT).Minutes(), float64(p.RSS)/(1<<20), perfutil.Load1())
		prev, prevT = p, now
	}
	cpu := (prev.CPU - p0.CPU).Seconds() / prevT.Sub(t0).Minutes()
	fmt.Printf("\nper target (%d targets): CPU %.2f ms/min, RSS peak %.1f KiB; sockets %d\n", targets,
		cpu*1000/float64(targets), float64(peak)/1024/float64(targets), sockets(pid))
	stopChild()
	fmt.Print(out.String())
	return nil
}
