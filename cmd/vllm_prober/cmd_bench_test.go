package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

func runBenchCLI(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	app := kingpin.New("vllm_prober", "test")
	app.Terminate(nil)
	var out, errb bytes.Buffer
	app.UsageWriter(&errb)
	app.ErrorWriter(&errb)
	cmd, run := registerBenchCommandsTo(app, &out, &errb)
	selected, err := app.Parse(args)
	if err != nil {
		return -1, out.String(), err.Error()
	}
	if selected != cmd.FullCommand() {
		t.Fatalf("selected %q, want %q", selected, cmd.FullCommand())
	}
	code = run(ctx, log.NewLogfmtLogger(&errb))
	return code, out.String(), errb.String()
}

// startBenchSim serves a fast simulator; mutate (if not nil) changes its configuration.
func startBenchSim(t *testing.T, mutate func(*simulator.Config)) string {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Model = "sim/model"
	cfg.TTFT = 5 * time.Millisecond
	cfg.ITL = 2 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		_ = sim.Close()
		srv.Close()
	})
	return srv.URL
}

func TestBenchCommandWritesResults(t *testing.T) {
	url := startBenchSim(t, nil)
	dir := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runBenchCLI(t, context.Background(), "bench", "--url", url, "--out", dir, "--requests", "3",
		"--concurrency", "1, 2", "--request-rate", "inf", "--max-tokens", "5", "--ignore-eos", "--name", "run1",
		"--metric-percentiles", "50,99")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if n := strings.Count(stdout, "============ Serving Benchmark Result ============\n"); n != 3 {
		t.Errorf("%d summary blocks on stdout, want 3:\n%s", n, stdout)
	}
	for _, want := range []string{"Maximum request concurrency:             2         \n", "P50 TTFT (ms):", "Successful requests:                     3         \n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("a progress bar was drawn on a stderr that is not a terminal:\n%q", stderr)
	}
	for _, name := range []string{"run1.csv", "run1-c1.json", "run1-c2.json", "run1-qpsinf.json", "run1-c1-server.csv",
		"run1.baseline.yaml", "run1-gen-tps.svg", "run1-throughput-latency.svg"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("missing output: %v", err)
		}
		if !strings.Contains(stderr, filepath.Join(dir, name)) {
			t.Errorf("stderr does not list %s", name)
		}
	}
	f, err := baseline.ReadFile(context.Background(), filepath.Join(dir, "run1.baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, ok := f.Lookup("run1")
	if !ok || len(b.Points) != 3 || b.Model != "sim/model" {
		t.Fatalf("baseline: %+v", f.Baselines)
	}
	// The baseline import command reads bench's JSON.
	code, _, stderr = runBaselineCLI(t, "baseline", "import", "--out", filepath.Join(dir, "again.yaml"), "--name", "again",
		filepath.Join(dir, "run1-c1.json"), filepath.Join(dir, "run1-c2.json"))
	if code != 0 {
		t.Fatalf("baseline import of bench JSON: exit %d:\n%s", code, stderr)
	}
}

func TestBenchCommandBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "1,x"}, "vllm_prober bench: --concurrency: \"x\" is not a positive integer\n  What to do: give positive integers"},
		{[]string{"--request-rate", "0"}, "vllm_prober bench: --request-rate: \"0\" is neither a positive number nor \"inf\"\n"},
		{[]string{"--metric-percentiles", "100"}, "vllm_prober bench: --metric-percentiles: \"100\" is not a percentile in (0, 100)\n"},
		{[]string{"--prompt", "hi", "--random-input-len", "5"}, `invalid benchmark options: give either a prompt or a random input length, not both`},
	} {
		args := append([]string{"bench", "--url", "http://127.0.0.1:1", "--out", t.TempDir()}, c.args...)
		code, _, stderr := runBenchCLI(t, context.Background(), args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 1 and %q", c.args, code, stderr, c.want)
		}
	}
}

func TestBenchCommandInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, stderr := runBenchCLI(t, ctx, "bench", "--url", "http://127.0.0.1:1", "--out", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "waiting for /v1/models: context canceled") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestBenchCommandFailingServer: against a server that fails half of the
// requests with HTTP 500, bench prints the failure breakdown, puts it and the
// per-request errors into the JSON, exits 1 and writes no baseline file;
// with --force it writes one whose point carries the failed count.
func TestBenchCommandFailingServer(t *testing.T) {
	// Half of the completions get HTTP 500, drawn from the simulator's seeded generator.
	url := startBenchSim(t, func(c *simulator.Config) {
		c.Fault, c.FaultRate, c.FaultStatus = simulator.FaultHTTPStatus, 0.5, 500
	})
	dir := filepath.Join(t.TempDir(), "out")
	args := []string{"bench", "--url", url, "--out", dir, "--requests", "20", "--concurrency", "4",
		"--max-tokens", "5", "--ignore-eos", "--name", "faulty"}
	code, stdout, stderr := runBenchCLI(t, context.Background(), args...)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "faulty-c4.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Completed      int      `json:"completed"`
		Failed         int      `json:"failed"`
		Errors         []string `json:"errors"`
		FailureReasons []struct {
			Reason  string `json:"reason"`
			Status  int    `json:"status"`
			Count   int    `json:"count"`
			Example string `json:"example"`
		} `json:"failure_reasons"`
		TTFTs []float64 `json:"ttfts"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	// Each request fails with probability 0.5: bounds of 5..15 would fail 1.2% of runs
	// (Binomial(20, 0.5)); 1..19 fail one run in 500,000 and still prove a mixed level.
	if rec.Failed < 1 || rec.Failed > 19 || rec.Completed+rec.Failed != 20 {
		t.Fatalf("completed %d failed %d, want some of 20 failed and some completed", rec.Completed, rec.Failed)
	}
	// The breakdown: one class, the prober's reason with the status.
	if len(rec.FailureReasons) != 1 || rec.FailureReasons[0].Reason != "http_5xx" || rec.FailureReasons[0].Status != 500 ||
		rec.FailureReasons[0].Count != rec.Failed || !strings.Contains(rec.FailureReasons[0].Example, "HTTP 500") {
		t.Errorf("failure_reasons = %+v", rec.FailureReasons)
	}
	// vLLM's per-request errors: "" for a success, the reason and message for a failure.
	failed := 0
	for _, e := range rec.Errors {
		if e != "" {
			failed++
			if !strings.HasPrefix(e, "http_5xx: HTTP 500") {
				t.Errorf("error entry %q", e)
			}
		}
	}
	if len(rec.Errors) != 20 || failed != rec.Failed {
		t.Errorf("%d errors entries, %d non-empty; want 20 and %d", len(rec.Errors), failed, rec.Failed)
	}
	if rec.TTFTs != nil {
		t.Errorf("ttfts written without --save-detailed")
	}
	want := fmt.Sprintf("------------Failed requests by reason-------------\nhttp_5xx (HTTP 500):                     %-10d\n  first error: HTTP 500", rec.Failed)
	if !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks the breakdown %q:\n%s", want, stdout)
	}
	for _, want := range []string{
		fmt.Sprintf("vllm_prober bench: too many failed requests: these levels do not measure the server, below --min-success-ratio 0.99: concurrency 4: %d of 20 requests failed (success ratio ", rec.Failed),
		"): http_5xx (HTTP 500)=",
		"\n  What to do: no baseline file was written; "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "faulty.baseline.yaml")); !os.IsNotExist(err) {
		t.Errorf("a baseline file was written for a failing run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "faulty.csv")); err != nil {
		t.Errorf("the results must still be written: %v", err)
	}
	// The printed blocks, breakdown included, still import as a vLLM text log.
	if im, err := baseline.ImportBytes("stdout.txt", []byte(stdout)); err != nil || im.NumPoints() != 1 {
		t.Errorf("printed summary does not import: %v", err)
	}

	// --force writes the baseline, its point marked by its failed count.
	code, _, stderr = runBenchCLI(t, context.Background(), append(args, "--force")...)
	if code != 1 {
		t.Fatalf("--force: exit %d, want 1 (the run still failed); stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "was written anyway (--force), with these levels marked excluded") {
		t.Errorf("stderr lacks the --force warning:\n%s", stderr)
	}
	forced := filepath.Join(dir, "faulty.baseline.yaml")
	data, err = os.ReadFile(forced)
	if err != nil {
		t.Fatal(err)
	}
	f, err := baseline.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := f.Lookup("faulty")
	if !ok || len(b.Points) != 1 {
		t.Fatalf("baseline: %+v", f.Baselines)
	}
	p := b.Points[0]
	if p.Failed == nil || *p.Failed < 1 || p.Completed == nil || *p.Completed+*p.Failed != 20 {
		t.Errorf("forced point: completed %v failed %v, want the failures counted", p.Completed, p.Failed)
	}
	// Marked as baseline import marks it: the point excluded, the baseline unusable, and so
	// refused by the loader the daemon uses.
	if !strings.HasPrefix(p.Excluded, "success ratio ") || b.Unusable == "" {
		t.Errorf("forced baseline not marked: point excluded %q, baseline unusable %q", p.Excluded, b.Unusable)
	}
	if _, err := baseline.ReadFile(context.Background(), forced); err == nil || !strings.Contains(err.Error(), "no usable point") {
		t.Errorf("the daemon's loader accepted the forced baseline: %v", err)
	}
}

func TestBenchCommandMinSuccessRatio(t *testing.T) {
	for _, v := range []string{"0", "1.5"} {
		code, _, stderr := runBenchCLI(t, context.Background(), "bench", "--url", "http://127.0.0.1:1", "--out", t.TempDir(), "--min-success-ratio", v)
		if code != 1 || !strings.Contains(stderr, "vllm_prober bench: --min-success-ratio: "+v+" is not in (0, 1]\n") {
			t.Errorf("--min-success-ratio %s: exit %d, stderr %q", v, code, stderr)
		}
	}
}

// TestBenchCommandSaveDetailed: --save-detailed adds vllm bench serve's
// per-request arrays, one entry per request, in seconds, in vLLM's key order;
// the file still imports with the baseline package, and the arrays agree with
// the aggregates. generated_texts holds each request's whole text: the
// simulator streams one " word" per token.
func TestBenchCommandSaveDetailed(t *testing.T) {
	url := startBenchSim(t, nil)
	dir := filepath.Join(t.TempDir(), "out")
	code, _, stderr := runBenchCLI(t, context.Background(), "bench", "--url", url, "--out", dir, "--requests", "6",
		"--concurrency", "3", "--max-tokens", "7", "--ignore-eos", "--name", "detail", "--save-detailed")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "concurrency 3: 6/6 requests in ") {
		t.Errorf("stderr lacks the quiet progress line:\n%s", stderr)
	}
	path := filepath.Join(dir, "detail-c3.json")
	im, err := baseline.ImportFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if im.Format != baseline.FormatVLLMServeJSON || im.NumPoints() != 1 {
		t.Fatalf("imported as %s with %d points", im.Format, im.NumPoints())
	}
	p := im.Baselines[0].Points[0]
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Completed         int         `json:"completed"`
		TotalInputTokens  int         `json:"total_input_tokens"`
		TotalOutputTokens int         `json:"total_output_tokens"`
		MeanTTFTms        float64     `json:"mean_ttft_ms"`
		MeanITLms         float64     `json:"mean_itl_ms"`
		InputLens         []int       `json:"input_lens"`
		OutputLens        []int       `json:"output_lens"`
		TTFTs             []float64   `json:"ttfts"`
		ITLs              [][]float64 `json:"itls"`
		StartTimes        []float64   `json:"start_times"`
		GeneratedTexts    []string    `json:"generated_texts"`
		Errors            []string    `json:"errors"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Completed != 6 || p.Completed == nil || *p.Completed != 6 {
		t.Fatalf("completed %d (imported %v), want 6", rec.Completed, p.Completed)
	}
	for name, n := range map[string]int{"input_lens": len(rec.InputLens), "output_lens": len(rec.OutputLens), "ttfts": len(rec.TTFTs),
		"itls": len(rec.ITLs), "start_times": len(rec.StartTimes), "generated_texts": len(rec.GeneratedTexts), "errors": len(rec.Errors)} {
		if n != rec.Completed {
			t.Errorf("%s has %d entries, want completed = %d", name, n, rec.Completed)
		}
	}
	// vLLM's serve.py order: ..., itls, start_times, generated_texts, errors.
	last := -1
	for _, k := range []string{`"input_lens"`, `"output_lens"`, `"ttfts"`, `"itls"`, `"start_times"`, `"generated_texts"`, `"errors"`} {
		at := bytes.Index(data, []byte(k+": "))
		if at <= last {
			t.Errorf("key %s at %d, want it after the previous per-request array (at %d)", k, at, last)
		}
		last = at
	}
	sumIn, sumOut, sumTTFT, sumITL, nITL := 0, 0, 0.0, 0.0, 0
	for i := range rec.TTFTs {
		if txt := rec.GeneratedTexts[i]; !strings.HasPrefix(txt, " ") || len(strings.Fields(txt)) != rec.OutputLens[i] {
			t.Errorf("request %d: generated text %q, want %d space-led words", i, txt, rec.OutputLens[i])
		}
		sumIn += rec.InputLens[i]
		sumOut += rec.OutputLens[i]
		sumTTFT += rec.TTFTs[i]
		if rec.OutputLens[i] != 7 || len(rec.ITLs[i]) != 6 || rec.Errors[i] != "" || rec.StartTimes[i] < 0 || rec.StartTimes[i] > 10 {
			t.Errorf("request %d: output_len %d, %d itls, error %q, start %v", i, rec.OutputLens[i], len(rec.ITLs[i]), rec.Errors[i], rec.StartTimes[i])
		}
		for _, g := range rec.ITLs[i] {
			sumITL += g
			nITL++
		}
	}
	// Seconds per request, milliseconds in the aggregates.
	if sumIn != rec.TotalInputTokens || sumOut != rec.TotalOutputTokens {
		t.Errorf("sum of input_lens/output_lens %d/%d, totals %d/%d", sumIn, sumOut, rec.TotalInputTokens, rec.TotalOutputTokens)
	}
	if got := sumTTFT / 6 * 1000; math.Abs(got-rec.MeanTTFTms) > 1e-6 {
		t.Errorf("mean of ttfts %v ms, mean_ttft_ms %v", got, rec.MeanTTFTms)
	}
	if got := sumITL / float64(nITL) * 1000; math.Abs(got-rec.MeanITLms) > 1e-6 {
		t.Errorf("mean of itls %v ms, mean_itl_ms %v", got, rec.MeanITLms)
	}
}

// TestBenchCommandGoodputFlags: --goodput takes vLLM's syntax and says what
// is wrong with a bad pair; --goodput-target needs objectives, a ratio in
// (0, 1] and no levels of its own.
func TestBenchCommandGoodputFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--goodput", "ttft:abc"}, `vllm_prober bench: --goodput: goodput objective "ttft:abc": "abc" is not a non-negative number of milliseconds`},
		{[]string{"--goodput", "itl:5"}, `--goodput: goodput objective "itl:5": unknown key "itl" (keys ttft, tpot, itl_p99, e2el)`},
		{[]string{"--goodput-target", "0.99"}, "--goodput-target: no --goodput objectives to meet"},
		{[]string{"--goodput", "tpot:50", "--goodput-target", "1.5"}, "--goodput-target: 1.5 is not in (0, 1]"},
		{[]string{"--goodput", "tpot:50", "--goodput-target", "0.9", "--concurrency", "4"}, "--goodput-target: the search chooses the concurrencies itself"},
	} {
		// --ready-timeout: a flag let through fails in a second instead of waiting for the server.
		args := append([]string{"bench", "--url", "http://127.0.0.1:1", "--out", t.TempDir(), "--ready-timeout", "1s"}, c.args...)
		code, _, stderr := runBenchCLI(t, context.Background(), args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}
