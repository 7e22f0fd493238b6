package prober

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// TestTargetChangeCompilesNothing: a module is compiled when a configuration
// first brings it or changes it, never when only the targets change (a
// discovery refresh re-applies the configuration with other targets).
func TestTargetChangeCompilesNothing(t *testing.T) {
	load := func(yml string) *config.Config {
		t.Helper()
		cfg, err := config.Load([]byte(yml), "")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const mods = `modules:
  a: {prober: completions, prompt: hi, max_tokens: 8}
  b: {prober: responses, prompt: hi, max_tokens: 8, expect: {regex: x}}
`
	m := NewManager(testOptions(nil, nil))
	apply := func(yml string, want int) {
		t.Helper()
		if err := m.Apply(load(yml)); err != nil {
			t.Fatal(err)
		}
		if m.compilations != want {
			t.Errorf("%d module compilations so far, want %d", m.compilations, want)
		}
	}
	apply(mods+"targets:\n  - {name: t1, url: 'http://127.0.0.1:1', model: m}\n", 2)
	// Targets added, changed and removed: nothing to compile.
	apply(mods+"targets:\n  - {name: t2, url: 'http://127.0.0.1:2', model: m}\n  - {name: t3, url: 'http://127.0.0.1:3', model: m, modules: [a]}\n", 2)
	apply(mods+"targets:\n  - {name: t3, url: 'http://127.0.0.1:4', model: n}\n", 2)
	// One module changed: that one is compiled again.
	apply(`modules:
  a: {prober: completions, prompt: hello, max_tokens: 8}
  b: {prober: responses, prompt: hi, max_tokens: 8, expect: {regex: x}}
targets:
  - {name: t3, url: 'http://127.0.0.1:4', model: n}
`, 3)
}

// TestTargetChangeTouchesOnlyItsLoop: a configuration that changes one
// target (its URL and interval) restarts that target's check loop and its
// pairs' schedules, and leaves every other target's loops and pairs as they
// ran; no pair's series or history is reset.
func TestTargetChangeTouchesOnlyItsLoop(t *testing.T) {
	yml := func(t2 string) *config.Config {
		return loadConfig(t, `
global: {probe_interval: 1h}
modules:
  a: {prober: completions, prompt: hi, max_tokens: 8}
  b: {prober: completions, prompt: hello, max_tokens: 8}
targets:
  - {name: t1, url: 'http://127.0.0.1:1', model: m}
  - `+t2+`
  - {name: t3, url: 'http://127.0.0.1:3', model: m, modules: [a]}
`)
	}
	reg := prometheus.NewRegistry()
	m := NewManager(testOptions(reg, nil))
	m.offset = func(_ pairKey, interval time.Duration) time.Duration { return interval - 1 } // no check or probe during the test
	if err := m.Apply(yml("{name: t2, url: 'http://127.0.0.1:2', model: m}")); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	waitFor(t, "the loops running", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.runCtx != nil
	})
	type loops struct {
		tgt   *target
		pairs []*pair
	}
	snapshot := func() map[string]loops {
		m.mu.Lock()
		defer m.mu.Unlock()
		out := map[string]loops{}
		for name, tg := range m.targets {
			out[name] = loops{tg, slices.Clone(tg.pairs)}
		}
		return out
	}
	// One probe of every pair, as the schedule books it.
	m.mu.Lock()
	for _, p := range m.pairs {
		m.record(p, &probe.Result{Success: true, Start: time.Now(), E2E: time.Second})
	}
	m.mu.Unlock()
	// When each pair's last probe ended: a reset series has none.
	lastProbe := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() == "vllm_probe_last_timestamp_seconds" {
				for _, s := range mf.GetMetric() {
					out[labelValue(s, "target")+"/"+labelValue(s, "module")] = s.GetGauge().GetValue()
				}
			}
		}
		return out
	}
	seriesBefore := lastProbe()
	if len(seriesBefore) != 5 {
		t.Fatalf("last probe series before the change: %v, want one per pair (5)", seriesBefore)
	}
	before := snapshot()
	if err := m.Apply(yml("{name: t2, url: 'http://127.0.0.1:4', model: m, probe_interval: 30m}")); err != nil {
		t.Fatal(err)
	}
	after := snapshot()
	if got := lastProbe(); !maps.Equal(got, seriesBefore) {
		t.Errorf("last probe series after changing t2: %v, want them as they were: %v", got, seriesBefore)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, b := range before {
		a := after[name]
		want := 1
		if name == "t2" {
			want = 2
		}
		if a.tgt != b.tgt || a.tgt.starts != want {
			t.Errorf("%s: same target %v, its check loop started %d times, want %d", name, a.tgt == b.tgt, a.tgt.starts, want)
		}
		if !slices.Equal(a.pairs, b.pairs) {
			t.Errorf("%s: its pairs were replaced", name)
		}
		for _, p := range a.pairs {
			if p.starts != want {
				t.Errorf("%s/%s: its schedule started %d times, want %d", name, p.key.module, p.starts, want)
			}
			if n := len(p.hist.list()); n != 1 {
				t.Errorf("%s/%s: %d probes in its history, want the 1 before the change", name, p.key.module, n)
			}
		}
	}
}
