package mixin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineSleepingThreshold: alerts.engine_sleeping.threshold of
// mixin/slo.yml sets how long an engine sleeps before VLLMEngineSleeping
// fires. With 600 seconds, an engine asleep for 20 minutes fires at 12m
// (10m of sleep, then the rule's for: 1m) and not at 10m.
func TestEngineSleepingThreshold(t *testing.T) {
	slo, err := os.ReadFile(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	const def = "engine_sleeping: {severity: warning, threshold: 3600, for: 1m}"
	if !strings.Contains(string(slo), def) {
		t.Fatalf("mixin/slo.yml no longer has %q", def)
	}
	dir := t.TempDir()
	sloFile := filepath.Join(dir, "slo.yml")
	if err := os.WriteFile(sloFile, []byte(strings.Replace(string(slo), def, "engine_sleeping: {severity: warning, threshold: 600, for: 1m}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(Options{SLOFile: sloFile, OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	test := `rule_files: [` + AlertsFile + `]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'vllm_server_sleep_level{job="vllm_prober",instance="prober:9116",target="a",model="m"}'
        values: '1x30'
    alert_rule_test:
      - eval_time: 10m
        alertname: VLLMEngineSleeping
        exp_alerts: []
      - eval_time: 12m
        alertname: VLLMEngineSleeping
        exp_alerts:
          - exp_labels: {job: vllm_prober, instance: 'prober:9116', target: a, model: m, severity: warning, layer: endpoint}
            exp_annotations:
              summary: 'vLLM engine has been asleep for long.'
              description: "a (model m) has reported vLLM's sleep mode (level 1.00) for more than 600s: wake it (POST /wake_up) or take it out of rotation."
              runbook_url: 'https://github.com/vllm-prober/vllm_prober/blob/main/docs/runbook.md#vllmenginesleeping'
`
	file := filepath.Join(dir, "sleep_test.yml")
	if err := os.WriteFile(file, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool(t), "test", "rules", file)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
