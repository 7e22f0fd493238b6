package prober

import (
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/config"
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
