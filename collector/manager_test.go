package collector

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-prober/vllm_prober/config"
)

// state is what the fake vLLM server exposes.
type state struct {
	Running, Waiting, KV             float64
	Prompt, Gen, Preempt, Stop       float64
	TTFT01, TTFT05, TTFTInf, TTFTSum float64
}

const stateTemplate = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} %[1]g
vllm:num_requests_running{server="http://router:8000"} 99
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} %[2]g
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} %[3]g
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} %[4]g
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7882e+09
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} %[5]g
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} %[6]g
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} %[7]g
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} %[8]g
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} %[9]g
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} %[10]g
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} %[10]g
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} %[11]g
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",kv_cache_size_tokens="8192",num_gpu_blocks="512"} 1.0
`

// fakeVLLM is an httptest vLLM whose /metrics shows a settable state, or
// fails, or hangs.
type fakeVLLM struct {
	*httptest.Server
	mu       sync.Mutex
	st       state
	status   int  // non-200 makes /metrics fail
	hang     bool // /metrics blocks until the client gives up
	metrics  atomic.Int64
	versions atomic.Int64
}

func newFakeVLLM(t *testing.T) *fakeVLLM {
	t.Helper()
	f := &fakeVLLM{status: http.StatusOK}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/version":
			f.versions.Add(1)
			fmt.Fprint(w, `{"version":"0.11.0"}`)
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model","max_model_len":4096}]}`)
		case "/metrics":
			f.metrics.Add(1)
			f.mu.Lock()
			st, status, hang := f.st, f.status, f.hang
			f.mu.Unlock()
			if hang {
				<-r.Context().Done()
				return
			}
			if status != http.StatusOK {
				http.Error(w, "engine dead", status)
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			fmt.Fprintf(w, stateTemplate, st.Running, st.Waiting, st.KV, st.Prompt, st.Gen, st.Preempt, st.Stop,
				st.TTFT01, st.TTFT05, st.TTFTInf, st.TTFTSum)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeVLLM) set(st state) {
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
}

func (f *fakeVLLM) setFailure(status int, hang bool) {
	f.mu.Lock()
	f.status, f.hang = status, hang
	f.mu.Unlock()
}

func testConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(yaml), "")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func configFor(t *testing.T, url, window string, maxNumSeqs int) *config.Config {
	// Tests that call scrapeOnce themselves want a timeout that a loaded
	// machine cannot miss; the interval does not matter to them.
	return configForInterval(t, url, "1s", window, maxNumSeqs)
}

func configForInterval(t *testing.T, url, interval, window string, maxNumSeqs int) *config.Config {
	return testConfig(t, fmt.Sprintf(`
global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  rate_window: %[2]s
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - name: a
    url: %[3]s
    max_num_seqs: %[4]d
    labels: {preset: small}
  - name: b
    url: http://127.0.0.1:1
    scrape_metrics: false
`, interval, window, url, maxNumSeqs))
}

// fakeClock advances by step at every call.
func fakeClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	t := start.Add(-step)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(step)
		return t
	}
}

func TestManagerExportedFamilies(t *testing.T) {
	srv := newFakeVLLM(t)
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(configFor(t, srv.URL, "10s", 4)); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	start := time.Unix(1_700_000_000, 0)
	s.now = fakeClock(start, 2*time.Second)
	ctx := context.Background()

	srv.set(state{Running: 4, Waiting: 2, KV: 0.8, Prompt: 100, Gen: 1000, Preempt: 0, Stop: 10, TTFT01: 5, TTFT05: 10, TTFTInf: 10, TTFTSum: 1})
	s.scrapeOnce(ctx)
	srv.set(state{Running: 4, Waiting: 2, KV: 0.8, Prompt: 300, Gen: 1400, Preempt: 1, Stop: 14, TTFT01: 7, TTFT05: 14, TTFTInf: 15, TTFTSum: 2.5})
	s.scrapeOnce(ctx)

	// Over the 2 s between the scrapes: prompt 200/2, generation 400/2,
	// preemptions 1/2, stop 4/2; TTFT Δ buckets 0.1:2 0.5:4 +Inf:5, Δsum 1.5:
	// mean 0.3, p50 = 0.1 + 0.4×(2.5−2)/2 = 0.2, p99 in +Inf → 0.5.
	// The TTFT gap and the headroom join other sources: compare's.
	want := `
# HELP vllm_server_generation_tokens_per_second Generated tokens per second over the rate window.
# TYPE vllm_server_generation_tokens_per_second gauge
vllm_server_generation_tokens_per_second{model="m",preset="small",target="a"} 200
# HELP vllm_server_info Server facts from /version, /v1/models and the engine's /metrics (engine profile, vLLM's metrics schema and cache config); always 1.
# TYPE vllm_server_info gauge
vllm_server_info{block_size="16",engine="vllm",kv_cache_size_tokens="8192",max_model_len="4096",metrics_schema="v1",model="m",preset="small",target="a",ttft_includes_queue="true",version="0.11.0"} 1
# HELP vllm_server_kv_cache_capacity_tokens KV cache capacity in tokens (kv_cache_size_tokens, else num_gpu_blocks × block_size), summed over engines.
# TYPE vllm_server_kv_cache_capacity_tokens gauge
vllm_server_kv_cache_capacity_tokens{model="m",preset="small",target="a"} 8192
# HELP vllm_server_kv_cache_usage_ratio GPU KV cache usage (0-1), the maximum over engines.
# TYPE vllm_server_kv_cache_usage_ratio gauge
vllm_server_kv_cache_usage_ratio{model="m",preset="small",target="a"} 0.8
# HELP vllm_server_preemptions_per_second Preemptions per second over the rate window.
# TYPE vllm_server_preemptions_per_second gauge
vllm_server_preemptions_per_second{model="m",preset="small",target="a"} 0.5
# HELP vllm_server_prompt_tokens_per_second Prompt (prefill) tokens processed per second over the rate window.
# TYPE vllm_server_prompt_tokens_per_second gauge
vllm_server_prompt_tokens_per_second{model="m",preset="small",target="a"} 100
# HELP vllm_server_request_success_per_second Finished requests per second over the rate window by finished_reason.
# TYPE vllm_server_request_success_per_second gauge
vllm_server_request_success_per_second{finished_reason="stop",model="m",preset="small",target="a"} 2
# HELP vllm_server_requests Requests in the server by state (running, waiting; swapped on legacy servers), summed over engines.
# TYPE vllm_server_requests gauge
vllm_server_requests{model="m",preset="small",state="running",target="a"} 4
vllm_server_requests{model="m",preset="small",state="waiting",target="a"} 2
# HELP vllm_server_time_to_first_token_seconds Server-side time to first token over the rate window (mean, and p50/p99 interpolated in the buckets).
# TYPE vllm_server_time_to_first_token_seconds gauge
vllm_server_time_to_first_token_seconds{model="m",preset="small",stat="mean",target="a"} 0.3
vllm_server_time_to_first_token_seconds{model="m",preset="small",stat="p50",target="a"} 0.2
vllm_server_time_to_first_token_seconds{model="m",preset="small",stat="p99",target="a"} 0.5
# HELP vllm_server_up 1 if the last scrape of the target's vLLM /metrics succeeded, 0 otherwise.
# TYPE vllm_server_up gauge
vllm_server_up{preset="small",target="a"} 1
`
	names := []string{
		"vllm_server_generation_tokens_per_second",
		"vllm_server_info", "vllm_server_kv_cache_capacity_tokens", "vllm_server_kv_cache_usage_ratio",
		"vllm_server_preemptions_per_second", "vllm_server_prompt_tokens_per_second",
		"vllm_server_request_success_per_second", "vllm_server_requests", "vllm_server_time_to_first_token_seconds",
		"vllm_server_up",
		// Families that must be absent: no ITL/e2e/queue histograms, no swapped
		// or CPU cache on a V1 server.
		"vllm_server_inter_token_latency_seconds", "vllm_server_e2e_latency_seconds", "vllm_server_queue_time_seconds",
		"vllm_server_cpu_kv_cache_usage_ratio",
		// Joined with other sources: compare's, never the collector's.
		"vllm_probe_server_ttft_gap_seconds", "vllm_server_headroom_ratio",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// The view the joins read: the window starts at the first snapshot.
	if v, ok := m.View("a"); !ok || len(v.Models) != 1 || v.Models[0].Derived == nil || !v.Models[0].Derived.Start.Equal(start) || v.MaxNumSeqs != 4 {
		t.Errorf("view %+v, %v: want model m, its window from %v, max_num_seqs 4", v, ok, start)
	}
	if got, ok := m.GenerationTokensPerSecond("a"); !ok || got != 200 {
		t.Errorf("GenerationTokensPerSecond = %g, %v", got, ok)
	}
	if r, w, ok := m.Load("a"); !ok || r != 4 || w != 2 {
		t.Errorf("Load = %g, %g, %v", r, w, ok)
	}
	if _, _, ok := m.Load("b"); ok {
		t.Error("Load of a target without scrape_metrics is ok")
	}
	if n := srv.versions.Load(); n != 1 {
		t.Errorf("/version read %d times, want once for a server that did not restart", n)
	}
	count, err := testutil.GatherAndCount(reg, "vllm_server_scrape_duration_seconds")
	if err != nil || count != 1 {
		t.Errorf("scrape duration series = %d, %v", count, err)
	}
}

func TestManagerCounterReset(t *testing.T) {
	srv := newFakeVLLM(t)
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(configFor(t, srv.URL, "10s", 0)); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	s.now = fakeClock(time.Unix(1_700_000_000, 0), time.Second)
	ctx := context.Background()
	for i, gen := range []float64{1000, 1100, 50, 150} { // restart between the 2nd and 3rd scrape
		st := state{Gen: gen, Prompt: gen / 10, TTFT01: gen, TTFT05: gen, TTFTInf: gen, TTFTSum: gen / 100}
		srv.set(st)
		s.scrapeOnce(ctx)
		got, ok := m.GenerationTokensPerSecond("a")
		if i == 0 {
			if ok {
				t.Errorf("rate after one scrape = %g, want none", got)
			}
			continue
		}
		if !ok || got < 0 || got > 110 {
			t.Errorf("scrape %d: rate = %g, %v: a reset must neither go negative nor spike", i, got, ok)
		}
	}
	// 100 before the reset, 50 counted from zero after it, then 100: 250 in 3 s.
	if got, _ := m.GenerationTokensPerSecond("a"); math.Abs(got-250.0/3) > 1e-9 {
		t.Errorf("rate over the reset = %g, want %g", got, 250.0/3)
	}
	// The server restarted: /version is read again.
	if n := srv.versions.Load(); n != 2 {
		t.Errorf("/version read %d times, want 2 (start and restart)", n)
	}
	// Every observation is in the lowest bucket (le 0.1): the interpolated
	// p50 (0.05) would be five times the mean; Markov's bound caps it at
	// 2 × mean. The p99 (0.099) is within its bound (100 × mean).
	want := `
# HELP vllm_server_time_to_first_token_seconds Server-side time to first token over the rate window (mean, and p50/p99 interpolated in the buckets).
# TYPE vllm_server_time_to_first_token_seconds gauge
vllm_server_time_to_first_token_seconds{model="m",preset="small",stat="mean",target="a"} 0.01
vllm_server_time_to_first_token_seconds{model="m",preset="small",stat="p50",target="a"} 0.02
vllm_server_time_to_first_token_seconds{model="m",preset="small",stat="p99",target="a"} 0.099
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm_server_time_to_first_token_seconds"); err != nil {
		t.Error(err)
	}
}

func TestManagerScrapeFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(f *fakeVLLM)
	}{
		{"http 503", func(f *fakeVLLM) { f.setFailure(http.StatusServiceUnavailable, false) }},
		{"slow", func(f *fakeVLLM) { f.setFailure(http.StatusOK, true) }},
		{"gone", func(f *fakeVLLM) { f.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeVLLM(t)
			reg := prometheus.NewPedanticRegistry()
			m := NewManager(testOptions(reg, nil))
			if err := m.Apply(configFor(t, srv.URL, "10s", 4)); err != nil {
				t.Fatal(err)
			}
			s := m.target("a")
			srv.set(state{Running: 1, Gen: 10})
			s.scrapeOnce(context.Background())
			s.scrapeOnce(context.Background())
			if n, _ := testutil.GatherAndCount(reg); n < 10 {
				t.Fatalf("only %d series while up", n)
			}

			tc.break_(srv)
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.scrapeOnce(context.Background()) // bounded by scrape_timeout
			}()
			// Gathering never waits for a scrape in flight.
			if _, err := reg.Gather(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("scrape did not give up at scrape_timeout")
			}

			want := `
# HELP vllm_server_up 1 if the last scrape of the target's vLLM /metrics succeeded, 0 otherwise.
# TYPE vllm_server_up gauge
vllm_server_up{preset="small",target="a"} 0
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm_server_up"); err != nil {
				t.Error(err)
			}
			// No stale derived series: only up and the scrape duration remain.
			if n, _ := testutil.GatherAndCount(reg); n != 2 {
				mfs, _ := reg.Gather()
				var names []string
				for _, mf := range mfs {
					names = append(names, mf.GetName())
				}
				t.Errorf("%d series while down (%v), want vllm_server_up and the scrape duration only", n, names)
			}
			if _, ok := m.GenerationTokensPerSecond("a"); ok {
				t.Error("rate reported while down")
			}
		})
	}
}

func TestManagerRunApply(t *testing.T) {
	srv := newFakeVLLM(t)
	srv.set(state{Running: 2, Gen: 10})
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(configForInterval(t, srv.URL, "250ms", "1s", 4)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		m.Run(ctx)
	}()
	waitFor(t, "three scrapes", func() bool { return srv.metrics.Load() >= 3 })
	waitFor(t, "Load ok while the server answers", func() bool { _, _, ok := m.Load("a"); return ok })

	// Changing only labels and max_num_seqs keeps the loop and the history.
	before := m.target("a")
	before.mu.Lock()
	ringBefore := len(before.ring)
	before.mu.Unlock()
	cfg := configForInterval(t, srv.URL, "250ms", "1s", 8)
	cfg.Targets[0].Labels = map[string]string{"preset": "large"}
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if m.target("a") != before {
		t.Fatal("unchanged target was replaced")
	}
	before.mu.Lock()
	if len(before.ring) < ringBefore || before.maxNumSeqs != 8 {
		t.Errorf("history %d → %d, max_num_seqs %d", ringBefore, len(before.ring), before.maxNumSeqs)
	}
	before.mu.Unlock()
	waitFor(t, "vllm_server_up with the new label value", func() bool {
		up, ok := gathered(t, reg, "vllm_server_up", map[string]string{"target": "a", "preset": "large"})
		return ok && up == 1
	})

	// A new URL replaces the target; its old loop stops.
	other := newFakeVLLM(t)
	other.set(state{Running: 1})
	if err := m.Apply(configForInterval(t, other.URL, "250ms", "1s", 8)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "scrapes of the new URL", func() bool { return other.metrics.Load() >= 2 })
	settled := srv.metrics.Load()
	time.Sleep(600 * time.Millisecond)
	if n := srv.metrics.Load(); n != settled {
		t.Errorf("old URL still scraped after Apply: %d → %d", settled, n)
	}

	cancel()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	stopped := other.metrics.Load()
	time.Sleep(600 * time.Millisecond)
	if n := other.metrics.Load(); n != stopped {
		t.Errorf("scrapes after Run returned: %d → %d", stopped, n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
