package mixin

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestEngineVariableSelectsTargets runs every dashboard's target variable
// query in Prometheus' engine through promtool, over a fleet of a vLLM and
// an SGLang target, an unrecognised /metrics and a probe-only target (no
// engine label): with the engine variable at one engine the targets are
// that engine's; with a mix, the mix's; at All (the variable's allValue)
// every target, the probe-only one included. The panels select by $target, so they follow.
func TestEngineVariableSelectsTargets(t *testing.T) {
	paths, err := filepath.Glob(root("dashboards/*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("dashboards: %v %v", paths, err)
	}
	labelValues := regexp.MustCompile(`^label_values\((.*), target\)$`)
	var b strings.Builder
	b.WriteString(`rule_files: []
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'vllm_server_up{job="vllm_prober",target="v"}'
        values: '1x10'
      - series: 'vllm_server_engine_recognized{job="vllm_prober",target="v",engine="vllm"}'
        values: '1x10'
      - series: 'vllm_server_up{job="vllm_prober",target="s"}'
        values: '1x10'
      - series: 'vllm_server_engine_recognized{job="vllm_prober",target="s",engine="sglang"}'
        values: '1x10'
      - series: 'vllm_server_engine_recognized{job="vllm_prober",target="u",engine="unknown"}'
        values: '0x10'
      - series: 'vllm_probe_attempts_total{job="vllm_prober",target="p",module="chat"}'
        values: '0+1x10'
    promql_expr_test:
`)
	n := 0
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Templating struct {
				List []struct {
					Name       string `json:"name"`
					Definition string `json:"definition"`
					AllValue   string `json:"allValue"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		engineAll := ""
		for _, v := range d.Templating.List {
			if v.Name == "engine" {
				engineAll = v.AllValue
			}
		}
		if engineAll == "" {
			t.Errorf("%s has no engine variable with an All value", filepath.Base(p))
		}
		for _, v := range d.Templating.List {
			if v.Name != "target" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil || !strings.Contains(m[1], `engine=~"$engine"`) {
				t.Errorf("%s: target variable %q does not select by $engine", filepath.Base(p), v.Definition)
				continue
			}
			for _, tc := range []struct {
				engine  string
				targets []string
			}{
				{"sglang", []string{"s"}},
				{"vllm", []string{"v"}},
				{RegexValue([]string{"vllm", "sglang"}), []string{"s", "v"}},
				{"unknown", []string{"u"}},
				{engineAll, []string{"p", "s", "u", "v"}},
			} {
				expr := "group by (target) (" + Interpolate(m[1], map[string]string{"job": ".+", "engine": tc.engine}, time.Minute) + ")"
				fmt.Fprintf(&b, "      - expr: %s\n        eval_time: 5m\n        exp_samples:\n", yamlQuote(expr))
				for _, target := range tc.targets {
					fmt.Fprintf(&b, "          - labels: '{target=%q}'\n            value: 1\n", target)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no target variable query found")
	}
	file := filepath.Join(t.TempDir(), "engine_var_test.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "test", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules (%d target variable queries): %v\n%s\n%s", n, err, out, b.String())
	}
}
