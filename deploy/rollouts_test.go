package deploy

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	argov1 "github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/prometheus/prometheus/promql/parser"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/internal/rolloutcheck"
)

// promQL parses the expressions the tests check, as Prometheus does with
// its default options.
var promQL = parser.NewParser(parser.Options{})

// decodeStrict decodes a rendered object into one of the tools' own Go types,
// refusing any field the type does not have.
func decodeStrict(t *testing.T, o any, into any) {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("decoding into %T: %v\n%s", into, err, b)
	}
}

var rolloutKinds = []string{"AnalysisTemplate", "ClusterAnalysisTemplate", "MetricTemplate"}

// TestRolloutTemplatesOffByDefault: the rollout objects need the tools' CRDs,
// so the chart renders none unless asked.
func TestRolloutTemplatesOffByDefault(t *testing.T) {
	for _, r := range renderers(t) {
		objs, err := r.render(t, nil)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		for _, k := range rolloutKinds {
			if n := len(byKind(objs, k)); n != 0 {
				t.Errorf("%s: %d %s rendered by default", r.name, n, k)
			}
		}
	}
}

// argoArgs are an AnalysisRun's values for the args without a default.
var argoArgs = map[string]string{"group": "llama", "canary-target": "llama-canary"}

// TestArgoAnalysisTemplates: rollouts.argo.enabled renders an
// AnalysisTemplate and a ClusterAnalysisTemplate that decode into Argo
// Rollouts' own types (github.com/argoproj/argo-rollouts
// pkg/apis/rollouts/v1alpha1), whose queries are PromQL once Argo filled the
// args, that read the canary/stable recording rules, and whose conditions,
// evaluated with expr-lang/expr as Argo does, pass a good canary, fail a
// slow or failing one and are Inconclusive, never Error, on no data.
func TestArgoAnalysisTemplates(t *testing.T) {
	for _, r := range renderers(t) {
		objs, err := r.render(t, map[string]any{"rollouts": map[string]any{"argo": map[string]any{"enabled": true}}})
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		var specs []argov1.AnalysisTemplateSpec
		for _, o := range byKind(objs, "AnalysisTemplate") {
			var at argov1.AnalysisTemplate
			decodeStrict(t, o, &at)
			specs = append(specs, at.Spec)
		}
		for _, o := range byKind(objs, "ClusterAnalysisTemplate") {
			var at argov1.ClusterAnalysisTemplate
			decodeStrict(t, o, &at)
			specs = append(specs, at.Spec)
		}
		if len(specs) != 2 {
			t.Fatalf("%s: %d analysis templates, want an AnalysisTemplate and a ClusterAnalysisTemplate", r.name, len(specs))
		}
		for _, spec := range specs {
			args := map[string]string{}
			for _, a := range spec.Args {
				if a.Value != nil {
					args[a.Name] = *a.Value
				}
			}
			for k, v := range argoArgs {
				args[k] = v
			}
			if args["max-latency-ratio"] != "1.2" || args["window"] == "" {
				t.Errorf("%s: args %v: want the alerts' 1.2 and a window", r.name, args)
			}
			names := map[string]bool{}
			for _, m := range spec.Metrics {
				names[m.Name] = true
				if m.Provider.Prometheus == nil {
					t.Fatalf("%s: metric %s has no prometheus provider", r.name, m.Name)
				}
				q, err := rolloutcheck.ArgoArgs(m.Provider.Prometheus.Query, args)
				if err != nil {
					t.Fatalf("%s: %s: %v", r.name, m.Name, err)
				}
				if _, err := promQL.ParseExpr(q); err != nil {
					t.Errorf("%s: %s: query %q: %v", r.name, m.Name, q, err)
				}
				if addr, _ := rolloutcheck.ArgoArgs(m.Provider.Prometheus.Address, args); !strings.HasPrefix(addr, "http") {
					t.Errorf("%s: %s: address %q", r.name, m.Name, addr)
				}
				succ, err1 := rolloutcheck.ArgoArgs(m.SuccessCondition, args)
				fail, err2 := rolloutcheck.ArgoArgs(m.FailureCondition, args)
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %s: %v %v", r.name, m.Name, err1, err2)
				}
				good, bad := []float64{1.05}, []float64{3}
				if m.Name == "canary-success-ratio" {
					good, bad = []float64{1}, []float64{0.5}
				}
				for _, c := range []struct {
					result []float64
					want   string
				}{
					{good, rolloutcheck.Successful},
					{bad, rolloutcheck.Failed},
					{[]float64{}, rolloutcheck.Inconclusive},
					{[]float64{math.NaN()}, rolloutcheck.Inconclusive},
				} {
					if got, err := rolloutcheck.ArgoPhase(c.result, succ, fail); got != c.want {
						t.Errorf("%s: %s on %v: %s (%v), want %s", r.name, m.Name, c.result, got, err, c.want)
					}
				}
			}
			for _, want := range []string{"canary-stable-latency-ratio", "canary-success-ratio", "canary-baseline-ratio"} {
				if !names[want] {
					t.Errorf("%s: no metric %s", r.name, want)
				}
			}
			queries := ""
			for _, m := range spec.Metrics {
				queries += m.Provider.Prometheus.Query + "\n"
			}
			// The recording rules the mixin writes for rollouts are what they read.
			for _, family := range []string{"_seconds:canary_stable_ratio", "group_module_track:vllm_probe_success:ratio", "vllm_probe_regression_ratio"} {
				if !strings.Contains(queries, family) {
					t.Errorf("%s: no query reads %s", r.name, family)
				}
			}
		}
	}
}

// TestArgoConditionGuard: the guard matters. Argo evaluates an unguarded
// result[0] on no data to an error (the run ends in Error, which aborts a
// Rollout like a failure); the chart's guarded condition makes it
// Inconclusive.
func TestArgoConditionGuard(t *testing.T) {
	if got, err := rolloutcheck.ArgoPhase([]float64{}, "result[0] <= 1.2", ""); got != rolloutcheck.Error || err == nil {
		t.Errorf("unguarded result[0] on no data: %s (%v), want Error", got, err)
	}
	if got, _ := rolloutcheck.ArgoPhase([]float64{}, "len(result) > 0 && result[0] <= 1.2", "len(result) > 0 && result[0] > 1.2"); got != rolloutcheck.Inconclusive {
		t.Errorf("guarded: %s, want Inconclusive", got)
	}
}

// TestFlaggerTemplates: rollouts.flagger.enabled renders MetricTemplates that
// decode into Flagger's own type (github.com/fluxcd/flagger
// pkg/apis/flagger/v1beta1), whose queries render with Flagger's template
// functions into PromQL, and a ConfigMap with a Canary analysis that decodes
// into Flagger's CanaryAnalysis, uses those templates with a thresholdRange
// each, and calls /burst (rollout) and /gate (confirm-promotion).
func TestFlaggerTemplates(t *testing.T) {
	for _, r := range renderers(t) {
		objs, err := r.render(t, map[string]any{"rollouts": map[string]any{"flagger": map[string]any{"enabled": true}}})
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		templates := map[string]flaggerv1.MetricTemplate{}
		for _, o := range byKind(objs, "MetricTemplate") {
			var mt flaggerv1.MetricTemplate
			decodeStrict(t, o, &mt)
			if mt.Spec.Provider.Type != "prometheus" || !strings.HasPrefix(mt.Spec.Provider.Address, "http") {
				t.Errorf("%s: %s: provider %+v", r.name, mt.Name, mt.Spec.Provider)
			}
			templates[mt.Name] = mt
		}
		if len(templates) != 3 {
			t.Fatalf("%s: %d MetricTemplates, want 3", r.name, len(templates))
		}
		var cm object
		for _, o := range byKind(objs, "ConfigMap") {
			if strings.HasSuffix(o.name(), "-flagger-canary") {
				cm = o
			}
		}
		snippet, _ := dig(cm, "data", "canary-analysis.yaml").(string)
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(snippet), &doc); err != nil {
			t.Fatalf("%s: the Canary snippet: %v\n%s", r.name, err, snippet)
		}
		var canary struct {
			Analysis flaggerv1.CanaryAnalysis `json:"analysis"`
		}
		decodeStrict(t, normalize(doc), &canary)
		a := canary.Analysis
		if len(a.Metrics) != 3 {
			t.Fatalf("%s: the Canary analysis has %d metrics, want 3", r.name, len(a.Metrics))
		}
		for _, m := range a.Metrics {
			mt, ok := templates[m.TemplateRef.Name]
			if !ok {
				t.Errorf("%s: metric %s refers to MetricTemplate %q, which the chart does not render", r.name, m.Name, m.TemplateRef.Name)
				continue
			}
			if m.ThresholdRange == nil || (m.ThresholdRange.Min == nil && m.ThresholdRange.Max == nil) {
				t.Errorf("%s: metric %s has no thresholdRange", r.name, m.Name)
			}
			q, err := rolloutcheck.FlaggerQuery(mt.Spec.Query, flaggerv1.MetricTemplateModel{
				Name: "llama", Namespace: "ns", Target: "llama", Interval: "1m", Variables: m.TemplateVariables})
			if err != nil {
				t.Errorf("%s: %s: %v", r.name, m.Name, err)
				continue
			}
			if _, err := promQL.ParseExpr(q); err != nil {
				t.Errorf("%s: %s: query %q: %v", r.name, m.Name, q, err)
			}
			if pass, why := rolloutcheck.FlaggerCheck(nil, m.ThresholdRange); pass {
				t.Errorf("%s: %s passes with no data", r.name, m.Name)
			} else if why != "no values found" {
				t.Errorf("%s: %s: %s", r.name, m.Name, why)
			}
		}
		hooks := map[flaggerv1.HookType]string{}
		for _, h := range a.Webhooks {
			hooks[h.Type] = h.URL
			if h.Type == flaggerv1.RolloutHook && (h.Metadata == nil || (*h.Metadata)["target"] == "" || (*h.Metadata)["probes"] == "") {
				t.Errorf("%s: the burst webhook carries no target and probes: %+v", r.name, h.Metadata)
			}
		}
		if !strings.HasSuffix(hooks[flaggerv1.RolloutHook], "/burst") {
			t.Errorf("%s: rollout webhook %q, want vllm_prober's /burst", r.name, hooks[flaggerv1.RolloutHook])
		}
		if !strings.Contains(hooks[flaggerv1.ConfirmPromotionHook], "/gate?target=") {
			t.Errorf("%s: confirm-promotion webhook %q, want vllm_prober's /gate", r.name, hooks[flaggerv1.ConfirmPromotionHook])
		}
	}
}
