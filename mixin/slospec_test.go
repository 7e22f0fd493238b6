package mixin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	slothv1 "github.com/slok/sloth/pkg/prometheus/api/v1"
	"go.yaml.in/yaml/v3"

	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// sloDir holds the committed SLO specs (`rules generate --format=pyrra|sloth|openslo`).
const sloDir = "alerts/slo"

func renderedSpecs(t *testing.T) map[string][]byte {
	t.Helper()
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string][]byte{}
	for _, f := range []string{FormatPyrra, FormatSloth, FormatOpenSLO} {
		files, err := RenderFormat(spec, "mixin/slo.yml", f, false)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range files {
			all[k] = v
		}
	}
	return all
}

// TestSLOSpecsUpToDate asserts that alerts/slo/ holds exactly the generator's
// output for the committed mixin/slo.yml (go test ./mixin/ -update rewrites it).
func TestSLOSpecsUpToDate(t *testing.T) {
	want := renderedSpecs(t)
	dir := root(sloDir)
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "*.yml"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	got, _ := filepath.Glob(filepath.Join(dir, "*.yml"))
	var names []string
	for _, p := range got {
		names = append(names, filepath.Base(p))
	}
	if w := slices.Sorted(maps.Keys(want)); !slices.Equal(names, w) {
		t.Errorf("%s holds %v, the generator writes %v; run `go test ./mixin/ -update` (make rules)", sloDir, names, w)
	}
	for name, b := range want {
		have, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if !bytes.Equal(have, b) {
			t.Errorf("%s/%s differs from the generator's output; run `go test ./mixin/ -update` (make rules)", sloDir, name)
		}
	}
}

// yamlDocs decodes every document of a YAML stream into JSON values, as a
// Kubernetes API server or an OpenSLO tool sees them.
func yamlDocs(t *testing.T, b []byte) []any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		jv, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, jv)
	}
}

// strictObjects sets additionalProperties: false on every object schema that
// lists properties and says nothing about others: what the API server's
// structural-schema pruning does with unknown fields (kubectl apply
// --validate=strict rejects them).
func strictObjects(v any) {
	switch n := v.(type) {
	case map[string]any:
		if _, ok := n["properties"]; ok {
			if _, ok := n["additionalProperties"]; !ok {
				n["additionalProperties"] = false
			}
		}
		for _, c := range n {
			strictObjects(c)
		}
	case []any:
		for _, c := range n {
			strictObjects(c)
		}
	}
}

// pyrraSchema compiles the openAPIV3Schema of Pyrra's CRD (testdata/pyrra).
func pyrraSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile("testdata/pyrra/pyrra.dev_servicelevelobjectives.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := yamlDocs(t, b)[0]
	versions := crd.(map[string]any)["spec"].(map[string]any)["versions"].([]any)
	schema := versions[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"]
	strictObjects(schema)
	schema.(map[string]any)["properties"].(map[string]any)["metadata"].(map[string]any)["additionalProperties"] = true
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource("pyrra.json", schema); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("pyrra.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPyrraSpecsValidate validates the Pyrra ServiceLevelObjectives (classic
// and native latency indicators) against the CRD's schema, strictly.
func TestPyrraSpecsValidate(t *testing.T) {
	s := pyrraSchema(t)
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, native := range []bool{false, true} {
		files, err := RenderFormat(spec, "mixin/slo.yml", FormatPyrra, native)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != len(spec.slis()) {
			t.Errorf("%d Pyrra files, want one per SLO (%d)", len(files), len(spec.slis()))
		}
		for name, b := range files {
			docs := yamlDocs(t, b)
			if len(docs) != 1 {
				t.Fatalf("%s: %d documents, want 1", name, len(docs))
			}
			obj := docs[0].(map[string]any)
			if obj["apiVersion"] != "pyrra.dev/v1alpha1" || obj["kind"] != "ServiceLevelObjective" {
				t.Errorf("%s: %v %v", name, obj["apiVersion"], obj["kind"])
			}
			if err := s.Validate(docs[0]); err != nil {
				t.Errorf("%s (native %v) does not validate against Pyrra's CRD: %v", name, native, err)
			}
			ind := obj["spec"].(map[string]any)["indicator"].(map[string]any)
			if _, isNative := ind["latencyNative"]; isNative != native && !strings.Contains(name, SLOAvailability) && !strings.Contains(name, SLOGoodput) {
				t.Errorf("%s: latencyNative present = %v, want %v", name, isNative, native)
			}
		}
	}
	// The schema rejects what Pyrra would: a numeric target, an unknown field.
	for _, bad := range []string{
		"apiVersion: pyrra.dev/v1alpha1\nkind: ServiceLevelObjective\nmetadata: {name: x}\nspec: {target: 99.5, window: 30d, indicator: {ratio: {errors: {metric: a}, total: {metric: b}}}}\n",
		"apiVersion: pyrra.dev/v1alpha1\nkind: ServiceLevelObjective\nmetadata: {name: x}\nspec: {target: '99.5', window: 30d, indicator: {ratio: {error: {metric: a}, total: {metric: b}}}}\n",
	} {
		if err := s.Validate(yamlDocs(t, []byte(bad))[0]); err == nil {
			t.Errorf("the Pyrra schema accepts an invalid object:\n%s", bad)
		}
	}
}

// TestOpenSLOSpecsValidate validates the OpenSLO documents against OpenSLO's
// published v1 JSON schemas (testdata/openslo-v1).
func TestOpenSLOSpecsValidate(t *testing.T) {
	c := jsonschema.NewCompiler()
	err := filepath.WalkDir("testdata/openslo-v1", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/openslo-v1", p)
		return c.AddResource("https://openslo.com/schemas/v1/"+filepath.ToSlash(rel), doc)
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("https://openslo.com/schemas/v1/openslo.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	b := renderedSpecs(t)[OpenSLOFile]
	docs := yamlDocs(t, b)
	kinds := map[string]int{}
	for i, d := range docs {
		kinds[d.(map[string]any)["kind"].(string)]++
		if err := s.Validate(d); err != nil {
			t.Errorf("OpenSLO document %d does not validate: %v", i, err)
		}
	}
	if kinds["Service"] != 1 || kinds["SLO"] != 4 {
		t.Errorf("OpenSLO kinds %v, want 1 Service and 4 SLOs (availability, ttft, e2e, goodput)", kinds)
	}
	bad := "apiVersion: openslo/v1\nkind: SLO\nmetadata: {name: x}\nspec: {service: vllm, objectives: [{target: 0.99}]}\n" // no budgetingMethod
	if err := s.Validate(yamlDocs(t, []byte(bad))[0]); err == nil {
		t.Error("the OpenSLO schema accepts an SLO without budgetingMethod")
	}
}

// TestSlothSpecDecodes decodes the Sloth spec with Sloth's own prometheus/v1
// types, rejecting unknown fields, and checks what Sloth requires of it.
func TestSlothSpecDecodes(t *testing.T) {
	docs := yamlDocs(t, renderedSpecs(t)[SlothFile])
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1", len(docs))
	}
	j, err := json.Marshal(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var sp slothv1.Spec
	if err := dec.Decode(&sp); err != nil {
		t.Fatalf("Sloth's prometheus/v1 types reject the spec: %v", err)
	}
	if sp.Version != slothv1.Version || sp.Service == "" || len(sp.SLOs) != 4 {
		t.Errorf("version %q service %q, %d SLOs", sp.Version, sp.Service, len(sp.SLOs))
	}
	for _, o := range sp.SLOs {
		if o.SLI.Events == nil || !strings.Contains(o.SLI.Events.ErrorQuery, "{{.window}}") || !strings.Contains(o.SLI.Events.TotalQuery, "{{.window}}") {
			t.Errorf("%s: events SLI without {{.window}} in its queries", o.Name)
		}
		if o.Objective <= 0 || o.Objective >= 100 || o.Alerting.Name == "" {
			t.Errorf("%s: objective %v, alert %q", o.Name, o.Objective, o.Alerting.Name)
		}
	}
}

// slothScenarios are promtool series (the same probes as alerts/tests/slo_test.yml)
// with the evaluation times at which the 1h/5m page must (fire) and must not
// (quiet) fire, both for the mixin's alert and for Sloth's page alert.
var slothScenarios = []struct {
	name, alert, series string
	quiet, fire         string
}{
	{"availability: every probe fails from 61m (2 probes a minute)", "VLLMAvailabilityBudgetBurn", `
      - series: 'vllm_probe_attempts_total{job="vllm_prober",instance="prober:9116",target="a",module="chat",model="llama-8b"}'
        values: '0+2x90'
      - series: 'vllm_probe_failures_total{job="vllm_prober",instance="prober:9116",target="a",module="chat",model="llama-8b",reason="timeout"}'
        values: '0x60 2+2x30'
      - series: 'vllm_probe_success{job="vllm_prober",instance="prober:9116",target="a",module="chat",model="llama-8b"}'
        values: '1x60 0x30'`, "60m", "70m"},
	{"ttft: half the probes exceed 2s from 61m", "VLLMTTFTBudgetBurn", `
      - series: 'vllm_probe_time_to_first_token_seconds_bucket{job="vllm_prober",instance="prober:9116",target="a",module="chat",model="llama-8b",le="2"}'
        values: '0+2x60 121+1x30'
      - series: 'vllm_probe_time_to_first_token_seconds_bucket{job="vllm_prober",instance="prober:9116",target="a",module="chat",model="llama-8b",le="+Inf"}'
        values: '0+2x90'
      - series: 'vllm_probe_time_to_first_token_seconds_count{job="vllm_prober",instance="prober:9116",target="a",module="chat",model="llama-8b"}'
        values: '0+2x90'`, "60m", "85m"},
	{"goodput: from 61m every probe succeeds but misses its TPOT objective", "VLLMGoodputBudgetBurn", `
      - series: 'vllm_probe_goodput_probes_total{job="vllm_prober",instance="prober:9116",target="a",module="chat",model="llama-8b",result="good"}'
        values: '0+2x60 120x30'
      - series: 'vllm_probe_goodput_probes_total{job="vllm_prober",instance="prober:9116",target="a",module="chat",model="llama-8b",result="bad"}'
        values: '0x60 2+2x30'`, "60m", "75m"},
}

// TestSlothRulesAgree generates rules from the Sloth spec with Sloth itself
// (`sloth generate`, built by scripts/e2e-tools.sh sloth) and runs them with
// promtool next to the mixin's rules on the same series: Sloth's page alert and
// the mixin's 1h/5m burn-rate alert are both quiet before the burn and both
// firing after it. `make e2e` sets E2E_SLOTH_DIR; without it the test skips.
func TestSlothRulesAgree(t *testing.T) {
	dir := os.Getenv("E2E_SLOTH_DIR")
	if dir == "" {
		testtool.Skip(t, "sloth CLI (E2E_SLOTH_DIR)", "make e2e installs it once with scripts/e2e-tools.sh sloth")
	}
	tmp := t.TempDir()
	slothRules := filepath.Join(tmp, "sloth.rules.yml")
	out, err := exec.Command(filepath.Join(dir, "sloth"), "generate", "--no-log",
		"-i", root(sloDir+"/"+SlothFile), "-o", slothRules).CombinedOutput()
	if err != nil {
		t.Fatalf("sloth generate: %v\n%s", err, out)
	}
	abs := func(p string) string {
		a, err := filepath.Abs(root(p))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files:\n  - %s\n  - %s\n  - %s\nevaluation_interval: 1m\ntests:\n",
		yamlQuote(abs("alerts/"+RulesFile)), yamlQuote(abs("alerts/"+AlertsFile)), yamlQuote(slothRules))
	count := func(alert, sel, at string, want bool) string {
		exp := "[]"
		if want {
			exp = "\n          - labels: '{}'\n            value: 1"
		}
		return fmt.Sprintf("      - expr: 'count(ALERTS{alertname=%q,alertstate=\"firing\",target=\"a\",%s})'\n        eval_time: %s\n        exp_samples: %s\n",
			alert, sel, at, exp)
	}
	for _, sc := range slothScenarios {
		fmt.Fprintf(&b, "  - name: %s\n    interval: 1m\n    input_series:%s\n    promql_expr_test:\n", yamlQuote(sc.name), sc.series)
		for _, sel := range []string{`long_window="1h"`, `sloth_severity="page"`} {
			b.WriteString(count(sc.alert, sel, sc.quiet, false))
			b.WriteString(count(sc.alert, sel, sc.fire, true))
		}
	}
	testFile := filepath.Join(tmp, "sloth_agree_test.yml")
	if err := os.WriteFile(testFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "test", "rules", testFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules (mixin and Sloth rules on the same series): %v\n%s\n%s", err, out, b.String())
	}
}
