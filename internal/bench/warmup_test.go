package bench

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// connServer serves a simulator and records when each connection opened and
// which requests arrived, with the collector's GOGC setting at the time.
type connServer struct {
	url string
	mu  sync.Mutex
	// opened holds the time each connection was accepted.
	opened []time.Time
	// ids holds the X-Request-Id of every completion request, in arrival order.
	ids []string
	// gogc holds the GOGC percent seen by each timed (non-warm-up) request.
	gogc []uint64
	// scrapes holds when each /metrics request arrived; timed when each
	// timed completion request arrived.
	scrapes, timed []time.Time
}

func startConnServer(t *testing.T) *connServer {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Model = simModel
	cfg.TTFT, cfg.ITL, cfg.BatchSlowdown, cfg.Jitter = 100*time.Millisecond, 5*time.Millisecond, 0, 0
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	cs := &connServer{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			cs.mu.Lock()
			cs.scrapes = append(cs.scrapes, time.Now())
			cs.mu.Unlock()
		}
		if r.URL.Path == "/v1/completions" {
			id := r.Header.Get("X-Request-Id")
			s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
			metrics.Read(s)
			cs.mu.Lock()
			cs.ids = append(cs.ids, id)
			if !strings.Contains(id, "warmup") {
				cs.gogc = append(cs.gogc, s[0].Value.Uint64())
				cs.timed = append(cs.timed, time.Now())
			}
			cs.mu.Unlock()
		}
		sim.Handler().ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			cs.mu.Lock()
			cs.opened = append(cs.opened, time.Now())
			cs.mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		if err := sim.Close(); err != nil {
			t.Error(err)
		}
	})
	cs.url = srv.URL
	return cs
}

// TestBenchWarmsConnectionsBeforeTheTimedWindow: with the warm-up, every
// connection is open before the level starts (the first wave reuses them), one
// untimed request per slot (and one for the /metrics poller) was sent first and is not in the results; without
// it (SkipWarmup), the first wave opens its connections inside the window.
func TestBenchWarmsConnectionsBeforeTheTimedWindow(t *testing.T) {
	const c, n = 4, 8
	for _, skip := range []bool{false, true} {
		cs := startConnServer(t)
		rep, err := Run(context.Background(), Options{
			URL: cs.url, Requests: n, Concurrencies: []int{c}, MaxTokens: 3, IgnoreEOS: true, Name: "warm",
			PollInterval: time.Hour, SkipWarmup: skip,
		})
		if err != nil {
			t.Fatal(err)
		}
		lr := rep.Levels[0]
		if len(lr.Results) != n || lr.Metrics.Completed != n {
			t.Fatalf("skip=%v: %d results, %d completed, want %d", skip, len(lr.Results), lr.Metrics.Completed, n)
		}
		cs.mu.Lock()
		var inWindow int
		for _, at := range cs.opened {
			if !at.Before(lr.Start) {
				inWindow++
			}
		}
		warm := 0
		for _, id := range cs.ids {
			if strings.HasPrefix(id, "warm-c4-warmup-") {
				warm++
			}
		}
		cs.mu.Unlock()
		if skip {
			if inWindow == 0 || warm != 0 {
				t.Errorf("--no-warmup: %d connections opened in the timed window, %d warm-up requests; want some and none", inWindow, warm)
			}
			continue
		}
		if inWindow != 0 || warm != c+1 {
			t.Errorf("warm-up: %d connections opened in the timed window (want 0), %d warm-up requests (want %d); connections at %v, level start %v",
				inWindow, warm, c+1, cs.opened, lr.Start)
		}
		for i, r := range lr.Results {
			if r.Start.Before(lr.Start) {
				t.Errorf("request %d sent at %v, before the level started (%v)", i, r.Start, lr.Start)
			}
		}
	}
}

// TestBenchTurnsGCOffForTheTimedWindow: with GCMemoryLimit, every timed
// request is served while GOGC is off, and the settings in force before are
// back when Run returns.
func TestBenchTurnsGCOffForTheTimedWindow(t *testing.T) {
	cs := startConnServer(t)
	before := debug.SetGCPercent(75)
	defer debug.SetGCPercent(before)
	limit := debug.SetMemoryLimit(-1)
	_, err := Run(context.Background(), Options{
		URL: cs.url, Requests: 4, Concurrencies: []int{2}, MaxTokens: 3, IgnoreEOS: true, Name: "gc",
		PollInterval: time.Hour, GCMemoryLimit: 1 << 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	const off = ^uint64(0) // GOGC=off as runtime/metrics reports it
	cs.mu.Lock()
	for i, g := range cs.gogc {
		if g != off {
			t.Errorf("timed request %d served with GOGC %d, want off", i, g)
		}
	}
	if len(cs.gogc) != 4 {
		t.Errorf("%d timed requests seen, want 4", len(cs.gogc))
	}
	cs.mu.Unlock()
	if got := debug.SetGCPercent(before); got != 75 {
		t.Errorf("GOGC after Run = %d, want 75 restored", got)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("memory limit after Run = %d, want %d restored", got, limit)
	}
}

// TestBenchScrapesBeforeTheFirstWave: the /metrics poller's first sample is
// taken before the level starts, not with its first wave (a scrape is the
// costliest request the server answers, and taken at the release it delayed
// the wave's arrivals by milliseconds); the next one waits a whole interval.
// The sample keeps its true, negative, offset and counts in the server
// statistics.
func TestBenchScrapesBeforeTheFirstWave(t *testing.T) {
	const interval = 400 * time.Millisecond
	cs := startConnServer(t)
	rep, err := Run(context.Background(), Options{
		URL: cs.url, Requests: 8, Concurrencies: []int{4}, MaxTokens: 3, IgnoreEOS: true, Name: "scrape",
		PollInterval: interval,
	})
	if err != nil {
		t.Fatal(err)
	}
	lr := rep.Levels[0]
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.timed) != 8 || len(cs.scrapes) == 0 {
		t.Fatalf("%d timed requests and %d scrapes seen, want 8 and some", len(cs.timed), len(cs.scrapes))
	}
	firstTimed := slices.MinFunc(cs.timed, time.Time.Compare)
	var before, early int
	for _, at := range cs.scrapes {
		switch {
		case at.Before(lr.Start):
			before++
		case at.Sub(lr.Start) < interval/2:
			early++
		}
	}
	if before != 1 || early != 0 {
		t.Errorf("scrapes: %d before the level started (want 1), %d in its first %s (want 0); start %v, first timed request %v, scrapes %v",
			before, early, interval/2, lr.Start, firstTimed, cs.scrapes)
	}
	if firstTimed.Before(lr.Start) {
		t.Errorf("a timed request arrived at %v, before the level started at %v", firstTimed, lr.Start)
	}
	if s := lr.Server.Samples; len(s) < 2 || s[0].Offset > 0 || s[0].Offset < -interval {
		t.Errorf("samples %+v: want the first one just before the start (a small negative offset), then more", s)
	}
}
