package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

const simModel = "sim/model"

// startSim serves a jitter-free simulator whose latencies are long enough for
// HTTP overhead on a busy machine to stay well under 1 %.
func startSim(t testing.TB, mutate func(*simulator.Config)) (*simulator.Simulator, string) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Model = simModel
	cfg.TTFT = 200 * time.Millisecond
	cfg.ITL = 10 * time.Millisecond
	cfg.BatchSlowdown = 0.05
	cfg.Jitter = 0
	if mutate != nil {
		mutate(&cfg)
	}
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Error(err)
		}
		srv.Close()
	})
	return sim, srv.URL
}

// TestBenchReproducesSimulator runs bench against vllm_sim and checks the
// measurements twice: against the simulator's ground truth (its trace file
// records when every token was flushed), and against its configured load
// model: TTFT = ttft (every request is admitted at once), ITL =
// itl·(1+slowdown·(c-1)) with c requests running, E2E = TTFT + (n-1)·ITL and
// output throughput c·n/E2E at fixed concurrency c. The second check needs a
// simulator that kept its own schedule; on a machine too busy for that (its
// trace says so) it is logged instead of failed.
func TestBenchReproducesSimulator(t *testing.T) {
	// Timing on a shared 2-core machine is noisy: a run whose timings miss is
	// repeated (up to 3 runs); counts and outputs are always checked strictly.
	var (
		rep     *Report
		summary bytes.Buffer
		misses  []string
	)
	for attempt := 1; attempt <= 3; attempt++ {
		summary.Reset()
		rep, misses = benchSimOnce(t, &summary)
		if len(misses) == 0 {
			break
		}
		t.Logf("run %d: timings off, probably a busy machine:\n%s", attempt, strings.Join(misses, "\n"))
	}
	for _, m := range misses {
		t.Error(m)
	}
	if got := strings.Count(summary.String(), "============ Serving Benchmark Result ============\n"); got != 2 {
		t.Errorf("%d summary blocks printed, want 2:\n%s", got, summary.String())
	}

	dir := t.TempDir()
	files, err := WriteAll(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, dir, rep, files)

	// The printed blocks import with the baseline package's text importer too.
	im, err := baseline.ImportBytes("summary.txt", summary.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if im.Format != baseline.FormatVLLMServeText || im.NumPoints() != 2 {
		t.Fatalf("printed summary imported as %s with %d points", im.Format, im.NumPoints())
	}
}

const (
	simTTFT     = 300 * time.Millisecond
	simITL      = 25 * time.Millisecond
	simSlowdown = 0.05
	simTokens   = 32
	simRequests = 4
)

// benchSimOnce runs two concurrency levels against a fresh simulator and
// returns the report and the timing checks that missed.
func benchSimOnce(t *testing.T, summary *bytes.Buffer) (*Report, []string) {
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	sim, url := startSim(t, func(c *simulator.Config) {
		c.TraceFile = trace
		c.TTFT, c.ITL, c.BatchSlowdown = simTTFT, simITL, simSlowdown
	})
	defer sim.Close()
	const n = simTokens
	rep, err := Run(context.Background(), Options{
		URL: url, Requests: simRequests, Concurrencies: []int{1, 4}, MaxTokens: n, IgnoreEOS: true,
		Temperature: 0, PollInterval: 200 * time.Millisecond, Summary: summary, Name: "simbench",
		Percentiles: []float64{50, 99},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Model != simModel || rep.MaxModelLen != 4096 {
		t.Errorf("model %q max_model_len %d, want the first id of /v1/models and its length", rep.Model, rep.MaxModelLen)
	}
	if len(rep.Levels) != 2 {
		t.Fatalf("%d levels, want 2", len(rep.Levels))
	}
	var misses []string
	within := func(what string, got, want, tol float64) {
		if math.Abs(got-want) > tol*want {
			misses = append(misses, fmt.Sprintf("%s = %.4f, want %.4f within %.0f%%", what, got, want, tol*100))
		} else {
			t.Logf("%s = %.4f (reference %.4f)", what, got, want)
		}
	}
	flushes := readTrace(t, trace)
	const k = float64(simRequests)
	for _, lr := range rep.Levels {
		c := lr.Level.Value
		m := lr.Metrics
		if m.Completed != simRequests || m.Failed != 0 || m.TotalOutput != simRequests*n {
			t.Fatalf("%s: completed %d failed %d output %d: %v", lr.Level, m.Completed, m.Failed, m.TotalOutput, m.Failures)
		}
		// Ground truth from the simulator's flush times.
		var tTTFT, tTPOT, tE2E float64
		first, last := time.Time{}, time.Time{}
		for i, r := range lr.Results {
			ts := flushes["simbench-"+lr.Level.Slug()+"-"+strconv.Itoa(i)]
			if len(ts) != n {
				t.Fatalf("%s request %d: %d token flushes in the trace, want %d", lr.Level, i, len(ts), n)
			}
			tTTFT += ts[0].Sub(r.Start).Seconds() / k
			tE2E += ts[n-1].Sub(r.Start).Seconds() / k
			tTPOT += ts[n-1].Sub(ts[0]).Seconds() / float64(n-1) / k
			if first.IsZero() || r.Start.Before(first) {
				first = r.Start
			}
			if ts[n-1].After(last) {
				last = ts[n-1]
			}
		}
		tThroughput := float64(simRequests*n) / last.Sub(first).Seconds()
		within(lr.Level.String()+" mean TTFT vs trace", m.TTFT.Mean, tTTFT, 0.05)
		within(lr.Level.String()+" mean TPOT vs trace", m.TPOT.Mean, tTPOT, 0.05)
		within(lr.Level.String()+" mean E2E vs trace", m.E2E.Mean, tE2E, 0.05)
		within(lr.Level.String()+" output throughput vs trace", m.OutputThroughput, tThroughput, 0.05)

		if m.MaxConcurrentRequests != int(c) {
			t.Errorf("%s: peak concurrency %d, want %v", lr.Level, m.MaxConcurrentRequests, c)
		}
		// The server's own counters, polled through collector.Scrape, see the same tokens.
		if len(lr.Server.Samples) < 2 || lr.Server.ScrapeErrors != 0 {
			t.Errorf("%s: %d polls, %d errors", lr.Level, len(lr.Server.Samples), lr.Server.ScrapeErrors)
			continue
		}
		idle := lr.Server.Samples[len(lr.Server.Samples)-1]
		if idle.Running != 0 || idle.Waiting != 0 {
			t.Errorf("%s: last poll running %v waiting %v, want an idle server", lr.Level, idle.Running, idle.Waiting)
		}
		within(lr.Level.String()+" server Gen TPS", lr.Server.GenerationTPS, m.OutputThroughput, 0.3)
		if lr.Server.MeanRunning <= 0 || !(lr.Server.MaxKVUsage > 0) {
			// Only polls made while requests ran see them: timing, hence a miss.
			misses = append(misses, fmt.Sprintf("%s: mean running %v max KV %v, want requests seen running", lr.Level, lr.Server.MeanRunning, lr.Server.MaxKVUsage))
		}

		// The configured load model, when the simulator kept to it: on a
		// machine too busy for its timers (the trace tells) it cannot.
		ttft := simTTFT.Seconds()
		itl := simITL.Seconds() * (1 + simSlowdown*(c-1))
		e2e := ttft + float64(n-1)*itl
		if math.Abs(tTTFT-ttft) > 0.025*ttft || math.Abs(tTPOT-itl) > 0.025*itl {
			t.Logf("%s: the simulator missed its own schedule (trace TTFT %.4fs, TPOT %.4fs; configured %.4fs, %.4fs): load-model check skipped for this run",
				lr.Level, tTTFT, tTPOT, ttft, itl)
			continue
		}
		within(lr.Level.String()+" mean TTFT", m.TTFT.Mean, ttft, 0.05)
		within(lr.Level.String()+" mean TPOT", m.TPOT.Mean, itl, 0.05)
		within(lr.Level.String()+" mean ITL", m.ITL.Mean, itl, 0.05)
		within(lr.Level.String()+" mean E2E", m.E2E.Mean, e2e, 0.05)
		within(lr.Level.String()+" output throughput", m.OutputThroughput, c*n/e2e, 0.05)

	}
	return rep, misses
}

func checkOutputs(t *testing.T, dir string, rep *Report, files *Files) {
	t.Helper()
	// The JSON per level re-imports with the vllm-serve importer to the same numbers.
	for i, name := range files.JSON {
		lr := rep.Levels[i]
		im, err := baseline.ImportFile(context.Background(), filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if im.Format != baseline.FormatVLLMServeJSON || len(im.Baselines) != 1 || len(im.Baselines[0].Points) != 1 {
			t.Fatalf("%s imported as %s with %d baselines", name, im.Format, len(im.Baselines))
		}
		b, got := im.Baselines[0], im.Baselines[0].Points[0]
		want := Point(rep, lr)
		if b.Model != simModel || b.Source.Tool != baseline.ToolVLLMServe {
			t.Errorf("%s: model %q tool %q", name, b.Model, b.Source.Tool)
		}
		if got.Concurrency == nil || *got.Concurrency != *want.Concurrency || got.RequestRate == nil || !math.IsInf(float64(*got.RequestRate), 1) {
			t.Errorf("%s: load concurrency %v rate %v", name, got.Concurrency, got.RequestRate)
		}
		for _, c := range []struct {
			name      string
			got, want *float64
		}{
			{"duration", got.DurationSeconds, want.DurationSeconds},
			{"request_throughput", got.RequestThroughput, want.RequestThroughput},
			{"output_throughput", got.OutputThroughput, want.OutputThroughput},
			{"total_token_throughput", got.TotalTokenThroughput, want.TotalTokenThroughput},
			{"peak_output", got.PeakOutputThroughput, want.PeakOutputThroughput},
			{"peak_concurrency", got.PeakConcurrency, want.PeakConcurrency},
			{"ttft mean", got.TTFT.Mean, want.TTFT.Mean},
			{"ttft median", got.TTFT.Median, want.TTFT.Median},
			{"ttft std", got.TTFT.Std, want.TTFT.Std},
			{"tpot mean", got.TPOT.Mean, want.TPOT.Mean},
			{"itl mean", got.ITL.Mean, want.ITL.Mean},
			{"e2e mean", got.E2E.Mean, want.E2E.Mean},
		} {
			if c.got == nil || !near(*c.got, *c.want) {
				t.Errorf("%s: re-imported %s = %v, want %v", name, c.name, c.got, *c.want)
			}
		}
		for k, v := range want.TPOT.Percentiles {
			if g, ok := got.TPOT.Percentiles[k]; !ok || !near(g, v) {
				t.Errorf("%s: re-imported tpot %s = %v, want %v", name, k, g, v)
			}
		}
		if *got.Completed != *want.Completed || *got.TotalOutputTokens != *want.TotalOutputTokens || *got.NumPrompts != *want.NumPrompts {
			t.Errorf("%s: counts differ: %+v vs %+v", name, got, want)
		}
	}
	// The baseline file reads back with package baseline and interpolates.
	f, err := baseline.ReadFile(context.Background(), filepath.Join(dir, files.Baseline))
	if err != nil {
		t.Fatal(err)
	}
	b, ok := f.Lookup(rep.Name)
	if !ok || len(b.Points) != len(rep.Levels) || b.Source.Tool != Tool {
		t.Fatalf("baseline file: %+v", f.Baselines)
	}
	e, ok := b.Expected(1)
	if !ok || !near(e.TPOTMean, rep.Levels[0].Metrics.TPOT.Mean) {
		t.Errorf("Expected(1).TPOTMean = %v, want %v", e.TPOTMean, rep.Levels[0].Metrics.TPOT.Mean)
	}
	if !near(b.SaturationOutputThroughput(), math.Max(rep.Levels[0].Metrics.OutputThroughput, rep.Levels[1].Metrics.OutputThroughput)) {
		t.Errorf("saturation %v", b.SaturationOutputThroughput())
	}
	// The CSV has the multi-GPU presets report's columns and one row per level.
	data, err := os.ReadFile(filepath.Join(dir, files.CSV))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(rep.Levels) {
		t.Fatalf("%d CSV rows", len(rows))
	}
	for i, col := range []string{"Load Type", "Load", "Requests", "Prompt TPS", "Gen TPS", "Avg Latency (s)",
		"Request Generation Level TPS", "Request Prompt Level TPS", "Errors"} {
		if rows[0][i] != col {
			t.Errorf("CSV column %d = %q, want %q", i, rows[0][i], col)
		}
	}
	if rows[1][0] != "concurrency" || rows[1][1] != "1" || rows[1][2] != "4" || rows[1][8] != "0" || rows[1][3] == "" || rows[1][4] == "" {
		t.Errorf("CSV row 1 = %v", rows[1])
	}
	// Every chart is well-formed SVG.
	if len(files.Charts) != len(chartMetrics)+1 {
		t.Errorf("%d charts: %v", len(files.Charts), files.Charts)
	}
	for _, name := range files.Charts {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := wellFormedXML(data); err != nil || !bytes.HasPrefix(data, []byte("<svg ")) {
			t.Errorf("%s is not well-formed SVG: %v", name, err)
		}
	}
	for _, name := range files.Server {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}

func TestBenchPoissonRates(t *testing.T) {
	_, url := startSim(t, func(c *simulator.Config) { c.TTFT = 20 * time.Millisecond; c.ITL = 5 * time.Millisecond })
	rep, err := Run(context.Background(), Options{
		URL: url, Model: simModel, Requests: 6, RequestRates: []float64{50, math.Inf(1)}, Seed: 7,
		MaxTokens: 8, IgnoreEOS: true, Endpoint: config.ProberChat, RandomInputLen: 40, PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	inf := rep.Levels[1]
	if inf.Metrics.Completed != 6 || inf.Metrics.MaxConcurrentRequests != 6 {
		t.Errorf("rate inf: completed %d, peak concurrency %d, want every request at once", inf.Metrics.Completed, inf.Metrics.MaxConcurrentRequests)
	}
	// The simulator counts ceil(bytes/4) prompt tokens; the prompts are random words.
	if in := inf.Metrics.TotalInput; in < 6*20 || in > 6*80 {
		t.Errorf("total input tokens %d for 40-word prompts", in)
	}
	var rec map[string]any
	if err := json.Unmarshal(ServeJSON(rep, rep.Levels[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["request_rate"] != 50.0 || rec["max_concurrency"] != nil || rec["backend"] != "openai-chat" {
		t.Errorf("rate 50 JSON: request_rate %v max_concurrency %v backend %v", rec["request_rate"], rec["max_concurrency"], rec["backend"])
	}
	if err := json.Unmarshal(ServeJSON(rep, inf), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["request_rate"] != "inf" {
		t.Errorf("rate inf JSON: request_rate %v", rec["request_rate"])
	}
}

func TestBenchWaitsForModels(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := Run(context.Background(), Options{URL: srv.URL, Requests: 1, Concurrencies: []int{1}, ReadyTimeout: 1500 * time.Millisecond})
	want := "server not ready: /v1/models did not answer within 1.5s: GET /v1/models: HTTP 503"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if calls < 2 {
		t.Errorf("/v1/models polled %d times, want a retry every second", calls)
	}
}

func TestBenchOptionErrors(t *testing.T) {
	_, err := Run(context.Background(), Options{URL: "http://127.0.0.1:1", Concurrencies: []int{0}, RequestRates: []float64{-1},
		Endpoint: "embeddings", Prompt: "x", RandomInputLen: 3})
	want := "invalid benchmark options: endpoint \"embeddings\" is not a streamed probe kind (chat, completions, responses)\n" +
		"concurrency must be at least 1, got 0\nrequest rate must be positive or inf, got -1\n" +
		"give either a prompt or a random input length, not both"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %q", err, want)
	}
}

// TestBenchCancel stops a level in flight: Run returns promptly with the
// cancellation and every request it sent is cancelled at the server, long
// before the 3 s it would take to finish.
func TestBenchCancel(t *testing.T) {
	_, url := startSim(t, func(c *simulator.Config) { c.TTFT = 10 * time.Millisecond; c.ITL = 10 * time.Millisecond })
	serverLoad := func() int {
		resp, err := http.Get(url + "/load")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var load struct {
			ServerLoad int `json:"server_load"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&load); err != nil {
			t.Fatal(err)
		}
		return load.ServerLoad
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var rep *Report
	var err error
	start := time.Now()
	go func() {
		defer close(done)
		rep, err = Run(ctx, Options{URL: url, Requests: 3, RequestRates: []float64{math.Inf(1)}, MaxTokens: 300,
			IgnoreEOS: true, PollInterval: 50 * time.Millisecond})
	}()
	for serverLoad() < 3 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the requests never reached the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	cancelled := time.Now()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if !errors.Is(err, context.Canceled) || err.Error() != "request rate inf: interrupted: context canceled" {
		t.Fatalf("err = %v, want the level interrupted by context.Canceled", err)
	}
	if rep == nil || len(rep.Levels) != 0 {
		t.Fatalf("report after cancel: %+v", rep)
	}
	for serverLoad() != 0 {
		if time.Since(cancelled) > 2*time.Second {
			t.Fatalf("%d requests still running at the server 2s after cancellation", serverLoad())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readTrace returns the flush times of the token events of every request id.
func readTrace(t *testing.T, path string) map[string][]time.Time {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]time.Time{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct {
			RequestID string `json:"request_id"`
			Kind      string `json:"kind"`
			Token     int    `json:"token"`
			Time      int64  `json:"time_unix_nano"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		if ev.Kind == "token" {
			out[ev.RequestID] = append(out[ev.RequestID], time.Unix(0, ev.Time))
		}
	}
	return out
}

// TestBenchResponses: bench drives /v1/responses through the same compiled
// probe spec as the prober's responses modules: every request streams,
// counts its tokens from response.completed's usage, and keeps its whole
// text for --save-detailed.
func TestBenchResponses(t *testing.T) {
	_, url := startSim(t, func(c *simulator.Config) { c.TTFT, c.ITL = 20*time.Millisecond, 2*time.Millisecond })
	rep, err := Run(context.Background(), Options{
		URL: url, Endpoint: config.ProberResponses, Requests: 4, Concurrencies: []int{2}, MaxTokens: 8, IgnoreEOS: true,
		PollInterval: 100 * time.Millisecond, Name: "responses", SaveDetailed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	lr := rep.Levels[0]
	if lr.Metrics.Completed != 4 || lr.Metrics.TotalOutput != 32 {
		t.Fatalf("completed %d, output tokens %d; want 4 and 32", lr.Metrics.Completed, lr.Metrics.TotalOutput)
	}
	for i, r := range lr.Results {
		if !r.Success || !r.OutputTokensFromUsage || r.TTFT <= 0 || len(r.ITLs) != 7 {
			t.Errorf("request %d: success %v, tokens from usage %v, TTFT %v, %d ITLs", i, r.Success, r.OutputTokensFromUsage, r.TTFT, len(r.ITLs))
		}
		if lr.Texts[i] == "" {
			t.Errorf("request %d: no generated text kept", i)
		}
	}
}
