package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// checkSim starts a vllm_sim with its defaults (those
// examples/baselines/vllm-sim-default.yml was measured on) and returns its URL.
func checkSim(t *testing.T) string {
	t.Helper()
	sim, err := simulator.New(simulator.DefaultConfig(), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { ts.Close(); sim.Close() })
	return ts.URL
}

// simAdmin changes a running simulator's settings through its admin API.
func simAdmin(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post(url+"/admin/config", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s/admin/config %s: %s", url, body, resp.Status)
	}
}

const checkBaseline = "../../examples/baselines/vllm-sim-default.yml"

// TestCheckExitCodes runs `vllm_prober check` against real simulators: pass on
// an unchanged server, fail with its ITL tripled, inconclusive when every
// probe fails, usage error on bad input; against a baseline and against a
// reference endpoint. Each prints its verdict table.
func TestCheckExitCodes(t *testing.T) {
	canary, stable := checkSim(t), checkSim(t)
	probes := []string{"--probes=4", "--threshold.min-successes=3"}
	bad := filepath.Join(t.TempDir(), "bad.yml")
	if err := os.WriteFile(bad, []byte("targets: [{name: x, url: 'not a url'}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		admin string // POSTed to the canary's /admin/config first
		args  []string
		want  int
		table []string // lines the output must contain
	}{
		{name: "baseline, unchanged", args: []string{"--url=" + canary, "--baseline=" + checkBaseline}, want: 0,
			table: []string{"against baseline vllm-sim-default at concurrency 1 (running + waiting + 1 from its /metrics): PASS", "METRIC", "TTFT", "TPOT", "ITL", "E2E", "success ratio", "4 probes, 4 successful"}},
		{name: "baseline, ITL tripled", admin: `{"itl":"30ms"}`, args: []string{"--url=" + canary, "--baseline=" + checkBaseline}, want: 1,
			table: []string{": FAIL", "itl ratio", "ITL ", "fail"}},
		{name: "baseline, every probe fails", admin: `{"fault":"http_status"}`, args: []string{"--url=" + canary, "--baseline=" + checkBaseline}, want: 2,
			table: []string{": INCONCLUSIVE", "0 successful probes of 4, fewer than the 3 needed", "4 probes, 0 successful"}},
		{name: "reference, equal", args: []string{"--url=" + canary, "--reference=" + stable}, want: 0,
			table: []string{"against reference reference: PASS", "TTFT"}},
		{name: "reference, ITL tripled", admin: `{"itl":"30ms"}`, args: []string{"--url=" + canary, "--reference=" + stable}, want: 1,
			table: []string{"against reference reference: FAIL", "tpot ratio"}},
		{name: "reference, every probe fails", admin: `{"fault":"http_status"}`, args: []string{"--url=" + canary, "--reference=" + stable}, want: 2,
			table: []string{": INCONCLUSIVE"}},
		{name: "reference fails", args: []string{"--url=" + canary, "--reference=http://127.0.0.1:1"}, want: 2,
			table: []string{"the reference had 0 successful probes"}},
		{name: "bad config", args: []string{"--config.file=" + bad, "--target=x"}, want: 3},
		{name: "no comparison", args: []string{"--url=" + canary}, want: 3},
		{name: "unknown flag", args: []string{"--url=" + canary, "--bogus"}, want: 3},
		{name: "bad threshold", args: []string{"--url=" + canary, "--baseline=" + checkBaseline, "--threshold.success-ratio=2"}, want: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			simAdmin(t, canary, `{"itl":"10ms","fault":""}`)
			if c.admin != "" {
				simAdmin(t, canary, c.admin)
			}
			code, out, errOut := runCLI(t, append(append([]string{"check"}, probes...), c.args...)...)
			t.Logf("exit %d\n%s%s", code, out, errOut)
			if code != c.want {
				t.Fatalf("exit code %d, want %d", code, c.want)
			}
			for _, l := range c.table {
				if !strings.Contains(out, l) {
					t.Errorf("output lacks %q", l)
				}
			}
			if c.want == 3 && !strings.HasPrefix(errOut, "vllm_prober") {
				t.Errorf("usage error without a message on stderr: %q", errOut)
			}
		})
	}
}

// TestCheckJSON: --format json carries the same verdict for machines.
func TestCheckJSON(t *testing.T) {
	canary := checkSim(t)
	code, out, errOut := runCLI(t, "check", "--probes=3", "--url="+canary, "--baseline="+checkBaseline, "--format=json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var v struct {
		Verdict    string
		Probes     int
		Successful int `json:"successful_probes"`
		Thresholds struct {
			LatencyRatio float64 `json:"latency_ratio"`
			SuccessRatio float64 `json:"success_ratio"`
			MinSuccesses int     `json:"min_successes"`
		}
		Metrics []struct {
			Metric                    string
			Expected, Measured, Ratio *float64
			Result                    string
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v.Verdict != "pass" || v.Probes != 3 || v.Successful != 3 || v.Thresholds.LatencyRatio != 1.2 || v.Thresholds.MinSuccesses != 3 {
		t.Errorf("verdict %+v", v)
	}
	var names []string
	for _, m := range v.Metrics {
		names = append(names, m.Metric)
		if m.Measured == nil || m.Ratio == nil || m.Result != "pass" {
			t.Errorf("metric %s: measured %v ratio %v result %q", m.Metric, m.Measured, m.Ratio, m.Result)
		}
	}
	if got := strings.Join(names, ","); got != "ttft,tpot,itl,e2e,success_ratio" {
		t.Errorf("metrics %s", got)
	}
}

// loadSim keeps n streaming completions running against url until stop.
func loadSim(t *testing.T, url string, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions",
					strings.NewReader(`{"prompt":"load","max_tokens":100,"ignore_eos":true,"stream":true}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// TestCheckUnderLoad: on a busy endpoint (20 streams: the simulator's ITL
// grows 2 % per running request) the baseline is read at the load each probe
// met, from the endpoint's /metrics, as the daemon compares: the per-token
// latencies match it. Read at concurrency 1, as for an idle endpoint, the
// same endpoint fails on them. (TTFT is left out of the comparison here: on
// a loaded machine, under -race, the in-process load moves it.)
func TestCheckUnderLoad(t *testing.T) {
	url := checkSim(t)
	stop := loadSim(t, url, 20)
	defer stop()
	time.Sleep(500 * time.Millisecond) // the streams are running
	for _, c := range []struct {
		conc       string
		against    string
		minR, maxR float64 // TPOT and ITL ratios
	}{
		{"auto", "(running + waiting + 1 from its /metrics)", 0.85, 1.15},
		{"1", "at concurrency 1", 1.25, 2},
	} {
		code, out, errOut := runCLI(t, "check", "--probes=4", "--url="+url, "--baseline="+checkBaseline,
			"--baseline.concurrency="+c.conc, "--format=json")
		t.Logf("--baseline.concurrency=%s: exit %d\n%s%s", c.conc, code, out, errOut)
		var v struct {
			Against string
			Metrics []struct {
				Metric string
				Ratio  *float64
			}
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(v.Against, c.against) {
			t.Errorf("--baseline.concurrency=%s: against %q, want %q", c.conc, v.Against, c.against)
		}
		for _, m := range v.Metrics {
			if m.Metric != "tpot" && m.Metric != "itl" {
				continue
			}
			if m.Ratio == nil || *m.Ratio < c.minR || *m.Ratio > c.maxR {
				t.Errorf("--baseline.concurrency=%s: %s ratio %v, want between %v and %v", c.conc, m.Metric, m.Ratio, c.minR, c.maxR)
			}
		}
		if c.conc == "1" && code != 1 {
			t.Errorf("--baseline.concurrency=1 on a busy endpoint: exit %d, want 1", code)
		}
	}
	if code, _, errOut := runCLI(t, "check", "--url="+url, "--baseline="+checkBaseline, "--baseline.concurrency=lots"); code != 3 || !strings.Contains(errOut, "neither auto nor a positive number") {
		t.Errorf("--baseline.concurrency=lots: exit %d %q", code, errOut)
	}
}

// TestCheckGatewayMembers: `check` of a gateway target (real HAProxy in
// front of three simulators) probes its members too. With one canary member
// twice as slow as the others, the gateway's average TTFT passes a 1.5
// latency ratio against the baseline, yet the check fails with a sentence
// naming the member; with the members alike it passes.
func TestCheckGatewayMembers(t *testing.T) {
	urls := map[string]string{"m1": checkSim(t), "m2": checkSim(t), "m3": checkSim(t)}
	var servers []string
	for _, n := range []string{"m1", "m2", "m3"} {
		servers = append(servers, n+" "+strings.TrimPrefix(urls[n], "http://"))
	}
	port := testtool.HAProxyBalancer(t, servers, "", "")
	cfg := filepath.Join(t.TempDir(), "vllm_prober.yml")
	baseline, err := filepath.Abs(checkBaseline)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
baselines: [{name: sim, file: %q}]
modules:
  check: {prober: completions, prompt: "Let's explore some architecture patterns for microservices", max_tokens: 8}
targets:
  - {name: m1, url: %q}
  - {name: m2, url: %q}
  - {name: m3, url: %q}
  - name: gw
    url: http://127.0.0.1:%d
    scrape_metrics: false
    baseline: sim
    gateway: {members: [m1, m2, m3], member_header: X-Served-By}
`, baseline, urls["m1"], urls["m2"], urls["m3"], port)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"check", "--config.file=" + cfg, "--target=gw", "--probes=6", "--threshold.min-successes=3",
		"--threshold.latency-ratio=1.5", "--baseline.concurrency=1"}
	code, out, errOut := runCLI(t, args...)
	t.Logf("members alike: exit %d\n%s%s", code, out, errOut)
	if code != 0 {
		t.Errorf("members alike: exit %d, want 0 (pass)", code)
	}

	simAdmin(t, urls["m3"], `{"ttft":"100ms"}`)
	code, out, errOut = runCLI(t, args...)
	t.Logf("m3 twice as slow: exit %d\n%s%s", code, out, errOut)
	if code != 1 {
		t.Errorf("m3 twice as slow: exit %d, want 1 (fail)", code)
	}
	if !strings.Contains(out, "member m3 of the gateway answers its direct probes with a median TTFT") {
		t.Errorf("the verdict does not name m3:\n%s", out)
	}
	if !regexp.MustCompile(`TTFT\s+\S+\s+\S+\s+\S+\s+<= 1.5\s+pass`).MatchString(out) {
		t.Errorf("the gateway's own TTFT row does not pass, so the test does not show the member failing it alone:\n%s", out)
	}
}

// TestCheckGateVantages: check's path to the canary is cut (connection
// refused), so alone it cannot judge it (exit 2); with --gate.vantage naming
// another vantage's replica whose /gate passes the canary, the verdict over
// both vantages passes (exit 0) and says check's vantage could not judge;
// when that vantage fails it too, the verdict stays inconclusive. The other
// replica is a real HTTP server answering /gate as vllm_prober does, and is
// asked for its own verdict (local=true) on the same target and reference.
func TestCheckGateVantages(t *testing.T) {
	stable := checkSim(t)
	var verdict sync.Mutex
	answer := `{"verdict":"pass","reason":"every ratio within the thresholds (4 latencies compared)"}`
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/gate" || q.Get("local") != "true" || q.Get("target") != "canary" || q.Get("reference") != "stable" || q.Get("module") != "m" {
			http.Error(w, "unexpected question "+r.URL.String(), http.StatusBadRequest)
			return
		}
		verdict.Lock()
		defer verdict.Unlock()
		fmt.Fprintln(w, answer)
	}))
	defer peer.Close()
	cfg := filepath.Join(t.TempDir(), "prober.yml")
	if err := os.WriteFile(cfg, []byte(`modules:
  m: {prober: completions, prompt: "Say hello.", max_tokens: 8}
targets:
  - {name: canary, url: "http://127.0.0.1:1", scrape_metrics: false}
  - {name: stable, url: "`+stable+`", scrape_metrics: false}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"check", "--config.file=" + cfg, "--target=canary", "--reference=stable", "--probes=4", "--threshold.min-successes=3", "--vantage=here"}
	for _, c := range []struct {
		name, answer string
		extra        []string
		want         int
		says         string
	}{
		{"alone", "", nil, 2, ": INCONCLUSIVE"},
		{"another vantage passes it", answer, []string{"--gate.vantage=eu=" + peer.URL}, 0, "passes from eu"},
		{"another vantage fails it", `{"verdict":"fail","reason":"tpot ratio 3 > 1.2"}`, []string{"--gate.vantage=eu=" + peer.URL}, 2, "fails from eu, not judged from here"},
	} {
		t.Run(c.name, func(t *testing.T) {
			verdict.Lock()
			if c.answer != "" {
				answer = c.answer
			}
			verdict.Unlock()
			code, out, errOut := runCLI(t, append(slicesClone(args), c.extra...)...)
			t.Logf("exit %d\n%s%s", code, out, errOut)
			if code != c.want || !strings.Contains(out, c.says) {
				t.Errorf("exit %d, want %d, and output saying %q", code, c.want, c.says)
			}
		})
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
