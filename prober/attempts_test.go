package prober

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vllm-prober/vllm_prober/internal/exposition"
)

// TestProbeStartEncodesAttemptsAlone: through the daemon's exposition
// cache, a probe's start encodes the target's attempt counts alone (one
// part), and its end the rest of the target's series with them; each time
// the cached render says what promhttp over every series says. Before, the
// start moved the whole target: every series of it was encoded at the
// start and again at the end of every probe.
func TestProbeStartEncodesAttemptsAlone(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/completions" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			return
		}
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"text":"hi"}]}`+"\n\n"+
			`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	main, rest := prometheus.NewRegistry(), prometheus.NewRegistry()
	cache := exposition.NewCache(nil)
	m, _ := checkedTarget(t, exposition.NewRegisterer(cache, main, rest), srv.URL)
	cached := cache.Handler(exposition.HandlerOpts{Rest: prometheus.Gatherers{rest, cache.Shared()}, Full: main})
	full := promhttp.HandlerFor(main, promhttp.HandlerOpts{})
	render := func(h http.Handler) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	step := func(what string, want uint64, attempts string) {
		t.Helper()
		n := cache.Encodings()
		got := render(cached)
		if e := cache.Encodings() - n; e != want {
			t.Errorf("%s: %d parts encoded, want %d", what, e, want)
		}
		if !strings.Contains(got, `vllm_probe_attempts_total{model="m",module="short",target="t"} `+attempts+"\n") {
			t.Errorf("%s: attempts not %s:\n%s", what, attempts, got)
		}
		if g, w := sortedLines(got), sortedLines(render(full)); !slices.Equal(g, w) {
			t.Errorf("%s: the cached render differs from promhttp's:\n%s\npromhttp:\n%s", what, got, render(full))
		}
	}
	step("first render", 2, "0") // the target's series and its attempt counts
	step("nothing changed", 0, "0")

	done := make(chan bool)
	go func() {
		_, ok := m.burstProbe(context.Background(), "t", "short", func() {})
		done <- ok
	}()
	<-arrived // the probe started: its attempt is counted
	step("a probe started", 1, "1")
	close(release)
	if !<-done {
		t.Fatal("the probe was not recorded")
	}
	step("the probe ended", 2, "1")
}

// checkedTarget runs a Manager registering with reg, of one target "t" of
// model m at url and module "short", with no scheduled probe, and returns
// it and its target once the target's first check found it up.
func checkedTarget(t *testing.T, reg prometheus.Registerer, url string) (*Manager, *target) {
	t.Helper()
	cfg := loadConfig(t, `
global: {probe_interval: 1h}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 1}
targets:
  - {name: t, url: `+url+`, model: m}
`)
	m := NewManager(testOptions(reg, nil))
	m.offset = func(_ pairKey, interval time.Duration) time.Duration { return interval - 1 } // no scheduled probe
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(running(t, m))
	var tg *target
	waitFor(t, "the target's first check", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		tg = m.targets["t"]
		return tg != nil && tg.checked && tg.healthUp && tg.modelsUp
	})
	return m, tg
}

func sortedLines(s string) []string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(l)
	return l
}

// TestCheckMovesVersionOnChange: a target's check that finds what the last
// one found leaves its version (and so its encoded series) alone; one that
// finds it down moves it. Every check moved it before: the exposition cache
// encoded every series of every probed target again at every check.
func TestCheckMovesVersionOnChange(t *testing.T) {
	f, ts := newFake(t, "m")
	m, tg := checkedTarget(t, prometheus.NewRegistry(), ts.URL)
	version := func() uint64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return tg.version
	}
	v := version()
	tg.check(context.Background())
	if got := version(); got != v {
		t.Errorf("a check that found the target as before moved its version from %d to %d", v, got)
	}
	f.mode.Store("dead")
	tg.check(context.Background())
	m.mu.Lock()
	up := tg.healthUp
	m.mu.Unlock()
	if got := version(); got == v || up {
		t.Errorf("a check that found the target down: version %d (was %d), health up %v", got, v, up)
	}
}
