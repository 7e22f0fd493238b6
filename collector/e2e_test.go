package collector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// render is what the simulator served to one collector scrape, parsed
// straight with the expfmt text parser (not with the collector), and when the
// simulator rendered it.
type render struct {
	at      time.Time
	gen, kv float64
}

// recorder wraps the simulator's handler and records every /metrics response
// it serves to the collector (User-Agent vllm_prober/<version>), keyed by the
// generation-token counter, which grows at every scrape under load.
type recorder struct {
	next   http.Handler
	kvName string
	mu     sync.Mutex
	byGen  map[float64]render
	err    error
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" || r.Header.Get("User-Agent") != httpclient.UserAgent() {
		rc.next.ServeHTTP(w, r)
		return
	}
	// Render into a buffer, record, then answer: the record exists before the
	// collector can see the response.
	buf := httptest.NewRecorder()
	before := time.Now()
	rc.next.ServeHTTP(buf, r)
	at := before.Add(time.Since(before) / 2)
	body := buf.Body.Bytes()
	defer func() {
		for k, v := range buf.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(buf.Code)
		_, _ = w.Write(body)
	}()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.err = err
		return
	}
	sum := func(name string) float64 {
		total := 0.0
		for _, m := range fams[name].GetMetric() {
			if v, ok := scalar(m); ok {
				total += v
			}
		}
		return total
	}
	gen := sum("vllm:generation_tokens_total")
	if _, dup := rc.byGen[gen]; !dup {
		rc.byGen[gen] = render{at: at, gen: gen, kv: sum(rc.kvName)}
	}
}

func (rc *recorder) lookup(gen float64) (render, bool, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	r, ok := rc.byGen[gen]
	return r, ok, rc.err
}

// streamLoad keeps n streaming completions in flight until ctx ends.
func streamLoad(ctx context.Context, url, model string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	body := fmt.Sprintf(`{"model":%q,"prompt":"hello there","max_tokens":80,"ignore_eos":true,"stream":true}`, model)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	return &wg
}

// gathered returns the value of the series of family name whose labels
// include want, and whether there is one.
func gathered(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				if lv, _ := labelValue(m, k); lv != v {
					continue next
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestEndToEndSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	for _, tc := range []struct {
		names, kvName, schema string
	}{
		{simulator.MetricsV1, "vllm:kv_cache_usage_perc", SchemaV1},
		{simulator.MetricsV010, "vllm:kv_cache_usage_perc", SchemaTransition},
		{simulator.MetricsLegacy, "vllm:gpu_cache_usage_perc", SchemaLegacy},
	} {
		t.Run(tc.names, func(t *testing.T) { endToEnd(t, tc.names, tc.kvName, tc.schema) })
	}
}

func endToEnd(t *testing.T, names, kvName, era string) {
	scfg := simulator.DefaultConfig()
	scfg.Model = "m"
	scfg.MaxModelLen = 1024
	scfg.MaxNumSeqs = 4
	scfg.KVCacheTokens = 4096
	scfg.TTFT = 20 * time.Millisecond
	scfg.ITL = 10 * time.Millisecond
	scfg.MetricsNames = names
	sim, err := simulator.New(scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: sim.Handler(), kvName: kvName, byGen: map[float64]render{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	defer sim.Close()

	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(configForInterval(t, srv.URL, "250ms", "2s", 4)); err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); m.Run(runCtx) }()
	defer func() { stopRun(); <-ran }()

	loadCtx, stopLoad := context.WithCancel(context.Background())
	loadStart := time.Now()
	load := streamLoad(loadCtx, srv.URL, "m", 8)
	defer func() { stopLoad(); load.Wait() }()

	// Wait until the whole rate window lies inside the loaded period.
	s := m.target("a")
	var d Derived
	var first, latest *Snapshot
	var window []*Snapshot
	waitFor(t, "a rate window inside the load", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if dv := s.derived["m"]; dv != nil && dv.Start.After(loadStart.Add(300*time.Millisecond)) &&
			dv.End.Sub(dv.Start) >= 1500*time.Millisecond && !math.IsNaN(dv.GenerationTokensPerSecond) {
			d, latest = *dv, s.ring[len(s.ring)-1]
			for _, snap := range s.ring {
				if snap.Time.Equal(dv.Start) {
					first = snap
				}
				if !snap.Time.Before(dv.Start) {
					window = append(window, snap)
				}
			}
			return true
		}
		return false
	})
	labels := map[string]string{"target": "a", "model": "m"}
	running, _ := gathered(t, reg, "vllm_server_requests", map[string]string{"target": "a", "state": "running"})
	waiting, _ := gathered(t, reg, "vllm_server_requests", map[string]string{"target": "a", "state": "waiting"})
	kvLoaded, _ := gathered(t, reg, "vllm_server_kv_cache_usage_ratio", labels)
	if _, ok := gathered(t, reg, "vllm_server_info", map[string]string{"target": "a", "metrics_schema": era, "max_model_len": "1024"}); !ok {
		t.Errorf("no vllm_server_info with metrics_schema=%q and max_model_len from /v1/models", era)
	}
	if _, ok := gathered(t, reg, "vllm_server_generation_tokens_per_second", labels); !ok {
		t.Error("no vllm_server_generation_tokens_per_second")
	}
	if era == SchemaLegacy {
		if _, ok := gathered(t, reg, "vllm_server_requests", map[string]string{"target": "a", "state": "swapped"}); !ok {
			t.Error("legacy server: no swapped requests series")
		}
		if _, ok := gathered(t, reg, "vllm_server_cpu_kv_cache_usage_ratio", labels); !ok {
			t.Error("legacy server: no CPU KV cache usage")
		}
	}

	// Ground truth: the simulator's own counter at the two renders that
	// opened and closed the collector's window, over the seconds between them.
	g0, g1 := first.Models["m"].GenerationTokens, latest.Models["m"].GenerationTokens
	r0, ok0, _ := rec.lookup(g0)
	r1, ok1, err := rec.lookup(g1)
	if !ok0 || !ok1 || err != nil {
		t.Fatalf("no render served %g and %g generation tokens (%v)", g0, g1, err)
	}
	truth := (r1.gen - r0.gen) / r1.at.Sub(r0.at).Seconds()
	t.Logf("generation tokens/s %.1f, ground truth %.1f; window %v collector, %v simulator",
		d.GenerationTokensPerSecond, truth, d.End.Sub(d.Start), r1.at.Sub(r0.at))
	if truth <= 0 || math.Abs(d.GenerationTokensPerSecond-truth)/truth > 0.05 {
		t.Errorf("generation tokens/s = %.1f, simulator's own counter says %.1f over the same window", d.GenerationTokensPerSecond, truth)
	}

	if running != 4 || waiting <= 0 {
		t.Errorf("requests running = %g (want 4 = max_num_seqs), waiting = %g (want > 0 with 8 streams)", running, waiting)
	}
	for _, snap := range window {
		if m := snap.Models["m"]; m.Running != 4 || m.Waiting <= 0 {
			t.Errorf("scrape at %v: running %g, waiting %g", snap.Time, m.Running, m.Waiting)
		}
	}
	// KV usage equals what the simulator rendered for that scrape.
	kv := latest.Models["m"].KVUsage
	if !(kv > 0) || kv != r1.kv {
		t.Errorf("KV usage %g, simulator rendered %g", kv, r1.kv)
	}

	// When the load stops, the requests drain and the KV cache empties:
	// what compare's headroom (batch slots and KV cache) rises again on.
	stopLoad()
	load.Wait()
	waitFor(t, "the server idle after the load", func() bool {
		running, ok1 := gathered(t, reg, "vllm_server_requests", map[string]string{"target": "a", "state": "running"})
		kv, ok2 := gathered(t, reg, "vllm_server_kv_cache_usage_ratio", labels)
		return ok1 && ok2 && running == 0 && kv < kvLoaded
	})
}
