package collector

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/vllm-prober/vllm_prober/internal/testutil"
)

// syncBuffer is a log sink safe for the scrape loop and the test.
type syncBuffer struct{ testutil.LogBuffer }

// TestLastScrapeAndFailureLogging checks that a target's first failed scrape
// is logged at info with its reason, repeats of the same failure are not,
// a new reason and the recovery are, and LastScrape tells the same story
// without the credentials of the target's URL.
func TestLastScrapeAndFailureLogging(t *testing.T) {
	srv := newFakeVLLM(t)
	srv.setFailure(http.StatusServiceUnavailable, false)
	var buf syncBuffer
	logger := level.NewFilter(log.NewLogfmtLogger(&buf), level.AllowInfo())
	m := NewManager(testOptions(nil, logger))
	// The metrics URL carries a token in its query (the configuration
	// refuses user information): it must reach neither the log nor
	// LastScrape.
	url := srv.URL
	cfg := testConfig(t, fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 1s}
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - name: a
    url: %s
    metrics_path: /metrics?token=sekrit42
`, url))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.LastScrape("a"); ok {
		t.Error("LastScrape reports a state before any scrape")
	}
	if _, ok := m.LastScrape("nope"); ok {
		t.Error("LastScrape reports an unknown target")
	}
	s := m.target("a")
	noSecret := func(where, text string) {
		t.Helper()
		for _, secret := range []string{"sekrit42"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds a secret: %s", where, text)
			}
		}
	}

	s.scrapeOnce(context.Background())
	logs := buf.Take()
	if !strings.Contains(logs, "level=info") || !strings.Contains(logs, "scrape of vLLM metrics failed") || !strings.Contains(logs, "503") {
		t.Errorf("first failure not logged at info with its reason:\n%s", logs)
	}
	noSecret("log", logs)
	st, ok := m.LastScrape("a")
	if !ok || st.Up || !strings.Contains(st.Err, "503") || st.At.IsZero() || st.Duration <= 0 {
		t.Errorf("LastScrape after a 503 = %+v, %v", st, ok)
	}
	noSecret("LastScrape", st.Err)

	s.scrapeOnce(context.Background())
	if logs := buf.Take(); logs != "" {
		t.Errorf("the same failure logged again:\n%s", logs)
	}

	srv.setFailure(http.StatusInternalServerError, false)
	s.scrapeOnce(context.Background())
	if logs := buf.Take(); !strings.Contains(logs, "level=info") || !strings.Contains(logs, "500") {
		t.Errorf("a new failure reason is not logged at info:\n%s", logs)
	}

	srv.setFailure(http.StatusOK, false)
	s.scrapeOnce(context.Background())
	if logs := buf.Take(); !strings.Contains(logs, "succeeded again") {
		t.Errorf("recovery not logged:\n%s", logs)
	}
	if st, ok := m.LastScrape("a"); !ok || !st.Up || st.Err != "" {
		t.Errorf("LastScrape after recovery = %+v, %v", st, ok)
	}

	srv.Close()
	s.scrapeOnce(context.Background())
	logs = buf.Take()
	if !strings.Contains(logs, "level=warn") {
		t.Errorf("a failure after success is not a warning:\n%s", logs)
	}
	noSecret("log", logs)
	st, _ = m.LastScrape("a")
	if st.Up || st.Err == "" || !strings.Contains(st.Err, "/metrics") {
		t.Errorf("LastScrape of a gone server = %+v", st)
	}
	noSecret("LastScrape", st.Err)
	s.client.CloseIdleConnections()
}

// TestLoadDuring: after a failed scrape, Load has nothing while LoadDuring
// still gives the last good scrape's load, until it is three intervals old;
// over a probe's lifetime it is the mean of the scrape it started into and
// the scrapes during it.
func TestLoadDuring(t *testing.T) {
	srv := newFakeVLLM(t)
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(configFor(t, srv.URL, "10s", 4)); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	srv.set(state{Running: 3, Waiting: 2})
	s.scrapeOnce(context.Background())
	srv.setFailure(http.StatusServiceUnavailable, false)
	s.scrapeOnce(context.Background())
	s.client.CloseIdleConnections()
	if _, _, ok := m.Load("a"); ok {
		t.Error("Load reports a load after a failed scrape")
	}
	now := time.Now()
	if l, ok := m.LoadDuring("a", now, now); !ok || l != 6 {
		t.Errorf("LoadDuring = %g, %v; want 3 + 2 + 1 = 6 from the last good scrape", l, ok)
	}
	s.mu.Lock()
	s.ring[len(s.ring)-1].Time = now.Add(-4 * s.interval)
	s.mu.Unlock()
	if _, ok := m.LoadDuring("a", now, now); ok {
		t.Error("LoadDuring reports a load four scrape intervals old")
	}

	// A probe from t0 to t0+3s: it started into the idle scrape at t0-1s, then
	// a burst arrived, seen by the scrapes at t0+1s and t0+2s; the scrape at
	// t0+4s, after the probe, and the older one at t0-2s are not its.
	t0 := now.Add(time.Hour)
	srv.setFailure(http.StatusOK, false)
	s.mu.Lock()
	s.ring = nil
	for _, sc := range []struct {
		at               time.Duration
		running, waiting float64
	}{{-2 * time.Second, 9, 9}, {-time.Second, 0, 0}, {time.Second, 4, 8}, {2 * time.Second, 4, 11}, {4 * time.Second, 9, 9}} {
		snap := scrapedSnapshot(t, srv, sc.running, sc.waiting)
		snap.Time = t0.Add(sc.at)
		s.ring = append(s.ring, snap)
	}
	s.mu.Unlock()
	if l, ok := m.LoadDuring("a", t0, t0.Add(3*time.Second)); !ok || l != (1+13+16)/3.0 {
		t.Errorf("LoadDuring over the probe = %g, %v; want (1 + 13 + 16) / 3 = 10", l, ok)
	}
	// A probe that started into the burst's scrape and ended before the next.
	if l, ok := m.LoadDuring("a", t0.Add(1500*time.Millisecond), t0.Add(1900*time.Millisecond)); !ok || l != 13 {
		t.Errorf("LoadDuring within one scrape interval = %g, %v; want 13", l, ok)
	}
}

// scrapedSnapshot scrapes srv serving running and waiting requests with a
// throwaway Manager and returns the snapshot, as the collector stores it.
func scrapedSnapshot(t *testing.T, srv *fakeVLLM, running, waiting float64) *Snapshot {
	t.Helper()
	srv.set(state{Running: running, Waiting: waiting})
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(configFor(t, srv.URL, "10s", 4)); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	s.scrapeOnce(context.Background())
	s.client.CloseIdleConnections()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) == 0 {
		t.Fatal("the scrape stored no snapshot")
	}
	return s.ring[len(s.ring)-1]
}

// TestRecoveryLogsOutageStart: the recovery's failed_since is when the
// outage began, the first failed scrape of it, not the last failed one.
func TestRecoveryLogsOutageStart(t *testing.T) {
	srv := newFakeVLLM(t)
	var buf syncBuffer
	m := NewManager(testOptions(nil, level.NewFilter(log.NewLogfmtLogger(&buf), level.AllowInfo())))
	cfg := testConfig(t, fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 1s}
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - {name: a, url: %s}
`, srv.URL))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	defer s.client.CloseIdleConnections()
	s.scrapeOnce(context.Background())
	srv.setFailure(http.StatusServiceUnavailable, false)
	var began time.Time
	for i := range 3 {
		s.scrapeOnce(context.Background())
		st, _ := m.LastScrape("a")
		if i == 0 {
			began = st.At
		}
		if st.Up || !st.DownSince.Equal(began) {
			t.Errorf("failed scrape %d: up %v, down since %v, want since %v", i, st.Up, st.DownSince, began)
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.setFailure(http.StatusOK, false)
	_ = buf.Take()
	s.scrapeOnce(context.Background())
	logs := buf.Take()
	want := "failed_since=" + began.UTC().Format(time.RFC3339Nano)
	if !strings.Contains(logs, "succeeded again") || !strings.Contains(logs, want) {
		t.Errorf("recovery log %q lacks %s, the outage's first failed scrape", logs, want)
	}
	if st, _ := m.LastScrape("a"); !st.Up || !st.DownSince.IsZero() {
		t.Errorf("after the recovery: up %v, down since %v", st.Up, st.DownSince)
	}
}

// TestScrapeWaitsForQuietAtMostHalfItsInterval: a scrape waits for the
// target's probes in flight to end (Options.Quiet), but a target that is
// never quiet is still scraped, half an interval late.
func TestScrapeWaitsForQuietAtMostHalfItsInterval(t *testing.T) {
	srv := newFakeVLLM(t)
	asked := make(chan string, 16)
	opts := testOptions(nil, nil)
	opts.Quiet = func(ctx context.Context, target string) {
		asked <- target
		<-ctx.Done() // a probe always in flight
	}
	m := NewManager(opts)
	if err := m.Apply(testConfig(t, fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 500ms}
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - {name: a, url: %s}
`, srv.URL))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if target := <-asked; target != "a" {
		t.Errorf("Quiet asked for %q", target)
	}
	deadline := time.After(3 * time.Second)
	for {
		if st, ok := m.LastScrape("a"); ok {
			if waited := st.At.Sub(start); waited < 450*time.Millisecond {
				t.Errorf("the scrape started %s after the loop, want after half its interval of waiting", waited)
			}
			return
		}
		select {
		case <-deadline:
			t.Fatal("a target never quiet was not scraped")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestScrapedHookReadsDuringSetTargets: the scrape hook (Options.Scraped)
// reads the Manager, as compare's joins do, while a reload that removes the
// target waits for that scrape's loop to end: neither waits for the other.
func TestScrapedHookReadsDuringSetTargets(t *testing.T) {
	srv := newFakeVLLM(t)
	inHook, read := make(chan struct{}, 1), make(chan bool, 1)
	opts := testOptions(nil, nil)
	var m *Manager
	opts.Scraped = func(target string) {
		select {
		case inHook <- struct{}{}:
		default:
			return
		}
		time.Sleep(100 * time.Millisecond) // the reload below takes the Manager meanwhile
		_, _, ok := m.Load(target)
		read <- ok
	}
	m = NewManager(opts)
	if err := m.Apply(testConfig(t, fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 500ms}
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - {name: a, url: %s}
`, srv.URL))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-inHook
	// The reload replaces a by b: SetTargets waits for a's loop to end.
	next := testConfig(t, fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 500ms}
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - {name: b, url: %s}
`, srv.URL))
	reloaded := make(chan error, 1)
	go func() { reloaded <- m.SetTargets(next) }()
	select {
	case err := <-reloaded:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SetTargets and the scrape hook wait for each other: the reload never ended")
	}
	if ok := <-read; !ok {
		t.Error("the hook read no load of the scrape it followed")
	}
}
