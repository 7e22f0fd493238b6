package daemon

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// burstConfig probes one simulator every 500ms within a token budget sized
// for the scheduled probes of the test only: a burst booked on it would make
// them skip. The bursts have a budget of their own.
const burstConfig = `
global:
  probe_interval: 500ms
  scrape_interval: 1s
  scrape_timeout: 500ms
  rate_window: 3s
  burst: {token_budget_per_hour: %d, max_probes: 40, max_within: 10s}
modules:
  m:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
    max_tokens: 8
targets:
  - {name: sim, url: %s, token_budget_per_hour: 700}
`

func newBurstFixture(t *testing.T, budget int) (*fixture, *countingSim) {
	t.Helper()
	sim := startCountingSim(t, func(c *simulator.Config) { c.TTFT, c.ITL = 5*time.Millisecond, time.Millisecond })
	f := &fixture{t: t}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, fmt.Sprintf(burstConfig, budget, sim.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 200})
	return f, sim
}

func (f *fixture) post(path, body string, header map[string]string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestBurst: a burst of N probes gives N more attempts, spread over its
// duration and recorded like scheduled probes; the scheduled probes never
// skip for budget because of it, although the burst alone spends more than
// the target's budget.
func TestBurst(t *testing.T) {
	f, sim := newBurstFixture(t, 100000)
	waitFor(t, 10*time.Second, "scheduled probes", func() bool {
		return sumSeries(t, f, "vllm_probe_attempts_total", `target="sim"`) >= 2
	})
	const n, within = 30, 1500 * time.Millisecond
	before := sumSeries(t, f, "vllm_probe_attempts_total", `target="sim"`)
	genBefore := sim.generations.Load()
	start := time.Now()
	code, body := f.post(fmt.Sprintf("/burst?target=sim&probes=%d&within=%s", n, within), "", nil)
	if code != http.StatusAccepted || !strings.Contains(body, `"probes":30`) {
		t.Fatalf("POST /burst = %d %s", code, body)
	}
	waitFor(t, within+10*time.Second, "the burst to finish", func() bool {
		return sumSeries(t, f, "vllm_probe_burst_probes_total", `target="sim"`) == n &&
			sumSeries(t, f, "vllm_probe_burst_pending_probes", `target="sim"`) == 0
	})
	took := time.Since(start)
	t.Logf("burst of %d within %s took %s", n, within, took)
	if lastStart := within * (n - 1) / n; took < lastStart {
		t.Errorf("the burst took %s: its probes were not spread over %s", took, within)
	}
	// The upper bound leaves room for a loaded machine (took includes polling
	// /metrics and the last probe's own time) but still catches probes spaced
	// by more than within/n: spaced by within itself, 30 probes take 45s.
	if took > within+5*time.Second {
		t.Errorf("the burst took %s, not within %s", took, within)
	}
	after := sumSeries(t, f, "vllm_probe_attempts_total", `target="sim"`)
	gen := sim.generations.Load() - genBefore
	if got := after - before; got < n {
		t.Errorf("attempts grew by %v during the burst, want at least %d", got, n)
	}
	if int64(after-before) < gen-1 || int64(after-before) > gen+1 {
		t.Errorf("attempts grew by %v, the simulator got %d generation requests", after-before, gen)
	}
	// The schedule goes on: two more scheduled probes run (or skip).
	waitFor(t, 10*time.Second, "two more scheduled probes", func() bool {
		return sumSeries(t, f, "vllm_probe_attempts_total", `target="sim"`) >= after+2 ||
			sumSeries(t, f, "vllm_probe_skipped_total", `reason="budget"`) > 0
	})
	if v := sumSeries(t, f, "vllm_probe_skipped_total", `reason="budget"`); v != 0 {
		t.Errorf("the scheduled probes skipped %v times for budget during the burst", v)
	}
	if v := sumSeries(t, f, "vllm_probe_burst_requests_total", `result="accepted"`); v != 1 {
		t.Errorf("accepted bursts %v", v)
	}
	if v := gauge(t, f, "vllm_probe_burst_tokens_total"); v == "0" {
		t.Error("the burst spent no tokens")
	}
	_, metrics := f.get("/metrics")
	for _, m := range []string{"vllm_probe_burst_requests_total", "vllm_probe_burst_probes_total", "vllm_probe_burst_pending_probes",
		"vllm_probe_burst_tokens_total", "vllm_probe_burst_budget_remaining_tokens"} {
		if !strings.Contains(metrics, "# HELP "+m+" ") {
			t.Errorf("/metrics has no HELP for %s", m)
		}
	}

	// Flagger's rollout webhook: the payload's metadata names the burst.
	code, body = f.post("/burst", `{"name":"podinfo","namespace":"test","phase":"Progressing","metadata":{"target":"sim","probes":"2","within":"0s"}}`, nil)
	if code != http.StatusAccepted {
		t.Errorf("Flagger payload: %d %s", code, body)
	}
}

// TestBurstNeverSkipsScheduled: back-to-back burst probes (within 0s) fill
// the pair's in-flight slot for several probe intervals; every scheduled
// probe that falls due meanwhile still runs (after the burst probe in
// flight, before the burst's next), and none skips: vllm_probe_skipped_total
// stays 0.
func TestBurstNeverSkipsScheduled(t *testing.T) {
	sim := startCountingSim(t, func(c *simulator.Config) { c.TTFT, c.ITL = 60*time.Millisecond, 2*time.Millisecond })
	f := &fixture{t: t}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, fmt.Sprintf(burstConfig, 100000, sim.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 200})
	waitFor(t, 10*time.Second, "scheduled probes", func() bool {
		return sumSeries(t, f, "vllm_probe_attempts_total", `target="sim"`) >= 2
	})
	const n = 40
	before := sumSeries(t, f, "vllm_probe_attempts_total", `target="sim"`)
	start := time.Now()
	if code, body := f.post(fmt.Sprintf("/burst?target=sim&probes=%d&within=0s", n), "", nil); code != http.StatusAccepted {
		t.Fatalf("POST /burst = %d %s", code, body)
	}
	waitFor(t, 60*time.Second, "the burst to finish", func() bool {
		return sumSeries(t, f, "vllm_probe_burst_probes_total", `target="sim"`) == n &&
			sumSeries(t, f, "vllm_probe_burst_pending_probes", `target="sim"`) == 0
	})
	took := time.Since(start)
	scheduled := sumSeries(t, f, "vllm_probe_attempts_total", `target="sim"`) - before - n
	t.Logf("burst of %d back to back took %s; %v scheduled probes ran meanwhile", n, took, scheduled)
	if took < time.Second {
		t.Fatalf("the burst took %s: it did not fill the slot over two probe intervals of 500ms", took)
	}
	if scheduled < 1 {
		t.Errorf("no scheduled probe ran during a burst of %s", took)
	}
	if v := sumSeries(t, f, "vllm_probe_skipped_total", `target="sim"`); v != 0 {
		_, m := f.get("/metrics")
		t.Errorf("scheduled probes skipped %v times during the burst:\n%s", v, grepLines(m, "vllm_probe_skipped_total"))
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestBurstRefused: bursts over the limits, over the budget, with bursts
// off, by GET or from another site are refused, each saying why.
func TestBurstRefused(t *testing.T) {
	f, _ := newBurstFixture(t, 200)
	for _, c := range []struct {
		name, path string
		header     map[string]string
		code       int
		want       string
	}{
		{"too many probes", "/burst?target=sim&probes=41&within=1s", nil, http.StatusBadRequest, "global.burst.max_probes allows 1 to 40"},
		{"too long", "/burst?target=sim&probes=2&within=1h", nil, http.StatusBadRequest, "global.burst.max_within allows up to 10s"},
		{"over budget", "/burst?target=sim&probes=40&within=1s", nil, http.StatusTooManyRequests, "of global.burst.token_budget_per_hour 200 are left"},
		{"unknown target", "/burst?target=nope&probes=1", nil, http.StatusBadRequest, `unknown target "nope"`},
		{"bad count", "/burst?target=sim&probes=many", nil, http.StatusBadRequest, `probes "many"`},
		{"cross-site", "/burst?target=sim&probes=1", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "cross-site request refused"},
		{"other origin", "/burst?target=sim&probes=1", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "cross-site request refused"},
	} {
		code, body := f.post(c.path, "", c.header)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: POST %s = %d %q, want %d with %q", c.name, c.path, code, body, c.code, c.want)
		}
	}
	if code, _ := f.get("/burst?target=sim&probes=1"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /burst = %d, want 405", code)
	}
	if v := sumSeries(t, f, "vllm_probe_burst_requests_total", `result="refused"`); v != 3 {
		t.Errorf("refused bursts counted %v, want 3 (the guard and bad parameters stop the others first)", v)
	}
	if v := sumSeries(t, f, "vllm_probe_burst_probes_total", ""); v != 0 {
		t.Errorf("refused bursts ran %v probes", v)
	}
}

// TestBurstOffByDefault: without global.burst.token_budget_per_hour POST
// /burst is refused.
func TestBurstOffByDefault(t *testing.T) {
	f, _ := newBurstFixture(t, 0)
	code, body := f.post("/burst?target=sim&probes=1", "", nil)
	if code != http.StatusForbidden || !strings.Contains(body, "bursts are off") {
		t.Errorf("POST /burst with bursts off = %d %q", code, body)
	}
}
