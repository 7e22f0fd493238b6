package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestYAMLErrorsNameNoGoTypes: no configuration error names a Go type (such as
// config.plain); unknown keys are placed by section and line instead.
func TestYAMLErrorsNameNoGoTypes(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid-*.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := LoadFile(f)
		if err == nil {
			t.Errorf("%s loaded", f)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, " in type ") || strings.Contains(msg, "plain") {
			t.Errorf("%s: error names a Go type: %s", f, msg)
		}
	}
	for _, c := range []struct{ yaml, want string }{
		{"global: {probe_intervall: 30s}\n", "global: yaml: unmarshal errors:\n  line 1: field probe_intervall not found in global"},
		{"modules: {m: {prober: chat, mesages: []}}\n", "module \"m\": yaml: unmarshal errors:\n  line 1: field mesages not found in module \"m\""},
		{"targets: [{url: 'http://a:1', nme: a}]\n", "targets[0]: yaml: unmarshal errors:\n  line 1: field nme not found in targets[0]"},
		{"file_sd_configs: [{files: [a.json], bogus: 1}]\n", "file_sd_configs[0]: yaml: unmarshal errors:\n  line 1: field bogus not found in file_sd_configs[0]"},
		{"kubernetes_sd_configs: [{role: pod, namespace: [a]}]\n", "kubernetes_sd_configs[0]: yaml: unmarshal errors:\n  line 1: field namespace not found in kubernetes_sd_configs[0]"},
		// Values of the wrong shape say which shape was expected.
		{"global: [1]\n", "global: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into a mapping"},
		{"targets: {a: 1}\n", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!map into a list"},
		{"modules: [1]\n", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into a mapping"},
		{"modules: {m: 3}\n", "module \"m\": yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `3` into a mapping"},
		{"modules: {m: {prober: chat, messages: 3}}\n", "module \"m\": yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `3` into a list"},
		{"modules: {m: {prober: completions, prompt: x, max_tokens: abc}}\n", "module \"m\": yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `abc` into a number"},
		{"targets: [5]\n", "targets[0]: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `5` into a mapping"},
		{"baselines: 3\n", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `3` into a list"},
		{"file_sd_configs: 3\n", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `3` into a list"},
	} {
		if _, err := Load([]byte(c.yaml), ""); err == nil || err.Error() != c.want {
			t.Errorf("Load(%q) = %v, want %q", c.yaml, err, c.want)
		}
	}
}
