// Command accuracy prints figure P1 of docs/performance.md: how late the
// prober sees streamed events. It opens -streams concurrent probe streams
// (probe.Stream) against a vllm_sim writing its trace file and, for every
// first-token and inter-token event, takes
//
//	client event time − simulator flush time
//
// where the client event time is Result.Start (wall clock, just before the
// request was sent) plus the event's Offset (monotonic time since Start), i.e.
// the wall-clock moment the prober read the event, and the simulator flush time
// is the trace's time_unix_nano (wall clock right after the event was written
// and flushed). It prints p50, p99 and max per run and their medians over runs.
//
// The simulator runs in a child process (this program, re-executed), as a
// server would: in the same process, the simulator's and the client's
// goroutines share one Go scheduler, and under its load the network poller
// is checked late, which adds milliseconds that are the benchmark's, not the
// prober's (-in-process shows it). With -start spread (the default) stream i
// starts i×itl/streams after the first, as the daemon spreads its probes over
// the interval; -start burst starts them all at once, so that every token of
// all streams is flushed in the same instant and the client works through
// bursts of -streams events.
//
//	go run ./perf/accuracy [-streams 200] [-tokens 100] [-runs 5] [-start spread|burst] [-in-process]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

func main() {
	perfutil.MaybeRunSimChild()
	streams := flag.Int("streams", 200, "concurrent probe streams")
	tokens := flag.Int("tokens", 100, "tokens per stream (at most 120: the timeline keeps 128 events)")
	itl := flag.Duration("itl", 20*time.Millisecond, "simulator inter-token latency")
	ttft := flag.Duration("ttft", 50*time.Millisecond, "simulator time to first token")
	runs := flag.Int("runs", 5, "runs; medians are taken over them")
	start := flag.String("start", "spread", "spread: stream i starts at i*itl/streams, as the daemon spreads its probes; burst: all at once, so every token of every stream is flushed in the same instant")
	inProcess := flag.Bool("in-process", false, "run the simulator in this process (sharing its Go scheduler) instead of a child process")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the client (this process) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "accuracy:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "accuracy:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *start != "spread" && *start != "burst" {
		fmt.Fprintln(os.Stderr, "accuracy: -start must be spread or burst")
		os.Exit(2)
	}
	if *tokens > 120 {
		fmt.Fprintln(os.Stderr, "accuracy: -tokens must be at most 120")
		os.Exit(2)
	}

	fmt.Print("P1 accuracy: client event time - simulator flush time\n", perfutil.Machine())
	where := "a child process"
	if *inProcess {
		where = "this process"
	}
	fmt.Printf("streams=%d tokens=%d ttft=%s itl=%s start=%s (offered %.0f tokens/s), simulator in %s\n\n", *streams, *tokens, *ttft, *itl,
		*start, float64(*streams)/itl.Seconds(), where)
	fmt.Printf("%-4s %10s %10s %10s %10s %10s %10s %8s %8s %8s %6s\n", "run", "first-p50", "first-p99", "first-max",
		"itl-p50", "itl-p99", "itl-max", "events", "client%", "sim%", "load1")
	var cols [6][]float64
	for r := 1; r <= *runs; r++ {
		res, err := run(*streams, *tokens, *ttft, *itl, *start == "spread", *inProcess)
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
		fmt.Printf("%-4d %9.3fms %9.3fms %9.3fms %9.3fms %9.3fms %9.3fms %8d %7.0f%% %7.0f%% %6.2f\n", r, v[0], v[1], v[2], v[3], v[4], v[5],
			len(res.first)+len(res.inter), res.cpu*100, res.simCPU*100, res.load)
	}
	fmt.Printf("%-4s %9.3fms %9.3fms %9.3fms %9.3fms %9.3fms %9.3fms\n", "med",
		perfutil.Median(cols[0]), perfutil.Median(cols[1]), perfutil.Median(cols[2]),
		perfutil.Median(cols[3]), perfutil.Median(cols[4]), perfutil.Median(cols[5]))
	p99 := max(perfutil.Median(cols[1]), perfutil.Median(cols[4]))
	verdict := "MET"
	if p99 > 0.5 {
		verdict = "NOT MET"
	}
	fmt.Printf("target p99 <= 0.5 ms: %s (median p99 %.3f ms)\n", verdict, p99)
	fmt.Println("client% and sim% are CPU seconds per wall second over one core of this process and of the simulator child (with -in-process, client% includes the simulator)")
}

type result struct {
	first, inter []float64 // milliseconds, sorted
	cpu          float64   // CPU seconds per wall second of this process (the client; and the simulator with -in-process)
	simCPU       float64   // the same for the simulator child
	load         float64
}

type traceLine struct {
	RequestID string `json:"request_id"`
	Kind      string `json:"kind"`
	Token     int    `json:"token"`
	Time      int64  `json:"time_unix_nano"`
}

func run(streams, tokens int, ttft, itl time.Duration, spread, inProcess bool) (*result, error) {
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
	sim, err := perfutil.RunSim(cfg, inProcess)
	if err != nil {
		return nil, err
	}
	baseURL, stopSim, simPid := sim.URL, sim.Stop, sim.Pid()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams, MaxConnsPerHost: 0}}

	cpu0, _ := perfutil.ReadProc(0)
	var simCPU0, simCPU1 perfutil.ProcStat
	if simPid != 0 {
		simCPU0, _ = perfutil.ReadProc(simPid)
	}
	wall0 := time.Now()
	results := make([]probe.Result, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			if spread {
				time.Sleep(time.Duration(i) * itl / time.Duration(streams))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			results[i] = probe.Stream(ctx, client, probe.StreamRequest{
				BaseURL: baseURL, Kind: config.ProberCompletions,
				Body:   map[string]any{"model": cfg.Model, "prompt": "Let's explore some architecture patterns for microservices", "max_tokens": tokens, "ignore_eos": true, "temperature": 0},
				Header: http.Header{"X-Request-Id": {fmt.Sprintf("p1-%d", i)}},
			})
		})
	}
	wg.Wait()
	cpu1, _ := perfutil.ReadProc(0)
	if simPid != 0 {
		simCPU1, _ = perfutil.ReadProc(simPid)
	}
	wall := time.Since(wall0)
	if err := stopSim(); err != nil {
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

	res := &result{cpu: (cpu1.CPU - cpu0.CPU).Seconds() / wall.Seconds(), simCPU: (simCPU1.CPU - simCPU0.CPU).Seconds() / wall.Seconds(), load: perfutil.Load1()}
	for i, r := range results {
		if !r.Success {
			return nil, fmt.Errorf("stream %d failed: %s: %s", i, r.Reason, r.Err)
		}
		times := flushed[fmt.Sprintf("p1-%d", i)]
		k := 0
		for _, ev := range r.Events {
			if ev.Kind != probe.EventContent {
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
