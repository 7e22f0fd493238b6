package discovery

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
)

// engineRecipes are the relabelling rules of docs/discovery.md's
// "Recipes for other engines" (SGLang, llama.cpp, Dynamo, in that order),
// each behind a placeholder discoverer.
func engineRecipes(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "discovery.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Recipes for other engines")
	if !ok {
		t.Fatal("docs/discovery.md has no section \"Recipes for other engines\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var out []string
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(section, -1) {
		_, rules, ok := strings.Cut(block[1], "relabel_configs:\n")
		if !ok {
			t.Fatalf("recipe without relabel_configs:\n%s", block[1])
		}
		out = append(out, "file_sd_configs: [{files: [unused.json]}]\nrelabel_configs:\n"+rules)
	}
	return out
}

// TestEngineRecipes: each recipe of docs/discovery.md keeps its engine's pods, and only those,
// with the engine key set to that engine's profile.
func TestEngineRecipes(t *testing.T) {
	const app, port, dynamo = "__meta_kubernetes_pod_label_app_kubernetes_io_name", "__meta_kubernetes_pod_container_port_name",
		"__meta_kubernetes_pod_label_nvidia_com_dynamo_component_type"
	pods := []model.LabelSet{
		{"__meta_kubernetes_pod_name": "sglang-0", app: "sglang", port: "http"},
		{"__meta_kubernetes_pod_name": "sglang-0-grpc", app: "sglang", port: "grpc"},
		{"__meta_kubernetes_pod_name": "llama-0", app: "llama-server", port: "http"},
		{"__meta_kubernetes_pod_name": "llama-1", app: "llama-cpp", port: "http"},
		{"__meta_kubernetes_pod_name": "frontend-0", dynamo: "frontend", port: "http"},
		{"__meta_kubernetes_pod_name": "worker-0", dynamo: "worker", port: "system"},
		{"__meta_kubernetes_pod_name": "vllm-0", app: "vllm", port: "http"},
	}
	for i, pod := range pods {
		pods[i] = maps.Clone(pod)
		pods[i][model.AddressLabel] = pod["__meta_kubernetes_pod_name"] + ":8000"
	}
	recipes := engineRecipes(t)
	if len(recipes) != 3 {
		t.Fatalf("%d recipes in docs/discovery.md, want SGLang, llama.cpp and Dynamo", len(recipes))
	}
	for i, tc := range []struct {
		engine string
		want   []string
	}{
		{"sglang", []string{"sglang-0"}},
		{"llamacpp", []string{"llama-0", "llama-1"}},
		{"dynamo", []string{"frontend-0"}},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			got := TargetsCounting(map[string][]*targetgroup.Group{"file_sd_configs[0]": {{Source: "pods", Targets: pods}}},
				nil, loadConfig(t, recipes[i]), nil, Counters{})
			if strings.Join(names(got), ",") != strings.Join(tc.want, ",") {
				t.Fatalf("targets %v, want %v", names(got), tc.want)
			}
			for _, tg := range got {
				if tg.Engine != tc.engine {
					t.Errorf("%s: engine %q, want %q", tg.Name, tg.Engine, tc.engine)
				}
			}
		})
	}
}

// TestEngineLabelUnknown: an __engine__ no profile has drops the target
// with an error naming the engines.
func TestEngineLabelUnknown(t *testing.T) {
	logs := &logBuffer{}
	cfg := loadConfig(t, `
file_sd_configs: [{files: [unused.json]}]
relabel_configs:
  - source_labels: [__meta_engine]
    target_label: __engine__
`)
	got := TargetsCounting(map[string][]*targetgroup.Group{"file_sd_configs[0]": {{Source: "pods", Targets: []model.LabelSet{
		{model.AddressLabel: "a:8000", "__meta_engine": "tgi"},
		{model.AddressLabel: "b:8000", "__meta_engine": "sglang"},
	}}}}, nil, cfg, logs.logger(), Counters{})
	if len(got) != 1 || got[0].Engine != "sglang" {
		t.Errorf("targets %v, want only b with engine sglang", got)
	}
	if !strings.Contains(logs.String(), `err="__engine__ \"tgi\" is not one of vllm, ray, sglang`) {
		t.Errorf("no error naming the engines:\n%s", logs)
	}
}
