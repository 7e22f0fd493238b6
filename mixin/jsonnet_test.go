package mixin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
	"go.yaml.in/yaml/v3"
)

// TestJsonnetMixinUpToDate asserts that mixin/*.libsonnet are the generator's
// output for the committed mixin/slo.yml and dashboards (-update rewrites them).
func TestJsonnetMixinUpToDate(t *testing.T) {
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := RenderJsonnet(spec, "mixin/slo.yml")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		path := root("mixin/" + name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output (%v); run `go test ./mixin/ -update` (make rules)", path, err)
		}
	}
}

// evalMixin evaluates mixin.libsonnet with go-jsonnet, with a _config override
// (jsonnet object source, "" for none).
func evalMixin(t *testing.T, override string) (rules, alerts any, dashboards map[string]any) {
	t.Helper()
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{root("mixin")}})
	snippet := "local m = (import 'mixin.libsonnet')"
	if override != "" {
		snippet += " + { _config+:: " + override + " }"
	}
	snippet += "; { rules: m.prometheusRules, alerts: m.prometheusAlerts, dashboards: m.grafanaDashboards }"
	out, err := vm.EvaluateAnonymousSnippet("test.jsonnet", snippet)
	if err != nil {
		t.Fatalf("go-jsonnet: %v", err)
	}
	var v struct {
		Rules      any            `json:"rules"`
		Alerts     any            `json:"alerts"`
		Dashboards map[string]any `json:"dashboards"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v.Rules, v.Alerts, v.Dashboards
}

// asJSON decodes YAML or JSON into the values encoding/json produces.
func asJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(j, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func diffJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	gl, wl := strings.Split(string(g), "\n"), strings.Split(string(w), "\n")
	for i := 0; i < len(gl) && i < len(wl); i++ {
		if gl[i] != wl[i] {
			t.Errorf("%s differs at line %d:\n jsonnet: %s\n want:    %s", what, i+1, gl[i], wl[i])
			return
		}
	}
	t.Errorf("%s differs in length: %d lines vs %d", what, len(gl), len(wl))
}

// TestJsonnetMixin evaluates mixin.libsonnet with go-jsonnet: at the default
// _config it yields exactly the committed alerts/ and dashboards/; with an
// overridden _config it yields what the Go generator renders for a spec with
// the same values, and dashboards with the overridden uids and tags.
func TestJsonnetMixin(t *testing.T) {
	rules, alerts, dashboards := evalMixin(t, "")
	for _, f := range []struct {
		name string
		got  any
	}{{RulesFile, rules}, {AlertsFile, alerts}} {
		b, err := os.ReadFile(root("alerts/" + f.name))
		if err != nil {
			t.Fatal(err)
		}
		diffJSON(t, "default prometheus"+map[string]string{RulesFile: "Rules", AlertsFile: "Alerts"}[f.name]+" vs alerts/"+f.name, f.got, asJSON(t, b))
	}
	committed, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	for n := range committed {
		if !strings.HasSuffix(n, ".json") {
			delete(committed, n)
		}
	}
	if len(dashboards) != len(committed) {
		t.Errorf("grafanaDashboards has %d dashboards, dashboards/ %d", len(dashboards), len(committed))
	}
	for name := range committed {
		b, err := os.ReadFile(root("dashboards/" + name))
		if err != nil {
			t.Fatal(err)
		}
		diffJSON(t, "default grafanaDashboards["+name+"] vs dashboards/"+name, dashboards[name], asJSON(t, b))
	}

	// Overridden: the Go generator renders the same values for comparison.
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	spec.ProberJob = "vllm-prober-canary"
	kv, hung := 0.9, 0.75
	spec.Alerts.KVCacheSaturated.Threshold = &kv
	spec.Alerts.EngineHung.Threshold = &hung
	spec.SLOs.Availability.Objective = 99.9
	spec.SLOs.TTFT.Objective = 99.5
	want, err := Render(spec, "x")
	if err != nil {
		t.Fatal(err)
	}
	rules, alerts, dashboards = evalMixin(t, `{
		proberSelector: 'job="vllm-prober-canary"', proberJob: 'vllm-prober-canary',
		kvCacheSaturatedThreshold: 0.9, engineHungThreshold: 0.75,
		availabilityTarget: 99.9, ttftTarget: 99.5,
		dashboardUIDPrefix: 'acme-llm', dashboardTags: ['acme'], dashboardLinkTags: ['acme'],
	}`)
	diffJSON(t, "overridden prometheusRules", rules, asJSON(t, want[RulesFile]))
	diffJSON(t, "overridden prometheusAlerts", alerts, asJSON(t, want[AlertsFile]))
	var a bytes.Buffer
	enc := json.NewEncoder(&a)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(alerts); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`job=\"vllm-prober-canary\"`, "> 0.9", "(1 - 0.999)", "(1 - 0.995)", ">= 0.75", "No target of job \\\"vllm-prober-canary\\\""} {
		if !strings.Contains(a.String(), s) {
			t.Errorf("overridden prometheusAlerts lack %s", s)
		}
	}
	for name, d := range dashboards {
		m := d.(map[string]any)
		if uid, _ := m["uid"].(string); !strings.HasPrefix(uid, "acme-llm-") {
			t.Errorf("%s: uid %q, want the acme-llm prefix", name, uid)
		}
		if tags, _ := json.Marshal(m["tags"]); string(tags) != `["acme"]` {
			t.Errorf("%s: tags %s", name, tags)
		}
	}
}

// TestJsonnetREADMESnippet evaluates the README's kube-prometheus snippet with
// go-jsonnet, the mixin vendored where `jb install` puts it.
func TestJsonnetREADMESnippet(t *testing.T) {
	b, err := os.ReadFile(root("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```jsonnet\n")
	snippet, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no ```jsonnet block")
	}
	vendor := t.TempDir()
	dir := vendor + "/github.com/vllm-prober/vllm_prober"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(root("mixin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, dir+"/mixin"); err != nil {
		t.Fatal(err)
	}
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{vendor}})
	out, err := vm.EvaluateAnonymousSnippet("README.jsonnet", snippet)
	if err != nil {
		t.Fatalf("go-jsonnet on the README's snippet: %v", err)
	}
	var objs map[string]map[string]any
	if err := json.Unmarshal([]byte(out), &objs); err != nil {
		t.Fatal(err)
	}
	rule := objs["vllm-prober-prometheusrule"]
	spec, _ := json.Marshal(rule["spec"])
	if rule["kind"] != "PrometheusRule" || !strings.Contains(string(spec), `job=\"vllm-prober\", namespace=\"monitoring\"`) {
		t.Errorf("the snippet's PrometheusRule: kind %v, selector not applied", rule["kind"])
	}
	if len(objs) != 4 {
		t.Errorf("the snippet yields %d objects, want the PrometheusRule and 3 dashboards", len(objs))
	}
}
