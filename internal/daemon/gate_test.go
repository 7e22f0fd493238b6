package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// countingSim is an in-process vllm_sim with its defaults that counts the
// generation requests it receives.
type countingSim struct {
	*httptest.Server
	generations atomic.Int64
}

func startCountingSim(t *testing.T, mutate func(*simulator.Config)) *countingSim {
	t.Helper()
	cfg := simulator.DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	s := &countingSim{}
	h := sim.Handler()
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/completions") || strings.HasPrefix(r.URL.Path, "/v1/chat") {
			s.generations.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.Close()
		_ = sim.Close()
	})
	return s
}

func (s *countingSim) admin(t *testing.T, body string) {
	t.Helper()
	resp, err := http.Post(s.URL+"/admin/config", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin %s: %s", body, resp.Status)
	}
}

type gateAnswer struct {
	Verdict    string
	Reason     string
	Against    string
	Probes     int
	Successful int `json:"successful_probes"`
	Metrics    []struct {
		Metric                    string
		Expected, Measured, Ratio *float64
		Result                    string
	}
}

// waitGate waits up to 20 s for /gate?query to answer status want with a
// reason holding every one of reason, and returns that answer.
func (f *fixture) waitGate(query string, want int, reason ...string) gateAnswer {
	f.t.Helper()
	var a gateAnswer
	waitFor(f.t, 20*time.Second, fmt.Sprintf("/gate?%s to answer %d %v", query, want, reason), func() bool {
		var code int
		code, a = f.gate(query)
		for _, r := range reason {
			if !strings.Contains(a.Reason, r) {
				return false
			}
		}
		return code == want
	})
	f.t.Logf("/gate?%s: %d %s (%s): %d of %d probes", query, want, a.Verdict, a.Reason, a.Successful, a.Probes)
	return a
}

func (f *fixture) gate(query string) (int, gateAnswer) {
	f.t.Helper()
	code, body := f.get("/gate?" + query)
	var a gateAnswer
	if code == http.StatusOK || code == http.StatusServiceUnavailable {
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			f.t.Fatalf("/gate?%s: %d %v\n%s", query, code, err, body)
		}
	} else {
		a.Reason = body
	}
	return code, a
}

const gateConfig = `
global:
  probe_interval: 500ms
  scrape_interval: 250ms
  scrape_timeout: 200ms
  rate_window: 1s
modules:
  m:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
    max_tokens: 8
baselines:
  - {name: vllm-sim-default, file: %s}
targets:
  - {name: canary, url: %s, baseline: vllm-sim-default, labels: {group: g, track: canary}}
  - {name: stable, url: %s, labels: {group: g, track: stable}}
  - {name: multi, url: %[3]s, models: all, probe_interval: 1h}
`

func newGateFixture(t *testing.T) (*fixture, *countingSim, *countingSim) {
	t.Helper()
	canary, stable := startCountingSim(t, nil), startCountingSim(t, nil)
	base, err := filepath.Abs("../../examples/baselines/vllm-sim-default.yml")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, fmt.Sprintf(gateConfig, base, canary.URL, stable.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 100})
	return f, canary, stable
}

// TestGateFlips: /gate answers 200 while the target passes, 503 once a fault
// is injected (its probes fail), 200 again once the fault is removed and the
// window has slid past it; against the baseline and against a reference. It
// reads the recorded probes only: a hundred calls send the simulators no
// generation request beyond the scheduled probes'.
func TestGateFlips(t *testing.T) {
	f, canary, _ := newGateFixture(t)
	// A latency ratio of 1.5: the simulators' 50ms TTFT moves by tens of
	// percent on a loaded 2-core machine; a tripled ITL is 3.
	const q = "target=canary&window=3s&latency_ratio=1.5"
	wait := f.waitGate
	a := wait(q, http.StatusOK)
	if a.Verdict != "pass" || a.Against != "baseline vllm-sim-default" || a.Successful < 3 || len(a.Metrics) != 5 {
		t.Errorf("passing verdict %+v", a)
	}
	wait(q+"&reference=stable", http.StatusOK)

	canary.admin(t, `{"fault":"http_status"}`)
	a = wait(q, http.StatusServiceUnavailable, "success ratio")
	if a.Verdict == "pass" {
		t.Errorf("503 with verdict %+v", a)
	}
	wait(q+"&reference=stable", http.StatusServiceUnavailable, "success ratio")
	if code, a := f.gate(q + "&always_200=true"); code != http.StatusOK || a.Verdict == "pass" {
		t.Errorf("always_200=true: %d %+v, want 200 with the failing verdict", code, a)
	}
	canary.admin(t, `{"fault":""}`)
	wait(q, http.StatusOK)

	// A regression rather than failures: the canary's ITL tripled fails the
	// gate against the stable target, with the per-token rows failing.
	canary.admin(t, `{"itl":"30ms"}`)
	a = wait(q+"&reference=stable", http.StatusServiceUnavailable, "itl ratio")
	if a.Verdict != "fail" {
		t.Errorf("tripled ITL: %+v", a)
	}
	canary.admin(t, `{"itl":"10ms"}`)
	wait(q+"&reference=stable", http.StatusOK)

	// No tokens: between two reads of the counters, the simulators got
	// exactly the generation requests the scheduled probes made.
	before := canary.generations.Load()
	attemptsBefore := sumSeries(t, f, "vllm_probe_attempts_total", `target="canary"`)
	for range 100 {
		f.gate(q)
		f.gate(q + "&reference=stable")
	}
	extra := canary.generations.Load() - before - int64(sumSeries(t, f, "vllm_probe_attempts_total", `target="canary"`)-attemptsBefore)
	if extra > 1 || extra < -1 { // one scheduled probe may be in flight at either read
		t.Errorf("200 gate calls sent %d generation requests beyond the scheduled probes'", extra)
	}

	// Bad requests say what is wrong.
	for _, c := range []struct{ query, want string }{
		{"", "target parameter is missing"},
		{"target=nope", `unknown target "nope"`},
		{"target=stable", "has no baseline"},
		{"target=canary&reference=nope", `unknown reference target "nope"`},
		{"target=canary&window=soon", `window "soon"`},
		{"target=canary&latency_ratio=-1", "latency ratio threshold"},
		{"target=multi", "probes several models"},
	} {
		code, a := f.gate(c.query)
		if code != http.StatusBadRequest || !strings.Contains(a.Reason, c.want) {
			t.Errorf("/gate?%s = %d %q, want 400 with %q", c.query, code, a.Reason, c.want)
		}
	}
}

// TestGateInconclusive: without enough successful probes in the window
// the gate answers 503 with an inconclusive verdict, never a pass.
func TestGateInconclusive(t *testing.T) {
	f, canary, _ := newGateFixture(t)
	canary.admin(t, `{"fault":"http_status"}`)
	waitFor(t, 10*time.Second, "failed probes", func() bool {
		return sumSeries(t, f, "vllm_probe_attempts_total", `target="canary"`) >= 2
	})
	code, a := f.gate("target=canary&window=1h&min_successes=3")
	if code != http.StatusServiceUnavailable || a.Verdict != "inconclusive" || !strings.Contains(a.Reason, "fewer than the 3 needed") {
		t.Errorf("all probes failing: %d %+v", code, a)
	}
}

// sumSeries sums the samples of metric whose labels contain match.
func sumSeries(t *testing.T, f *fixture, metric, match string) float64 {
	t.Helper()
	_, body := f.get("/metrics")
	sum := 0.0
	for line := range strings.SplitSeq(body, "\n") {
		if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, match) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}
