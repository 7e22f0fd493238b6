// Command vsvllm prints the side-by-side figures of docs/performance.md:
// `vllm_prober bench` and vLLM's own benchmark client,
// benchmarks/benchmark_serving.py (v0.7.3), against the same vllm_sim, one
// after the other (the order alternating from round to round), each on a
// fresh simulator in a child process with a trace, at 16, 50, 100 and 200
// concurrent streams (every request sent at once, as with
// `--request-rate inf`). For each run it reports what the client adds:
//
//	added ITL tail = the client's ITL p99 − the p99 of the gaps between the
//	                 server's own successive token writes (its trace)
//	added TTFT     = the client's mean TTFT − the server's mean TTFT (trace
//	                 time of token 1 − when the request reached the handler)
//
// and, per level, the ratio of the two clients' figures.
//
// vLLM's client is never part of this repository. Give either -vllm-git, a
// git directory of vLLM (a clone, or a bare mirror) from which the program
// extracts the three files of -vllm-ref into a temporary directory at run
// time, or -vllm-dir, a directory already holding them. It runs with
// -python; where PyPI is unreachable, -pythonpath names offline stand-ins for
// the packages it imports but does not use with `--dataset-name random`
// (transformers, datasets, huggingface_hub). Without either flag only
// vllm_prober bench runs and the comparison is reported as not measured.
//
//	go run ./perf/vsvllm -vllm-git /path/to/vllm/.git [-pythonpath DIR] [-streams 16,50,100,200] [-rounds 1]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/percentile"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
)

const (
	clientProber = "vllm_prober bench"
	clientVLLM   = "benchmark_serving.py"
	runTimeout   = 10 * time.Minute
)

type config struct {
	tokens, inputLen int
	ttft, itl        time.Duration
	python, pypath   string
	proberBin        string
	vllmDir          string // "" when vLLM's client is not available
	tmp              string
}

func main() {
	perfutil.MaybeRunSimChild()
	streams := flag.String("streams", "16,50,100,200", "comma-separated numbers of concurrent streams (requests sent at once)")
	rounds := flag.Int("rounds", 1, "runs of each client per level, alternating which goes first")
	tokens := flag.Int("tokens", 100, "output tokens per request (ignore_eos)")
	inputLen := flag.Int("input-len", 64, "random prompt length in tokens")
	ttft := flag.Duration("ttft", 50*time.Millisecond, "simulator time to first token")
	itl := flag.Duration("itl", 20*time.Millisecond, "simulator inter-token latency (no batch slowdown)")
	vllmGit := flag.String("vllm-git", "", "git directory of vLLM; the client's files at -vllm-ref are extracted to a temporary directory")
	vllmRef := flag.String("vllm-ref", "v0.7.3", "tag or commit of vLLM whose benchmarks/ client runs")
	vllmDir := flag.String("vllm-dir", "", "directory already holding "+strings.Join(perfutil.VLLMClientFiles, ", ")+" (instead of -vllm-git)")
	python := flag.String("python", "/usr/bin/python3", "Python interpreter with aiohttp, numpy, tqdm, pillow and pandas")
	pypath := flag.String("pythonpath", "", "PYTHONPATH for vLLM's client (e.g. offline stand-ins for transformers, datasets, huggingface_hub)")
	proberBin := flag.String("prober", "", "vllm_prober binary (default: built from this module)")
	flag.Parse()
	if err := run(*streams, *rounds, *vllmGit, *vllmRef, *vllmDir, config{
		tokens: *tokens, inputLen: *inputLen, ttft: *ttft, itl: *itl, python: *python, pypath: *pypath, proberBin: *proberBin,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "vsvllm:", err)
		os.Exit(1)
	}
}

func run(streamList string, rounds int, vllmGit, vllmRef, vllmDir string, cfg config) error {
	levels, err := perfutil.ParseLevels(streamList, "-streams")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "vllm-prober-vsvllm-")
	if err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	cfg.tmp = tmp
	if cfg.proberBin == "" {
		if cfg.proberBin, err = perfutil.BuildProber(tmp); err != nil {
			return err
		}
	}
	switch {
	case vllmDir != "":
		cfg.vllmDir = vllmDir
	case vllmGit != "":
		cfg.vllmDir = filepath.Join(tmp, "vllm-benchmarks")
		if err := perfutil.ExtractVLLMClient(vllmGit, vllmRef, cfg.vllmDir); err != nil {
			return err
		}
	}
	fmt.Print("vLLM client side by side\n", perfutil.Machine())
	fmt.Printf("vllm_sim (child process, trace on): ttft %s, itl %s, batch_slowdown 0, jitter 0; %d output tokens (ignore_eos), %d-token random prompts; every request sent at once\n",
		cfg.ttft, cfg.itl, cfg.tokens, cfg.inputLen)
	if cfg.vllmDir == "" {
		fmt.Println("vLLM's client: not given (-vllm-git or -vllm-dir): its figures are not measured")
	} else {
		fmt.Printf("vLLM's client: %s %s from %s\n", clientVLLM, vllmRef, cfg.vllmDir)
	}
	fmt.Printf("\n%7s %5s %-20s %6s %11s %11s %10s %11s %11s %10s %6s\n", "streams", "round", "client", "done",
		"itl-p99-ms", "srv-gap-p99", "added-itl", "ttft-ms", "srv-ttft-ms", "added-ttft", "load1")
	type sums struct{ itl, ttft []float64 }
	all := map[int]map[string]*sums{}
	for _, n := range levels {
		all[n] = map[string]*sums{clientProber: {}, clientVLLM: {}}
		for r := 0; r < rounds; r++ {
			clients := []string{clientProber, clientVLLM}
			if r%2 == 1 {
				slices.Reverse(clients)
			}
			for _, c := range clients {
				if c == clientVLLM && cfg.vllmDir == "" {
					continue
				}
				res, err := runOne(&cfg, c, n)
				if err != nil {
					return fmt.Errorf("%s at %d streams: %w", c, n, err)
				}
				fmt.Printf("%7d %5d %-20s %6d %11.2f %11.2f %+10.2f %11.1f %11.1f %+10.1f %6.2f\n", n, r+1, c, res.completed,
					res.clientITLp99, res.serverGapP99, res.clientITLp99-res.serverGapP99,
					res.clientTTFT, res.serverTTFT, res.clientTTFT-res.serverTTFT, perfutil.Load1())
				s := all[n][c]
				s.itl = append(s.itl, res.clientITLp99-res.serverGapP99)
				s.ttft = append(s.ttft, res.clientTTFT-res.serverTTFT)
			}
		}
	}
	fmt.Printf("\nper level, median over rounds (ms); ratio = benchmark_serving.py / vllm_prober bench\n")
	fmt.Printf("%7s %14s %14s %8s %14s %14s %8s\n", "streams", "prober-itl", "vllm-itl", "ratio", "prober-ttft", "vllm-ttft", "ratio")
	for _, n := range levels {
		p, v := all[n][clientProber], all[n][clientVLLM]
		pi, pt := perfutil.Median(p.itl), perfutil.Median(p.ttft)
		if len(v.itl) == 0 {
			fmt.Printf("%7d %+14.2f %14s %8s %+14.1f %14s %8s\n", n, pi, "n/a", "n/a", pt, "n/a", "n/a")
			continue
		}
		vi, vt := perfutil.Median(v.itl), perfutil.Median(v.ttft)
		fmt.Printf("%7d %+14.2f %+14.2f %8s %+14.1f %+14.1f %8s\n", n, pi, vi, ratio(vi, pi), pt, vt, ratio(vt, pt))
	}
	return nil
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(a/b, 'f', 1, 64) + "x"
}

type result struct {
	completed                  int
	clientITLp99, serverGapP99 float64 // ms
	clientTTFT, serverTTFT     float64 // ms, means
}

// runOne runs client c with n requests at once against a fresh simulator.
func runOne(cfg *config, c string, n int) (*result, error) {
	dir, err := os.MkdirTemp(cfg.tmp, "run-")
	if err != nil {
		return nil, fmt.Errorf("creating a run directory: %w", err)
	}
	defer os.RemoveAll(dir)
	scfg := simulator.DefaultConfig()
	scfg.TTFT, scfg.ITL, scfg.BatchSlowdown, scfg.Jitter = cfg.ttft, cfg.itl, 0, 0
	scfg.MaxNumSeqs = max(scfg.MaxNumSeqs, n+1)
	scfg.TraceFile = filepath.Join(dir, "trace.jsonl")
	arrivalsFile := filepath.Join(dir, "arrivals.jsonl")
	sim, err := perfutil.StartSimRecordingArrivals(scfg, arrivalsFile)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out := filepath.Join(dir, "out")
	var cmd *exec.Cmd
	if c == clientProber {
		cmd = exec.CommandContext(ctx, cfg.proberBin, "bench", "--url", sim.URL, "--out", out, "--name", "vs",
			"--requests", strconv.Itoa(n), "--request-rate", "inf", "--max-tokens", strconv.Itoa(cfg.tokens), "--ignore-eos",
			"--random-input-len", strconv.Itoa(cfg.inputLen), "--temperature", "0", "--seed", "1",
			"--metric-percentiles", "50,90,99", "--save-detailed")
	} else {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", out, err)
		}
		cmd = exec.CommandContext(ctx, cfg.python, "benchmark_serving.py", "--backend", "vllm", "--base-url", sim.URL,
			"--endpoint", "/v1/completions", "--model", scfg.Model, "--dataset-name", "random",
			"--random-input-len", strconv.Itoa(cfg.inputLen), "--random-output-len", strconv.Itoa(cfg.tokens),
			"--num-prompts", strconv.Itoa(n), "--request-rate", "inf", "--ignore-eos", "--seed", "1",
			"--save-result", "--result-dir", out, "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99")
		cmd.Dir = cfg.vllmDir
		cmd.Env = os.Environ()
		if cfg.pypath != "" {
			cmd.Env = append(cmd.Env, "PYTHONPATH="+cfg.pypath)
		}
	}
	output, runErr := cmd.CombinedOutput()
	stopErr := sim.Stop()
	if runErr != nil {
		return nil, fmt.Errorf("%w\n%s", runErr, perfutil.Tail(output, 20))
	}
	if stopErr != nil {
		return nil, stopErr
	}
	rec, err := readResult(out)
	if err != nil {
		return nil, err
	}
	if rec.Completed != n {
		return nil, fmt.Errorf("%d of %d requests completed", rec.Completed, n)
	}
	srv, err := serverFigures(scfg.TraceFile, arrivalsFile, c == clientVLLM)
	if err != nil {
		return nil, err
	}
	return &result{completed: rec.Completed, clientITLp99: rec.P99ITL, clientTTFT: rec.MeanTTFT,
		serverGapP99: srv.gapP99, serverTTFT: srv.meanTTFT}, nil
}

// serveResult holds the keys both clients' --save-result JSON share.
type serveResult struct {
	Completed int     `json:"completed"`
	MeanTTFT  float64 `json:"mean_ttft_ms"`
	P99ITL    float64 `json:"p99_itl_ms"`
}

// readResult reads the one result JSON in dir (not vLLM's *.pytorch.json companion).
func readResult(dir string) (*serveResult, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("listing results: %w", err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasSuffix(n, ".pytorch.json") })
	if len(names) != 1 {
		return nil, fmt.Errorf("want one result JSON in %s, found %v", dir, names)
	}
	data, err := os.ReadFile(names[0])
	if err != nil {
		return nil, fmt.Errorf("reading the result: %w", err)
	}
	var r serveResult
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", names[0], err)
	}
	return &r, nil
}

type serverResult struct{ gapP99, meanTTFT float64 } // ms

// serverFigures computes, from the simulator's trace and arrivals, the p99 of
// the gaps between successive token writes of each request and the mean
// time from arrival to the first token write. skipFirst leaves out the
// request that arrived first: benchmark_serving.py's test request, sent alone
// before the run.
func serverFigures(tracePath, arrivalsPath string, skipFirst bool) (*serverResult, error) {
	arrivals, err := perfutil.ReadArrivals(arrivalsPath)
	if err != nil {
		return nil, err
	}
	if skipFirst {
		first, at := "", int64(0)
		for id, t := range arrivals {
			if first == "" || t < at {
				first, at = id, t
			}
		}
		delete(arrivals, first)
	}
	tokens := map[string][]int64{}
	err = perfutil.ReadTrace(tracePath, func(e perfutil.TraceEvent) {
		if _, ok := arrivals[e.RequestID]; ok && e.Kind == "token" {
			tokens[e.RequestID] = append(tokens[e.RequestID], e.Time)
		}
	})
	if err != nil {
		return nil, err
	}
	var gaps []float64
	ttft := 0.0
	for id, at := range arrivals {
		ts := tokens[id]
		if len(ts) == 0 {
			return nil, fmt.Errorf("request %s has no token in the trace", id)
		}
		ttft += float64(ts[0]-at) / 1e6
		for i := 1; i < len(ts); i++ {
			gaps = append(gaps, float64(ts[i]-ts[i-1])/1e6)
		}
	}
	slices.Sort(gaps)
	return &serverResult{gapP99: percentile.Linear(gaps, 99), meanTTFT: ttft / float64(len(arrivals))}, nil
}
