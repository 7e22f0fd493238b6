package prober

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
)

// TestBudgetSpreadOverModels: a target with models: all keeps one token
// budget, split evenly over the models it lists. The fake lists "m" and
// "other"; each probe spends 7 prompt + 5 output = 12 tokens. With 60 tokens
// per hour each model's share is 30: its first probe (worst case: the
// estimate len("hi")/3+1+8 = 9, plus max_tokens 5 = 14) runs, the next
// (7+8 slack+5 = 20; 12+20 > 30) is skipped. Without the shares the first
// model to tick again would have taken a second and a third probe out of the
// common 60 (24+20 = 44, 36+20 = 56), leaving the other model fewer.
func TestBudgetSpreadOverModels(t *testing.T) {
	f, ts := newFake(t, "m")
	cfg := loadConfig(t, `
global:
  probe_interval: 100ms
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: t, url: `+ts.URL+`, models: all, token_budget_per_hour: 60}
`)
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	mt := m.testMetrics()
	for _, model := range []string{"m", "other"} {
		lv := []string{"t", "short", model}
		waitFor(t, "3 budget skips of "+model, func() bool {
			return counter(t, mt.skipped.WithLabelValues(append(lv, SkipBudget)...)) >= 3
		})
	}
	m.mu.Lock()
	share := budgetShare(m.targets["t"])
	m.mu.Unlock()
	if share != 30 {
		t.Errorf("share of each of 2 models in 60 tokens = %d, want 30", share)
	}
	for _, model := range []string{"m", "other"} {
		lv := []string{"t", "short", model}
		if got := count(t, m, mt.attempts, lv...); got != 1 {
			t.Errorf("%s: %v probes, want 1 (its share of the budget)", model, got)
		}
	}
	if got := f.requests.Load(); got != 2 {
		t.Errorf("requests = %d, want 2", got)
	}

	// /probe has a pool of its own (max(60/10, cost 20) = 20: one probe),
	// and names only listed models.
	if _, _, err := m.ProbeModelNow(context.Background(), "t", "short", "other"); err != nil {
		t.Errorf("first ProbeModelNow(other) err = %v, want it run from the on-demand pool", err)
	}
	if _, _, err := m.ProbeModelNow(context.Background(), "t", "short", "other"); !errors.Is(err, ErrOnDemandBudgetExceeded) {
		t.Errorf("second ProbeModelNow(other) err = %v, want ErrOnDemandBudgetExceeded", err)
	}
	if _, _, err := m.ProbeModelNow(context.Background(), "t", "short", "nope"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("ProbeModelNow(nope) err = %v, want ErrUnknownModel", err)
	}

	// An hour later both shares are free again.
	m.mu.Lock()
	m.now = func() time.Time { return time.Now().Add(time.Hour + time.Minute) }
	m.mu.Unlock()
	for _, model := range []string{"m", "other"} {
		waitFor(t, "a second probe of "+model, func() bool { return count(t, m, mt.attempts, "t", "short", model) >= 2 })
	}
}

// TestBudgetShareArithmetic: the share is the budget divided by the number
// of listed models, only on targets with models.
func TestBudgetShareArithmetic(t *testing.T) {
	for _, tc := range []struct {
		models string
		listed []string
		budget int
		want   int
	}{
		{"", nil, 1000, 1000},
		{"all", nil, 1000, 1000},
		{"all", []string{"a"}, 1000, 1000},
		{"all", []string{"a", "b", "c"}, 1000, 333},
		{"all", []string{"a", "b", "c", "d"}, 0, 0},
	} {
		tg := &target{models: tc.listed}
		tg.cfg.Models, tg.cfg.TokenBudgetPerHour = tc.models, tc.budget
		if got := budgetShare(tg); got != tc.want {
			t.Errorf("models %q listed %v budget %d: share %d, want %d", tc.models, tc.listed, tc.budget, got, tc.want)
		}
	}
}

// TestBudgetShareBelowMaxTokensWarns: once /v1/models lists two models, a
// budget of 8 gives each a share of 4, below max_tokens 5: every probe would
// be skipped, and the log says so with the numbers.
func TestBudgetShareBelowMaxTokensWarns(t *testing.T) {
	_, ts := newFake(t, "m")
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := log.LoggerFunc(func(kv ...any) error {
		mu.Lock()
		defer mu.Unlock()
		return log.NewLogfmtLogger(&logs).Log(kv...)
	})
	m := NewManager(testOptions(prometheus.NewRegistry(), logger))
	if err := m.Apply(loadConfig(t, `
global: {probe_interval: 100ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: t, url: `+ts.URL+`, models: all, token_budget_per_hour: 8}
`)); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	want := `target=t models=2 token_budget_per_hour=8 share=4 module=short max_tokens=5`
	waitFor(t, "the budget share warning", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), want)
	})
}

// TestProbeNowNeverSpendsScheduledBudget: 100 on-demand probes (the calls
// of /probe, which anyone who reaches the port may make) do not make a
// single scheduled probe skip for the budget: they draw on their own pool,
// and the pool refuses once its tenth of the budget is spent.
func TestProbeNowNeverSpendsScheduledBudget(t *testing.T) {
	f, ts := newFake(t, "m")
	// Each probe spends 7 prompt + 5 output = 12 tokens; the scheduled ones
	// fit 1000 tokens for the whole test, 100 on-demand ones (1200) do not.
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(loadConfig(t, `
global: {probe_interval: 50ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: t, url: `+ts.URL+`, model: m, token_budget_per_hour: 1000}
`)); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for range 100 {
		_, _, err := m.ProbeNow(context.Background(), "t", "short")
		switch {
		case errors.Is(err, ErrOnDemandBudgetExceeded):
			refused++
		case err != nil:
			t.Fatal(err)
		}
	}
	if refused == 0 || refused == 100 {
		t.Errorf("%d of 100 on-demand probes refused, want some run (a tenth of the budget) and the rest refused", refused)
	}
	running(t, m)
	mt := m.testMetrics()
	lv := []string{"t", "short", "m"}
	waitFor(t, "5 scheduled probes", func() bool { return count(t, m, mt.attempts, lv...) >= 5 })
	skipped := counter(t, mt.skipped.WithLabelValues(append(lv, SkipBudget)...))
	if skipped != 0 {
		t.Errorf("%v scheduled probes skipped for the budget after 100 on-demand probes, want 0", skipped)
	}
	if f.requests.Load() < 5 {
		t.Errorf("requests = %d", f.requests.Load())
	}
}
