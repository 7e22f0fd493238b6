// Command accuracy prints figure P1 of docs/performance.md: how late the
// prober sees streamed events. It opens -streams concurrent probe streams
// (prober.Stream) against an in-process vllm_sim writing its trace file and,
// for every first-token and inter-token event, takes
//
//	client event time − simulator flush time
//
// where the client event time is Result.Start (wall clock, just before the
// request was sent) plus the event's Offset (monotonic time since Start), i.e.
// the wall-clock moment the prober read the event, and the simulator flush time
// is the trace's time_unix_nano (wall clock right after the event was written
// and flushed). It prints p50, p99 and max per run and their medians over runs.
//
//	go run ./perf/accuracy [-streams 200] [-tokens 100] [-runs 3]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/simulator"
)

func main() {
	streams := flag.Int("streams", 200, "concurrent probe streams")
	tokens := flag.Int("tokens", 100, "tokens per stream (at most 120: the timeline keeps 128 events)")
	itl := flag.Duration("itl", 20*time.Millisecond, "simulator inter-token latency")
	ttft := flag.Duration("ttft", 50*time.Millisecond, "simulator time to first token")
	runs := flag.Int("runs", 3, "runs; medians are taken over them")
	flag.Parse()
	if *tokens > 120 {
		fmt.Fprintln(os.Stderr, "accuracy: -tokens must be at most 120")
		os.Exit(2)
	}

	fmt.Print("P1 accuracy: client event time - simulator flush time\n", perfutil.Machine())
	fmt.Printf("streams=%d tokens=%d ttft=%s itl=%s (offered %.0f tokens/s)\n\n", *streams, *tokens, *ttft, *itl,
		float64(*streams)/itl.Seconds())
	fmt.Printf("%-4s %10s %10s %10s %10s %10s %10s %8s %8s %6s\n", "run", "first-p50", "first-p99", "first-max",
		"itl-p50", "itl-p99", "itl-max", "events", "cpu%", "load1")
	var cols [6][]float64
	for r := 1; r <= *runs; r++ {
		res, err := run(*streams, *tokens, *ttft, *itl)
		if err != nil {
			fmt.Fprintln(os.Stderr, "accuracy:", err)
			os.Exit(1)
		}
		v := []float64{
			perfutil.Percentile(res.first, 50), perfutil.Percentile(res.first, 99), perfutil.Percentile(res.first, 100),
			perfutil.Percentile(res.inter, 50), perfutil.Percentile(res.inter, 99), perfutil.Percentile(res.inter, 100),
		}
		for i := range v {
			cols[i] = append(cols[i], v[i])
		}
		fmt.Printf("%-4d %9.3fms %9.3fms %9.3fms %9.3fms %9.3fms %9.3fms %8d %7.0f%% %6.2f\n", r, v[0], v[1], v[2], v[3], v[4], v[5],
			len(res.first)+len(res.inter), res.cpu*100, res.load)
	}
	fmt.Printf("%-4s %9.3fms %9.3fms %9.3fms %9.3fms %9.3fms %9.3fms\n", "med",
		perfutil.Median(cols[0]), perfutil.Median(cols[1]), perfutil.Median(cols[2]),
		perfutil.Median(cols[3]), perfutil.Median(cols[4]), perfutil.Median(cols[5]))
	p99 := max(perfutil.Median(cols[1]), perfutil.Median(cols[4]))
	verdict := "MET"
	if p99 > 0.5 {
		verdict = "NOT MET"
	}
	fmt.Printf("target p99 <= 0.5 ms: %s (median p99 %.3f ms); cpu%% is this process's CPU per wall second over 1 core (simulator and client share it)\n", verdict, p99)
}

type result struct {
	first, inter []float64 // milliseconds, sorted
	cpu          float64   // CPU seconds per wall second of the process
	load         float64
}

type traceLine struct {
	RequestID string `json:"request_id"`
	Kind      string `json:"kind"`
	Token     int    `json:"token"`
	Time      int64  `json:"time_unix_nano"`
}

func run(streams, tokens int, ttft, itl time.Duration) (*result, error) {
	dir, err := os.MkdirTemp("", "vllm-prober-p1-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	trace := filepath.Join(dir, "trace.jsonl")

	cfg := simulator.DefaultConfig()
	cfg.TTFT, cfg.ITL, cfg.BatchSlowdown = ttft, itl, 0
	cfg.MaxNumSeqs = streams
	cfg.TraceFile = trace
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		return nil, fmt.Errorf("starting the simulator: %w", err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams, MaxConnsPerHost: 0}}

	cpu0, _ := perfutil.ReadProc(0)
	wall0 := time.Now()
	results := make([]prober.Result, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			results[i] = prober.Stream(ctx, client, prober.StreamRequest{
				BaseURL: srv.URL, Kind: config.ProberCompletions,
				Body:   map[string]any{"model": cfg.Model, "prompt": "Let's explore some architecture patterns for microservices", "max_tokens": tokens, "ignore_eos": true, "temperature": 0},
				Header: http.Header{"X-Request-Id": {fmt.Sprintf("p1-%d", i)}},
			})
		})
	}
	wg.Wait()
	cpu1, _ := perfutil.ReadProc(0)
	wall := time.Since(wall0)
	if err := sim.Close(); err != nil {
		return nil, fmt.Errorf("closing the simulator (flushing the trace): %w", err)
	}

	flushed := map[string]map[int]int64{} // request id -> token -> time
	f, err := os.Open(trace)
	if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l traceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("parsing the trace: %w", err)
		}
		if l.Kind != "token" {
			continue
		}
		if flushed[l.RequestID] == nil {
			flushed[l.RequestID] = map[int]int64{}
		}
		flushed[l.RequestID][l.Token] = l.Time
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}

	res := &result{cpu: (cpu1.CPU - cpu0.CPU).Seconds() / wall.Seconds(), load: perfutil.Load1()}
	for i, r := range results {
		if !r.Success {
			return nil, fmt.Errorf("stream %d failed: %s: %s", i, r.Reason, r.Err)
		}
		times := flushed[fmt.Sprintf("p1-%d", i)]
		k := 0
		for _, ev := range r.Events {
			if ev.Kind != prober.EventContent {
				continue
			}
			k++
			sim, ok := times[k]
			if !ok {
				return nil, fmt.Errorf("stream %d: token %d is not in the trace", i, k)
			}
			d := float64(r.Start.Add(ev.Offset).UnixNano()-sim) / 1e6
			if k == 1 {
				res.first = append(res.first, d)
			} else {
				res.inter = append(res.inter, d)
			}
		}
		if k != tokens {
			return nil, fmt.Errorf("stream %d: %d content events in the timeline, want %d", i, k, tokens)
		}
	}
	slices.Sort(res.first)
	slices.Sort(res.inter)
	return res, nil
}
