package prober

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	servercollector "github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// TestProbeOfSleepingEngine: a probe of a vLLM simulator put to sleep
// (POST /sleep?level=1) fails with reason sleeping, not http_5xx, once the
// collector has read vllm:engine_sleep_state; vllm_server_sleep_level says
// 1; after POST /wake_up the probe succeeds again.
func TestProbeOfSleepingEngine(t *testing.T) {
	_, ts, cfg := startSim(t, nil)
	conf := loadConfig(t, `
global: {probe_interval: 1h, scrape_interval: 50ms, scrape_timeout: 50ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 3}
targets:
  - {name: t, url: `+ts.URL+`, model: `+cfg.Model+`}
`)
	reg := prometheus.NewPedanticRegistry()
	cm := servercollector.NewManager(servercollector.Options{Registerer: reg, Clients: httpclient.New(nil)})
	if err := cm.Apply(conf); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cm.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	opts := testOptions(nil, nil)
	opts.Sleeping = cm.SleepState
	m := NewManager(opts)
	if err := m.Apply(conf); err != nil {
		t.Fatal(err)
	}
	post := func(path string) { postSim(t, ts, path) }
	waitSleeping := func(want bool) {
		t.Helper()
		// Known: a scrape that failed (50ms timeout, -race) also reads
		// not sleeping, and then has no sleep level series.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if s, known := cm.SleepState("t"); known && s == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("collector never read sleeping=%v", want)
			}
		}
	}

	post("/sleep?level=1")
	waitSleeping(true)
	res, _, err := m.ProbeNow(context.Background(), "t", "short")
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.Reason != probe.ReasonSleeping {
		t.Errorf("probe of a sleeping engine: success %v, reason %q (%s); want reason sleeping", res.Success, res.Reason, res.Err)
	}
	if v := sleepLevel(t, reg); v != 1 {
		t.Errorf("vllm_server_sleep_level = %g, want 1", v)
	}

	post("/wake_up")
	waitSleeping(false)
	if res, _, err := m.ProbeNow(context.Background(), "t", "short"); err != nil || !res.Success {
		t.Errorf("probe after wake_up: %+v, %v; want success", res, err)
	}
	if v := sleepLevel(t, reg); v != 0 {
		t.Errorf("vllm_server_sleep_level = %g after wake_up, want 0", v)
	}
}

func sleepLevel(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "vllm_server_sleep_level" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	n, err := testutil.GatherAndCount(reg, "vllm_server_sleep_level")
	t.Fatalf("%d vllm_server_sleep_level series (%v), want 1", n, err)
	return -1
}

// postSim POSTs to path on the simulator ts (its /sleep and /wake_up).
func postSim(t *testing.T, ts *httptest.Server, path string) {
	t.Helper()
	resp, err := ts.Client().Post(ts.URL+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
}

// TestProbeOfSleepingEngineNothingScrapes: where nothing scrapes the target's
// /metrics (a probe-only vantage), a failed probe asks the target's GET
// /is_sleeping, and a sleeping engine's failure reads sleeping; awake, a
// failure keeps its own reason.
func TestProbeOfSleepingEngineNothingScrapes(t *testing.T) {
	_, ts, cfg := startSim(t, nil)
	conf := loadConfig(t, `
global: {probe_interval: 1h, probe_only: true}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 3}
targets:
  - {name: t, url: `+ts.URL+`, model: `+cfg.Model+`}
`)
	for _, known := range []bool{false, true} {
		t.Run(fmt.Sprintf("collector knows %v", known), func(t *testing.T) {
			opts := testOptions(nil, nil)
			if known {
				// A collector that scrapes and says awake wins over the target.
				opts.Sleeping = func(string) (bool, bool) { return false, true }
			}
			m := NewManager(opts)
			if err := m.Apply(conf); err != nil {
				t.Fatal(err)
			}
			post := func(path string) { postSim(t, ts, path) }
			post("/sleep?level=1")
			defer post("/wake_up")
			res, _, err := m.ProbeNow(context.Background(), "t", "short")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]probe.Reason{false: probe.ReasonSleeping, true: probe.ReasonHTTP5xx}[known]; res.Success || res.Reason != want {
				t.Errorf("probe of a sleeping engine: success %v, reason %q (%s); want reason %s", res.Success, res.Reason, res.Err, want)
			}
		})
	}
}
