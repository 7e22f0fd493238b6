// Command ttfterror measures how much a benchmark client's TTFT is wrong, the
// honest way, side by side with vLLM's own client: `vllm_prober bench` and
// vLLM's benchmarks/benchmark_serving.py (v0.7.3) run against the same
// vllm_sim, one after the other (the order alternating from round to round),
// each run a fresh client process on a fresh simulator child with a trace.
//
// Every request carries an X-Request-Id (bench sets it; vLLM's client gets
// one from a small runner this program writes next to vLLM's files, which
// adds the header and records each request's id and TTFT). Each request of
// each client is matched by that id to the simulator's own record of it: when
// its HTTP server handed the request over (arrival) and when it wrote the
// first token. The error of one request is
//
//	client TTFT − (server's first token write − server's arrival)
//
// what the client adds to the server's own time to first token: connection
// set-up, scheduling, parsing, a garbage collection at the wrong moment. Per
// concurrency level C (C streams, -waves×C requests, so the first wave is
// C requests of a cold process) it prints the p50, p99 and maximum of the
// error over all requests, the p99 of the first wave (the first C requests
// sent) and of the later ones, and the streamed tokens/s of the run (token
// writes of the trace over the span from the first arrival to the last
// write). The summary gives, per level, the median over rounds of the error
// p99 of each client and their ratio, and, per client, the highest streamed
// tokens/s at which its error p99 stayed within -within.
//
// Each row also splits the error p99 into its way out (send-p99: how much
// later than its send time a request arrived, beyond the least such delay of
// the run, since the client's clock and the simulator's share no origin) and
// its way back (recv-p99: the rest), and gives the first wave's send spread
// (w1-spread: its first to its last send), for the clients that record send
// times.
//
// A third client, the floor (floor.go), is no benchmark client but the
// measuring stick: raw sockets, warmed, requests serialised beforehand. What
// it adds is what the machine's cores and the simulator add to any client
// taking C requests in at once; a client can only come near it.
//
// vLLM's client is never part of this repository: -vllm-git names a git
// directory of vLLM from which the files are extracted into a temporary
// directory at run time, or -vllm-dir one already holding them; -pythonpath
// gives offline stand-ins for transformers, datasets and huggingface_hub.
// Without either only vllm_prober bench runs. -prober runs another build of
// vllm_prober (an earlier commit's, for a before/after comparison).
//
//	go run ./perf/ttfterror -vllm-git /path/to/vllm.git -pythonpath DIR [-levels 16,64,128,256] [-rounds 1] [-clients prober,vllm,floor]
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
)

const (
	clientProber = "vllm_prober bench"
	clientVLLM   = "benchmark_serving.py"
	runTimeout   = 10 * time.Minute
	benchName    = "ttfterr"
)

type config struct {
	perfutil.SideBySide
	waves      int
	proberArgs []string
	simEnv     []string // added to the simulator child's environment
}

func main() {
	perfutil.MaybeRunSimChild()
	levels := flag.String("levels", "16,64,128,256", "comma-separated concurrency levels (streams)")
	rounds := flag.Int("rounds", 1, "runs of each client per level, alternating which goes first")
	waves := flag.Int("waves", 3, "requests per run = waves × concurrency")
	sf := perfutil.RegisterSideBySideFlags()
	within := flag.Float64("within", 5, "error p99 (ms) a client must stay within for the summary's tokens/s figure")
	proberArgs := flag.String("prober-args", "", "extra arguments for vllm_prober bench, space-separated (e.g. --no-warmup)")
	simEnv := flag.String("sim-env", "", "variables added to the simulator child's environment, space-separated (e.g. \"GOGC=off GOMEMLIMIT=2GiB\": its own collections then delay no arrival)")
	only := flag.String("clients", "prober,vllm,floor", "which clients run, comma-separated: prober (vllm_prober bench), vllm (benchmark_serving.py, when given), floor (raw sockets, the least any client adds here); both = prober,vllm")
	flag.Parse()
	cfg := config{waves: *waves, proberArgs: strings.Fields(*proberArgs), simEnv: strings.Fields(*simEnv)}
	if err := run(*levels, *rounds, *within, *only, sf, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "ttfterror:", err)
		os.Exit(1)
	}
}

func run(levelList string, rounds int, within float64, only string, sf *perfutil.SideBySideFlags, cfg config) error {
	levels, err := perfutil.ParseLevels(levelList, "-levels")
	if err != nil {
		return err
	}
	if cfg.waves < 1 {
		return fmt.Errorf("-waves %d: want at least 1", cfg.waves)
	}
	if cfg.SideBySide, err = sf.Open("vllm-prober-ttfterror-", true); err != nil {
		return err
	}
	defer cfg.Close()
	if cfg.VLLMDir != "" {
		if err := os.WriteFile(filepath.Join(cfg.VLLMDir, "ttfterror_runner.py"), []byte(runnerPy), 0o644); err != nil {
			return fmt.Errorf("writing the runner: %w", err)
		}
	}
	clients, err := pickClients(only, cfg.VLLMDir != "")
	if err != nil {
		return err
	}
	fmt.Print("TTFT error side by side (client TTFT − server arrival-to-first-token, per request, matched by X-Request-Id)\n", perfutil.Machine())
	fmt.Printf("vllm_sim (fresh child process per run, trace on): ttft %s, itl %s, batch_slowdown 0, jitter 0; %d output tokens (ignore_eos), %d-token random prompts; %d×C requests at concurrency C; a fresh client process per run\n",
		cfg.TTFT, cfg.ITL, cfg.Tokens, cfg.InputLen, cfg.waves)
	fmt.Printf("vllm_prober: %s %s\n", cfg.ProberBin, strings.Join(cfg.proberArgs, " "))
	if len(cfg.simEnv) > 0 {
		fmt.Printf("simulator child's environment adds: %s\n", strings.Join(cfg.simEnv, " "))
	}
	if cfg.VLLMDir == "" {
		fmt.Println("vLLM's client: not given (-vllm-git or -vllm-dir): its figures are not measured")
	} else {
		fmt.Printf("vLLM's client: %s %s\n", clientVLLM, *sf.VLLMRef)
	}
	fmt.Printf("\n%6s %5s %-20s %5s %9s %9s %9s %11s %11s %9s %9s %10s %9s %6s\n", "conc", "round", "client", "reqs",
		"err-p50", "err-p99", "err-max", "wave1-p99", "later-p99", "send-p99", "recv-p99", "w1-spread", "tok/s", "load1")
	type acc struct{ p99, tps []float64 }
	all := map[int]map[string]*acc{}
	for _, c := range levels {
		all[c] = map[string]*acc{}
		for _, cl := range clients {
			all[c][cl] = &acc{}
		}
		for r := 0; r < rounds; r++ {
			order := slices.Clone(clients)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, cl := range order {
				res, err := runOne(&cfg, cl, c)
				if err != nil {
					return fmt.Errorf("%s at concurrency %d: %w", cl, c, err)
				}
				fmt.Printf("%6d %5d %-20s %5d %9.2f %9.2f %9.2f %11.2f %11.2f %9.2f %9.2f %10.2f %9.0f %6.2f\n", c, r+1, cl, res.n,
					res.p50, res.p99, res.max, res.wave1P99, res.laterP99, res.sendP99, res.recvP99, res.wave1Spread, res.tokensPerS, perfutil.Load1())
				all[c][cl].p99 = append(all[c][cl].p99, res.p99)
				all[c][cl].tps = append(all[c][cl].tps, res.tokensPerS)
			}
		}
	}
	fmt.Printf("\nper level, median over rounds; error p99 in ms; ratio = %s / %s\n", clientVLLM, clientProber)
	fmt.Printf("%6s %9s %14s %14s %8s %14s\n", "conc", "tok/s", "prober-p99", "vllm-p99", "ratio", "floor-p99")
	best := map[string]float64{}
	for _, c := range levels {
		cells := map[string]string{clientProber: "n/a", clientVLLM: "n/a", clientFloor: "n/a"}
		meds := map[string]float64{}
		tps := 0.0
		for cl, a := range all[c] {
			m := perfutil.Median(a.p99)
			meds[cl] = m
			cells[cl] = strconv.FormatFloat(m, 'f', 2, 64)
			t := perfutil.Median(a.tps)
			tps = max(tps, t)
			if m <= within {
				best[cl] = max(best[cl], t)
			}
		}
		ratio := "n/a"
		if p, ok := meds[clientProber]; ok && p > 0 {
			if v, ok := meds[clientVLLM]; ok {
				ratio = strconv.FormatFloat(v/p, 'f', 1, 64) + "x"
			}
		}
		fmt.Printf("%6d %9.0f %14s %14s %8s %14s\n", c, tps, cells[clientProber], cells[clientVLLM], ratio, cells[clientFloor])
	}
	fmt.Printf("\nhighest streamed tokens/s with the error p99 within %g ms:\n", within)
	for _, cl := range clients {
		if v, ok := best[cl]; ok {
			fmt.Printf("  %-20s %.0f tok/s\n", cl, v)
		} else {
			fmt.Printf("  %-20s within at none of the levels\n", cl)
		}
	}
	if slices.Contains(clients, clientFloor) {
		fmt.Println("(floor: a warm in-process client on raw sockets, the least any client adds on this machine against this simulator)")
	}
	return nil
}

type result struct {
	n                  int
	p50, p99, max      float64 // ms
	wave1P99, laterP99 float64 // ms
	// The split of the error into its way out (send: the request's arrival
	// later than its send time, beyond the least such delay of the run,
	// since the two clocks share no origin) and its way back (the rest):
	// p99 of each, NaN when the client records no send times.
	sendP99, recvP99 float64 // ms
	// wave1Spread is the time from the first to the last send of the first
	// wave (ms; NaN without send times): how close together it left.
	wave1Spread float64
	tokensPerS  float64
}

// clientRecord is one request as a client saw it.
type clientRecord struct {
	ID      string  `json:"id"`
	TTFT    float64 `json:"ttft_s"`
	Success bool    `json:"success"`
	Start   float64 `json:"start_s"` // send time, seconds on the client's own origin
}

// runOne runs client cl at concurrency c against a fresh simulator and
// matches its requests to the simulator's records.
func runOne(cfg *config, cl string, c int) (*result, error) {
	n := cfg.waves * c
	run, err := perfutil.StartTracedRun(cfg.Tmp, cfg.TTFT, cfg.ITL, 2*c+1, cfg.simEnv...)
	if err != nil {
		return nil, err
	}
	defer run.Close()
	dir, sim, scfg, arrivalsFile := run.Dir, run.Sim, run.Config, run.Arrivals
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", out, err)
	}
	records := filepath.Join(dir, "records.json")
	if cl == clientFloor {
		recs, err := runFloor(ctx, sim.URL, scfg.Model, c, n, cfg.InputLen, cfg.Tokens)
		if stopErr := sim.Stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return nil, err
		}
		return match(recs, c, scfg.TraceFile, arrivalsFile)
	}
	var cmd *exec.Cmd
	if cl == clientProber {
		args := []string{"bench", "--url", sim.URL, "--out", out, "--name", benchName,
			"--concurrency", strconv.Itoa(c), "--requests", strconv.Itoa(n), "--max-tokens", strconv.Itoa(cfg.Tokens), "--ignore-eos",
			"--random-input-len", strconv.Itoa(cfg.InputLen), "--temperature", "0", "--seed", "1",
			"--metric-percentiles", "50,90,99", "--save-detailed"}
		cmd = exec.CommandContext(ctx, cfg.ProberBin, append(args, cfg.proberArgs...)...)
	} else {
		cmd = perfutil.PythonClient(ctx, cfg.Python, cfg.VLLMDir, cfg.PyPath, []string{"TTFTERROR_RECORDS=" + records},
			"ttfterror_runner.py", "--backend", "vllm", "--base-url", sim.URL,
			"--endpoint", "/v1/completions", "--model", scfg.Model, "--dataset-name", "random",
			"--random-input-len", strconv.Itoa(cfg.InputLen), "--random-output-len", strconv.Itoa(cfg.Tokens),
			"--num-prompts", strconv.Itoa(n), "--request-rate", "inf", "--max-concurrency", strconv.Itoa(c),
			"--ignore-eos", "--seed", "1", "--disable-tqdm")
	}
	if err := run.RunClient(cmd); err != nil {
		return nil, err
	}
	var recs []clientRecord
	if cl == clientProber {
		recs, err = proberRecords(out, c)
	} else {
		recs, err = vllmRecords(records)
	}
	if err != nil {
		return nil, err
	}
	if len(recs) != n {
		return nil, fmt.Errorf("%d requests recorded, want %d", len(recs), n)
	}
	return match(recs, c, scfg.TraceFile, arrivalsFile)
}

// pickClients turns -clients into the clients to run, in a fixed order;
// vLLM's client is dropped when its files were not given (haveVLLM false).
func pickClients(list string, haveVLLM bool) ([]string, error) {
	byName := map[string][]string{"prober": {clientProber}, "vllm": {clientVLLM}, "floor": {clientFloor},
		"both": {clientProber, clientVLLM}}
	want := map[string]bool{}
	for _, f := range strings.Split(list, ",") {
		cs, ok := byName[strings.TrimSpace(f)]
		if !ok {
			return nil, fmt.Errorf("-clients %q: %q is not one of prober, vllm, floor or both", list, f)
		}
		for _, c := range cs {
			want[c] = true
		}
	}
	var out []string
	for _, c := range []string{clientProber, clientVLLM, clientFloor} {
		if want[c] && (c != clientVLLM || haveVLLM) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-clients %s needs vLLM's client (-vllm-git or -vllm-dir)", list)
	}
	return out, nil
}

// proberRecords reads bench's --save-detailed result: ttfts and errors in
// request order; request i carried the X-Request-Id <name>-c<C>-<i>. The
// order is the order in which the requests were taken by the slots, so the
// first C are the first wave.
func proberRecords(dir string, c int) ([]clientRecord, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("listing results: %w", err)
	}
	var picked string
	for _, n := range names {
		if strings.Contains(filepath.Base(n), "-c"+strconv.Itoa(c)) || len(names) == 1 {
			picked = n
		}
	}
	if picked == "" {
		return nil, fmt.Errorf("no result JSON for concurrency %d in %v", c, names)
	}
	data, err := os.ReadFile(picked)
	if err != nil {
		return nil, fmt.Errorf("reading the result: %w", err)
	}
	var r struct {
		TTFTs  []float64 `json:"ttfts"`
		Starts []float64 `json:"start_times"`
		Errors []string  `json:"errors"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", picked, err)
	}
	out := make([]clientRecord, len(r.TTFTs))
	for i, t := range r.TTFTs {
		out[i] = clientRecord{ID: fmt.Sprintf("%s-c%d-%d", benchName, c, i), TTFT: t, Success: i >= len(r.Errors) || r.Errors[i] == ""}
		if i < len(r.Starts) {
			out[i].Start = r.Starts[i]
		}
	}
	return out, nil
}

// vllmRecords reads what the runner recorded, in the order the requests
// started, without the client's single test request.
func vllmRecords(path string) ([]clientRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the runner's records: %w", err)
	}
	var recs []clientRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("decoding the runner's records: %w", err)
	}
	recs = slices.DeleteFunc(recs, func(r clientRecord) bool { return r.ID == runnerTestID })
	// Written as the requests finished; the ids number them as they started.
	seq := func(r clientRecord) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.ID, "ttfterror-"))
		return n
	}
	slices.SortFunc(recs, func(a, b clientRecord) int { return seq(a) - seq(b) })
	return recs, nil
}

// match computes the errors of recs (the first c are the first wave)
// against the simulator's arrivals and trace.
func match(recs []clientRecord, c int, tracePath, arrivalsPath string) (*result, error) {
	arrivals, err := perfutil.ReadArrivals(arrivalsPath)
	if err != nil {
		return nil, err
	}
	first := map[string]int64{}
	var tokens int
	var lastWrite int64
	err = perfutil.ReadTrace(tracePath, func(e perfutil.TraceEvent) {
		if e.Kind != "token" {
			return
		}
		if _, ok := first[e.RequestID]; !ok {
			first[e.RequestID] = e.Time
		}
		if _, ok := arrivals[e.RequestID]; ok && e.RequestID != runnerTestID && !strings.Contains(e.RequestID, "warmup") {
			tokens++
			lastWrite = max(lastWrite, e.Time)
		}
	})
	if err != nil {
		return nil, err
	}
	var all, wave1, later []float64
	var firstArrival int64
	var sends, errs []float64 // per request: arrival − send (ms, own origin), error
	for i, r := range recs {
		if !r.Success {
			return nil, fmt.Errorf("request %s failed", r.ID)
		}
		at, ok := arrivals[r.ID]
		if !ok {
			return nil, fmt.Errorf("request %s never reached the simulator (no arrival with its X-Request-Id)", r.ID)
		}
		ft, ok := first[r.ID]
		if !ok {
			return nil, fmt.Errorf("request %s has no token in the trace", r.ID)
		}
		if firstArrival == 0 || at < firstArrival {
			firstArrival = at
		}
		e := r.TTFT*1e3 - float64(ft-at)/1e6
		all = append(all, e)
		sends = append(sends, float64(at)/1e6-r.Start*1e3)
		errs = append(errs, e)
		if i < c {
			wave1 = append(wave1, e)
		} else {
			later = append(later, e)
		}
	}
	for _, s := range [][]float64{all, wave1, later} {
		slices.Sort(s)
	}
	res := &result{n: len(recs), p50: perfutil.Percentile(all, 50), p99: perfutil.Percentile(all, 99), max: all[len(all)-1],
		wave1P99: perfutil.Percentile(wave1, 99), laterP99: perfutil.Percentile(later, 99)}
	res.sendP99, res.recvP99 = split(recs, sends, errs)
	res.wave1Spread = math.NaN()
	if !math.IsNaN(res.sendP99) {
		w := recs[:min(c, len(recs))]
		lo := slices.MinFunc(w, func(a, b clientRecord) int { return cmp.Compare(a.Start, b.Start) })
		hi := slices.MaxFunc(w, func(a, b clientRecord) int { return cmp.Compare(a.Start, b.Start) })
		res.wave1Spread = (hi.Start - lo.Start) * 1e3
	}
	if span := float64(lastWrite-firstArrival) / 1e9; span > 0 {
		res.tokensPerS = float64(tokens) / span
	}
	return res, nil
}

// split returns the p99 of the way out and of the way back of the errors
// (see result), or NaN twice when the client recorded no send times.
func split(recs []clientRecord, sends, errs []float64) (sendP99, recvP99 float64) {
	if !slices.ContainsFunc(recs, func(r clientRecord) bool { return r.Start != 0 }) {
		return math.NaN(), math.NaN()
	}
	least := slices.Min(sends)
	out, back := make([]float64, len(sends)), make([]float64, len(sends))
	for i := range sends {
		out[i] = sends[i] - least
		back[i] = errs[i] - out[i]
	}
	slices.Sort(out)
	slices.Sort(back)
	return perfutil.Percentile(out, 99), perfutil.Percentile(back, 99)
}

// runnerTestID is the X-Request-Id the runner gives benchmark_serving.py's
// single test request, sent alone before the run.
const runnerTestID = "ttfterror-test"

// runnerPy runs vLLM's benchmark_serving.py unchanged, with its request
// function wrapped: each request gets an X-Request-Id header (the first, the
// client's test request, runnerTestID; then ttfterror-0, 1, ... in the order
// the requests start), and the id, TTFT and success of each are written to
// $TTFTERROR_RECORDS as JSON when the client exits.
const runnerPy = `import atexit, contextvars, itertools, json, os, runpy, sys
import aiohttp
import backend_request_func as brf

_rid = contextvars.ContextVar("ttfterror_rid", default=None)
_post = aiohttp.ClientSession.post

def _post_with_id(self, *args, headers=None, **kwargs):
    rid = _rid.get()
    if rid is not None:
        headers = dict(headers or {})
        headers["X-Request-Id"] = rid
    return _post(self, *args, headers=headers, **kwargs)

aiohttp.ClientSession.post = _post_with_id
_records = []
_count = itertools.count()
_inner = brf.ASYNC_REQUEST_FUNCS["vllm"]

async def _with_id(request_func_input, pbar=None):
    i = next(_count)
    rid = "` + runnerTestID + `" if i == 0 else "ttfterror-%d" % (i - 1)
    token = _rid.set(rid)
    try:
        out = await _inner(request_func_input=request_func_input, pbar=pbar)
    finally:
        _rid.reset(token)
    _records.append({"id": rid, "ttft_s": out.ttft, "success": bool(out.success)})
    return out

brf.ASYNC_REQUEST_FUNCS["vllm"] = _with_id

def _save():
    with open(os.environ["TTFTERROR_RECORDS"], "w") as f:
        json.dump(_records, f)

atexit.register(_save)
sys.argv = ["benchmark_serving.py"] + sys.argv[1:]
runpy.run_path("benchmark_serving.py", run_name="__main__")
`
