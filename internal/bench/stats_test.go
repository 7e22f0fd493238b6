package bench

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

var update = flag.Bool("update", false, "rewrite golden files")

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestSummarizePopulationStd(t *testing.T) {
	// numpy: mean 5, np.std (ddof=0) of [2,4,4,4,5,5,7,9] = 2.
	d := Summarize([]float64{9, 2, 4, 4, 5, 4, 5, 7}, []float64{99})
	if d.N != 8 || d.Mean != 5 || d.Std != 2 || d.Median != 4.5 || d.Min != 2 || d.Max != 9 {
		t.Fatalf("Summarize = %+v", d)
	}
	// h = 7*0.99 = 6.93: 7 + 0.93*2
	if !near(d.Percentiles[0], 8.86) {
		t.Errorf("p99 = %v, want 8.86", d.Percentiles[0])
	}
	if e := Summarize(nil, []float64{50, 99}); e.Mean != 0 || e.Std != 0 || e.Percentiles[1] != 0 || e.N != 0 {
		t.Errorf("empty Summarize = %+v, want zeros", e)
	}
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// handResults are four requests whose aggregate is computed by hand below.
func handResults() []probe.Result {
	t0 := time.Unix(1700000000, 0)
	return []probe.Result{
		{Start: t0, Success: true, TTFT: ms(100), E2E: ms(500), OutputTokens: 5, PromptTokens: 10,
			ITLs: []time.Duration{ms(100), ms(100), ms(100), ms(100)}},
		{Start: t0.Add(ms(50)), Success: true, TTFT: ms(200), E2E: ms(200), OutputTokens: 1, PromptTokens: 20},
		{Start: t0.Add(ms(600)), Success: true, TTFT: ms(300), E2E: ms(700), OutputTokens: 3, PromptTokens: 30,
			ITLs: []time.Duration{ms(150), ms(250)}},
		{Start: t0.Add(ms(700)), Success: false, Reason: probe.ReasonHTTP5xx, StatusCode: 500,
			Err: "HTTP 500 InternalServerError: EngineCore encountered an issue."},
	}
}

func TestCalculateMatchesHandComputation(t *testing.T) {
	m := Calculate(handResults(), 2*time.Second, []float64{99})
	if m.Completed != 3 || m.Failed != 1 || len(m.Failures) != 1 || m.Failures[0].Class() != "http_5xx (HTTP 500)" || m.Failures[0].Count != 1 {
		t.Fatalf("completed/failed = %d/%d, failures %+v", m.Completed, m.Failed, m.Failures)
	}
	if m.TotalInput != 60 || m.TotalOutput != 9 {
		t.Errorf("tokens in/out = %d/%d, want 60/9", m.TotalInput, m.TotalOutput)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"request_throughput", m.RequestThroughput, 1.5},
		{"output_throughput", m.OutputThroughput, 4.5},
		{"total_token_throughput", m.TotalTokenThroughput, 34.5},
		{"mean ttft", m.TTFT.Mean, 0.2},
		{"median ttft", m.TTFT.Median, 0.2},
		{"std ttft", m.TTFT.Std, math.Sqrt(0.02 / 3)},
		{"p99 ttft", m.TTFT.Percentiles[0], 0.298}, // h=1.98: 0.2+0.98*0.1
		// TPOT per request: (0.5-0.1)/4 = 0.1, the one-token request is left out, (0.7-0.3)/2 = 0.2.
		{"mean tpot", m.TPOT.Mean, 0.15},
		{"p99 tpot", m.TPOT.Percentiles[0], 0.199},
		{"tpot n", float64(m.TPOT.N), 2},
		// ITL pools all six gaps: 0.1 x4, 0.15, 0.25.
		{"mean itl", m.ITL.Mean, 0.8 / 6},
		{"median itl", m.ITL.Median, 0.1},
		{"p99 itl", m.ITL.Percentiles[0], 0.245}, // h=4.95: 0.15+0.95*0.1
		{"mean e2e", m.E2E.Mean, 1.4 / 3},
		// Per-request TPS: 5/0.5=10, 1/0.2=5, 3/0.7; prompt 10/0.5=20, 20/0.2=100, 30/0.7.
		{"request gen tps", m.OutputTPSPerRequest.Mean, (10 + 5 + 3/0.7) / 3},
		{"request prompt tps", m.InputTPSPerRequest.Mean, (20 + 100 + 30/0.7) / 3},
		// Token times from t0: r1 0.1..0.5 (5 in second 0), r2 0.25, r3 0.9, 1.05, 1.3: second 0 has 7.
		{"peak output tokens/s", m.MaxOutputTokensPerS, 7},
		// In flight: r1 [0,0.5), r2 [0.05,0.25), r3 [0.6,1.3): peak 2.
		{"peak concurrency", float64(m.MaxConcurrentRequests), 2},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestCalculateAllFailed(t *testing.T) {
	m := Calculate([]probe.Result{{Reason: probe.ReasonConnection}, {Reason: probe.ReasonConnection}}, time.Second, []float64{99})
	if m.Completed != 0 || m.Failed != 2 || m.OutputThroughput != 0 || m.TTFT.Mean != 0 || m.MaxConcurrentRequests != 0 {
		t.Fatalf("all-failed metrics = %+v", m)
	}
}

func goldenLevel() *LevelResult {
	m := Calculate(handResults(), 2*time.Second, []float64{90, 99})
	return &LevelResult{Level: Level{LoadConcurrency, 4}, Metrics: m}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestWriteSummaryGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSummary(&buf, goldenLevel(), []float64{90, 99}); err != nil {
		t.Fatal(err)
	}
	rate := goldenLevel()
	rate.Level = Level{LoadRequestRate, 16}
	if err := WriteSummary(&buf, rate, []float64{90, 99}); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "summary.golden", buf.Bytes())
}

func TestCenterLikePython(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{" Serving Benchmark Result ", "============ Serving Benchmark Result ============"},
		{"Time to First Token", "---------------Time to First Token----------------"},
		{"Time per Output Token (excl. 1st token)", "-----Time per Output Token (excl. 1st token)------"},
		{"Inter-token Latency", "---------------Inter-token Latency----------------"},
		{"End-to-end Latency", "----------------End-to-end Latency----------------"},
	} {
		fill := byte('-')
		if c.s[0] == ' ' {
			fill = '='
		}
		if got := center(c.s, 50, fill); got != c.want {
			t.Errorf("center(%q) = %q, want %q", c.s, got, c.want)
		}
	}
}

func TestArrivalsPoisson(t *testing.T) {
	a := arrivals(4, 4001, 42)
	b := arrivals(4, 4001, 42)
	if a[0] != 0 {
		t.Errorf("first arrival at %v, want 0", a[0])
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("arrivals differ at %d with the same seed", i)
		}
	}
	mean := a[len(a)-1].Seconds() / float64(len(a)-1)
	if math.Abs(mean-0.25) > 0.25*0.06 {
		t.Errorf("mean gap %.4fs at rate 4, want 0.25s", mean)
	}
	if c := arrivals(4, 10, 43); c[5] == a[5] {
		t.Errorf("another seed gave the same arrivals")
	}
	for _, d := range arrivals(math.Inf(1), 5, 1) {
		if d != 0 {
			t.Fatalf("rate inf must send everything at once, got %v", d)
		}
	}
}

func TestProgressBar(t *testing.T) {
	// A terminal gets schollz/progressbar's bar, redrawn in place, with the failures in its description.
	var buf bytes.Buffer
	p := newProgress(&buf, true, "concurrency 4", 4)
	p.add(false)
	p.add(true)
	p.add(false)
	p.add(false)
	p.finish(4)
	out := buf.String()
	if !strings.Contains(out, "\r") || !strings.HasSuffix(out, "\n") {
		t.Errorf("bar output %q: want carriage-return redraws and a final newline", out)
	}
	last := out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\r")+1:]
	for _, want := range []string{"concurrency 4 (1 failed)", "100%", "(4/4"} {
		if !strings.Contains(last, want) {
			t.Errorf("last draw %q lacks %q", last, want)
		}
	}
	// Anything else gets one quiet line per level.
	buf.Reset()
	q := newProgress(&buf, false, "request rate inf", 3)
	q.add(true)
	q.add(false)
	q.finish(2)
	if got := buf.String(); !strings.HasPrefix(got, "request rate inf: 2/3 requests in ") || !strings.HasSuffix(got, ", 1 failed\n") ||
		strings.Count(got, "\n") != 1 || strings.Contains(got, "\r") {
		t.Errorf("quiet output %q", got)
	}
	silent := newProgress(nil, true, "x", 1)
	silent.add(false)
	silent.finish(1) // no writer: nothing to do, no panic
}

func TestServeJSONGolden(t *testing.T) {
	rep := &Report{Name: "golden", Model: "meta-llama/Llama-3.1-8B-Instruct", Endpoint: "completions",
		Date: time.Date(2025, 9, 1, 10, 15, 0, 0, time.Local), Percentiles: []float64{90, 99}}
	lr := goldenLevel()
	lr.Results = handResults()
	lr.Start = lr.Results[0].Start.Add(-ms(10))
	lr.Metrics = Calculate(lr.Results, 2*time.Second, rep.Percentiles)
	rep.Levels = []*LevelResult{lr}
	checkGolden(t, "serve.golden.json", ServeJSON(rep, lr))
	rep.SaveDetailed = true
	// generated_texts as vLLM's json.dump writes them (ensure_ascii); the
	// failed request's text is what came before the failure.
	lr.Texts = []string{" architecture patterns", "é", " naïve café 😀\n\"quoted\"", "partial"}
	checkGolden(t, "serve-detailed.golden.json", ServeJSON(rep, lr))
}

func TestPyStringLikePython(t *testing.T) {
	var b bytes.Buffer
	pyString(&b, "é<>&\n\x01\x7f😀\"\\")
	// python3 -c 'import json; print(json.dumps("é<>&\n\x01\x7f😀\"\\"))'
	if want := `"\u00e9<>&\n\u0001\u007f\ud83d\ude00\"\\"`; b.String() != want {
		t.Errorf("pyString = %s, want %s", b.String(), want)
	}
}
