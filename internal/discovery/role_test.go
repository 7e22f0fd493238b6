package discovery

import (
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
)

// TestRoleLabel: a pod's llm-d.ai/role label, relabelled to __role__, is the
// target's role; llm-d's prefill-decode is both, and a value of none of the
// roles drops the pod with an error naming them.
func TestRoleLabel(t *testing.T) {
	logs := &logBuffer{}
	cfg := loadConfig(t, `
file_sd_configs: [{files: [unused.json]}]
relabel_configs:
  - source_labels: [__meta_kubernetes_pod_label_llm_d_ai_role]
    target_label: __role__
`)
	const l = "__meta_kubernetes_pod_label_llm_d_ai_role"
	got := TargetsCounting(map[string][]*targetgroup.Group{"file_sd_configs[0]": {{Source: "pods", Targets: []model.LabelSet{
		{model.AddressLabel: "p:8000", l: "prefill"},
		{model.AddressLabel: "d:8000", l: "decode"},
		{model.AddressLabel: "b:8000", l: "prefill-decode"},
		{model.AddressLabel: "n:8000"},
		{model.AddressLabel: "x:8000", l: "encode"},
	}}}}, nil, cfg, logs.logger(), Counters{})
	roles := map[string]string{}
	for _, tg := range got {
		roles[tg.URL] = tg.Role
	}
	want := map[string]string{"http://p:8000": "prefill", "http://d:8000": "decode", "http://b:8000": "both", "http://n:8000": ""}
	if len(roles) != len(want) {
		t.Errorf("targets %v, want %v", roles, want)
	}
	for u, r := range want {
		if got, ok := roles[u]; !ok || got != r {
			t.Errorf("%s: role %q (kept %v), want %q", u, got, ok, r)
		}
	}
	if !strings.Contains(logs.String(), `err="__role__ \"encode\" is not one of prefill, decode, both"`) {
		t.Errorf("no error naming the roles:\n%s", logs)
	}
}
