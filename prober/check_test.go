package prober

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestCheckLoopMovesToItsPhase: the first check runs at once, the second at
// the target's offset in the interval (not a whole interval later), so that
// targets started together spread their checks.
func TestCheckLoopMovesToItsPhase(t *testing.T) {
	var health atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			health.Add(1)
			return
		}
		http.NotFound(w, r)
	}))
	defer ts.Close()
	cfg := loadConfig(t, `
global: {probe_interval: 1h}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: a, url: "`+ts.URL+`", model: m}
`)
	m := NewManager(testOptions(nil, nil))
	var asked atomic.Value
	m.offset = func(k pairKey, interval time.Duration) time.Duration {
		if k.module == "" {
			asked.Store(k.target)
			return 20 * time.Millisecond
		}
		return interval - 1 // no probe during the test
	}
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	waitFor(t, "the second check, at the target's phase", func() bool { return health.Load() >= 2 })
	if got := asked.Load(); got != "a" {
		t.Errorf("the check phase was asked for %v, want target a", got)
	}
}
