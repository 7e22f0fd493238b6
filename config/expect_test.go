package config

import (
	"testing"
)

// TestCheckDefaults: modules that check answers or structured output get
// temperature 0, a fixed seed and ignore_eos false unless they set them;
// other modules keep the plain defaults.
func TestCheckDefaults(t *testing.T) {
	cfg, err := Load([]byte(`
modules:
  plain: {prober: completions, prompt: hi}
  math: {prober: completions, prompt: "2+2=", expect: {equals: "4"}}
  json: {prober: chat, messages: [{role: user, content: x}], response_format: {type: json_object}}
  own: {prober: completions, prompt: "2+2=", expect: {regex: "4"}, temperature: 0.7, seed: 9, ignore_eos: true}
targets:
  - {name: sim, url: "http://127.0.0.1:8000", models: all}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		module    string
		temp      float64
		seed      *int
		ignoreEOS bool
	}{
		{"plain", 0, nil, true},
		{"math", 0, intPtr(DefaultCheckSeed), false},
		{"json", 0, intPtr(DefaultCheckSeed), false},
		{"own", 0.7, intPtr(9), true},
	} {
		m := cfg.Modules[tc.module]
		if m.Temperature != tc.temp || m.IgnoreEOS != tc.ignoreEOS || (m.Seed == nil) != (tc.seed == nil) || (m.Seed != nil && *m.Seed != *tc.seed) {
			t.Errorf("%s: temperature %g seed %v ignore_eos %v, want %g %v %v", tc.module, m.Temperature, m.Seed, m.IgnoreEOS, tc.temp, tc.seed, tc.ignoreEOS)
		}
	}
	match := cfg.Targets[0].ModelsMatcher()
	if match == nil || !match("anything") {
		t.Error("models: all matches every id")
	}
}

func TestModelsRegexMatchesWholeIDs(t *testing.T) {
	tg := Target{Models: "llama-.*-lora"}
	match := tg.ModelsMatcher()
	for id, want := range map[string]bool{"llama-sql-lora": true, "llama-sql-lora-v2": false, "my-llama-sql-lora": false} {
		if match(id) != want {
			t.Errorf("%q: %v, want %v", id, !want, want)
		}
	}
	if (&Target{}).ModelsMatcher() != nil {
		t.Error("a target without models has no matcher")
	}
}

func intPtr(i int) *int { return &i }
