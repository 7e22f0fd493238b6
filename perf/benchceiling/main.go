// Command benchceiling prints figure P3 of docs/performance.md: the highest
// streamed tokens/s `vllm_prober bench` (package bench) sustains against a
// vllm_sim while its TTFT error against the simulator's trace stays under 5 ms.
// The simulator runs in a child process (this program, re-executed), as a
// server would; -in-process runs it in the benchmark's own process, where it
// shares bench's Go scheduler (see P1 in docs/performance.md). For each concurrency level it runs bench.Run with -requests
// requests of -tokens tokens and, per request i (X-Request-Id p3-c<N>-i),
// takes
//
//	TTFT error = bench's TTFT − (trace time of token 1 − Result.Start)
//
// i.e. how much later than the simulator's flush bench saw the first token. The
// ceiling is the highest level whose p99 error is under 5 ms.
//
//	go run ./perf/benchceiling [-levels 16,64,128,256,512,1024] [-in-process]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/bench"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
)

func main() {
	perfutil.MaybeRunSimChild()
	levels := flag.String("levels", "16,64,128,256,512,1024", "concurrency levels")
	tokens := flag.Int("tokens", 128, "max_tokens per request (ignore_eos)")
	reqPerConc := flag.Int("requests-per-slot", 3, "requests per level = this × concurrency")
	itl := flag.Duration("itl", 10*time.Millisecond, "simulator inter-token latency")
	inProcess := flag.Bool("in-process", false, "run the simulator in this process instead of a child process")
	flag.Parse()
	var cs []int
	for f := range strings.SplitSeq(*levels, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			fmt.Fprintf(os.Stderr, "benchceiling: bad level %q\n", f)
			os.Exit(2)
		}
		cs = append(cs, c)
	}
	fmt.Print("P3 bench ceiling\n", perfutil.Machine())
	where := "a child process"
	if *inProcess {
		where = "this process"
	}
	fmt.Printf("max_tokens=%d ignore_eos, simulator (in %s) ttft 50ms itl %s batch_slowdown 0; TTFT error = bench TTFT - (trace first token - request start)\n\n", *tokens, where, *itl)
	fmt.Printf("%6s %9s %12s %12s %12s %12s %8s %6s\n", "conc", "requests", "tokens/s", "err-p50-ms", "err-p99-ms", "err-max-ms", "failed", "load1")
	best := 0.0
	for _, c := range cs {
		r, err := level(c, c**reqPerConc, *tokens, *itl, *inProcess)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchceiling:", err)
			os.Exit(1)
		}
		fmt.Printf("%6d %9d %12.0f %12.3f %12.3f %12.3f %8d %6.2f\n", c, c**reqPerConc, r.tps,
			perfutil.Percentile(r.errs, 50), perfutil.Percentile(r.errs, 99), perfutil.Percentile(r.errs, 100), r.failed, perfutil.Load1())
		if perfutil.Percentile(r.errs, 99) < 5 && r.failed == 0 {
			best = max(best, r.tps)
		}
	}
	fmt.Printf("\nceiling: %.0f streamed tokens/s with TTFT error p99 < 5 ms\n", best)
}

type levelResult struct {
	tps    float64
	errs   []float64 // ms, sorted
	failed int
}

func level(conc, requests, tokens int, itl time.Duration, inProcess bool) (*levelResult, error) {
	dir, err := os.MkdirTemp("", "vllm-prober-p3-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	cfg := simulator.DefaultConfig()
	cfg.TTFT, cfg.ITL, cfg.BatchSlowdown, cfg.MaxNumSeqs = 50*time.Millisecond, itl, 0, conc
	cfg.TraceFile = filepath.Join(dir, "trace.jsonl")
	sim, err := perfutil.RunSim(cfg, inProcess)
	if err != nil {
		return nil, err
	}
	rep, err := bench.Run(context.Background(), bench.Options{
		URL: sim.URL, Endpoint: config.ProberCompletions, Requests: requests, Concurrencies: []int{conc},
		MaxTokens: tokens, IgnoreEOS: true, Name: "p3", Seed: 1,
		ReadyTimeout: 10 * time.Second, RequestTimeout: 5 * time.Minute, Logger: log.NewNopLogger(),
	})
	if err != nil {
		return nil, fmt.Errorf("bench at concurrency %d: %w", conc, err)
	}
	if err := sim.Stop(); err != nil {
		return nil, fmt.Errorf("closing the simulator: %w", err)
	}
	first, err := firstTokens(cfg.TraceFile)
	if err != nil {
		return nil, err
	}
	lr := rep.Levels[0]
	out := &levelResult{tps: lr.Metrics.OutputThroughput}
	for i, r := range lr.Results {
		if !r.Success {
			out.failed++
			continue
		}
		id := fmt.Sprintf("p3-%s-%d", lr.Level.Slug(), i)
		t, ok := first[id]
		if !ok {
			return nil, fmt.Errorf("request %s has no first token in the trace", id)
		}
		truth := time.Duration(t - r.Start.UnixNano())
		out.errs = append(out.errs, float64(r.TTFT-truth)/1e6)
	}
	slices.Sort(out.errs)
	return out, nil
}

// firstTokens maps request ids to the trace time of their first token.
func firstTokens(path string) (map[string]int64, error) {
	m := map[string]int64{}
	err := perfutil.ReadTrace(path, func(e perfutil.TraceEvent) {
		if e.Kind == "token" && e.Token == 1 {
			m[e.RequestID] = e.Time
		}
	})
	return m, err
}
