package config

import (
	"strings"
	"testing"
)

// TestScrapeOnlyTargets: `modules: none` and `probe: false` make a target
// that no module probes; `modules: []` still means every module; a target
// that neither probes nor scrapes is refused.
func TestScrapeOnlyTargets(t *testing.T) {
	const head = `
modules:
  a: {prober: completions, prompt: "hi"}
  b: {prober: completions, prompt: "ho"}
targets:
`
	for _, tc := range []struct {
		name, target string
		probe        bool
		modules      []string
		err          string
	}{
		{name: "default", target: `{name: t, url: "http://127.0.0.1:1"}`, probe: true, modules: []string{"a", "b"}},
		{name: "empty list", target: `{name: t, url: "http://127.0.0.1:1", modules: []}`, probe: true, modules: []string{"a", "b"}},
		{name: "modules none", target: `{name: t, url: "http://127.0.0.1:1", modules: none}`, probe: false},
		{name: "probe false", target: `{name: t, url: "http://127.0.0.1:1", probe: false}`, probe: false},
		{name: "probe-only", target: `{name: t, url: "http://127.0.0.1:1", scrape_metrics: false, modules: [b]}`, probe: true, modules: []string{"b"}},
		{name: "neither", target: `{name: t, url: "http://127.0.0.1:1", modules: none, scrape_metrics: false}`, err: "neither probes"},
		{name: "neither, probe false", target: `{name: t, url: "http://127.0.0.1:1", probe: false, scrape_metrics: false}`, err: "neither probes"},
		{name: "probe false with modules", target: `{name: t, url: "http://127.0.0.1:1", probe: false, modules: [a]}`, err: "exclude each other"},
		{name: "another scalar", target: `{name: t, url: "http://127.0.0.1:1", modules: all}`, err: "cannot unmarshal"},
		{name: "none and an unknown key", target: `{name: t, url: "http://127.0.0.1:1", modules: none, probes: 1}`, err: "probes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load([]byte(head+"  - "+tc.target+"\n"), "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Targets[0]
			if got.Probe != tc.probe || strings.Join(got.Modules, ",") != strings.Join(tc.modules, ",") {
				t.Errorf("probe=%v modules=%v, want probe=%v modules=%v", got.Probe, got.Modules, tc.probe, tc.modules)
			}
		})
	}
}
