package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	argov1 "github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/internal/rolloutcheck"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// The rollout analyses run on rules whose windows are scaled by
// rolloutScale: the nominal 1m window (the recorded series' names keep
// "1m") is 30s, about 15 probes per track.
const (
	rolloutScale    = 0.5
	rolloutWindow   = "1m"
	rolloutEvalTime = 30 * time.Second
	// The simulators' latencies: long enough that a loaded 2-core machine's
	// scheduling noise stays a few percent of them.
	rolloutTTFT, rolloutITL, rolloutSlowITL = "200ms", "20ms", "60ms"
)

// argoTools returns the Argo Rollouts controller and its CRDs, which `make
// e2e` builds and caches (scripts/e2e-tools.sh argo-rollouts), and a
// Prometheus 3 server, or skips with a message: they take minutes to build,
// so `make test` leaves this test out.
func argoTools(t *testing.T) (controller, crds, prometheus string) {
	t.Helper()
	adir, pdir := os.Getenv("E2E_ARGO_ROLLOUTS_DIR"), os.Getenv("E2E_PROMETHEUS3_DIR")
	if adir == "" || pdir == "" {
		testtool.Skip(t, "the Argo Rollouts controller and Prometheus 3",
			"make e2e builds and caches them with scripts/e2e-tools.sh argo-rollouts prometheus3 and sets E2E_ARGO_ROLLOUTS_DIR and E2E_PROMETHEUS3_DIR")
	}
	controller, crds, prometheus = filepath.Join(adir, "rollouts-controller"), filepath.Join(adir, "crds"), filepath.Join(pdir, "prometheus")
	for _, p := range []string{controller, crds, prometheus} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("VLLM_PROBER_ARGO_ROLLOUTS_DIR/VLLM_PROBER_PROMETHEUS3_DIR: %v", err)
		}
	}
	return controller, crds, prometheus
}

// TestKubernetesArgoRolloutsAnalysis runs the chart's Argo Rollouts
// AnalysisTemplate with the real Argo Rollouts analysis controller (out of
// cluster, --controllers=analysis) against a real Kubernetes API server and a
// real Prometheus 3 that scrapes vllm_prober probing four vllm_sim:
//
//   - group "llama": two equal simulators (TTFT 200ms, ITL 20ms), canary and stable. The
//     AnalysisRun is Successful; then, with the canary's ITL tripled through
//     its admin API, Failed.
//   - group "sparse": a canary and a stable probed every 20 seconds, so a
//     window (30s) holds one or two probes, never the three the recording
//     rules ask for. The AnalysisRun is Inconclusive, never Error; the same
//     metric with the guard taken out of its conditions (a control run)
//     ends in Error, as an unguarded result[0] on no data does.
//
// At each step every successCondition and failureCondition of the template
// is also evaluated with expr-lang/expr on the same query's result from the
// same Prometheus, and every Flagger MetricTemplate query of the chart runs
// there with its thresholdRange checked as Flagger does.
func TestKubernetesArgoRolloutsAnalysis(t *testing.T) {
	controllerBin, crdDir, promBin := argoTools(t)
	helm, err := exec.LookPath("helm")
	if err != nil {
		t.Fatalf("the chart is rendered with helm, which is not on $PATH (make e2e installs it): %v", err)
	}
	proberBin, simBin := binaries(t)
	ctx := t.Context()
	dir := t.TempDir()
	tl := newTimeline()
	t.Cleanup(func() { t.Logf("timeline (seconds since the start):\n%s", tl) })

	// Four equal simulators.
	sims := map[string]string{}
	for _, name := range []string{"llama-stable", "llama-canary", "sparse-stable", "sparse-canary"} {
		addr := freeAddr(t)
		p := startProcess(t, "vllm_sim-"+name, simBin, "--web.listen-address="+addr, "--ttft="+rolloutTTFT, "--itl="+rolloutITL)
		if err := waitReady(ctx, p, "http://"+addr+"/health", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		sims[name] = "http://" + addr
	}
	// The canary's baseline: vllm_prober bench against the stable simulator
	// on this machine now, with the probe's own request.
	benchDir := filepath.Join(dir, "bench")
	bench := exec.CommandContext(ctx, proberBin, "bench", "--url="+sims["llama-stable"], "--out="+benchDir, "--name=llama",
		"--concurrency=1", "--requests=10", "--max-tokens=16", "--ignore-eos", "--prompt="+probePrompt)
	if out, err := bench.CombinedOutput(); err != nil {
		t.Fatalf("vllm_prober bench: %v\n%s", err, out)
	}
	tl.add("simulators up, baseline measured")

	proberCfg := filepath.Join(dir, "vllm_prober.yml")
	// Probes every 2s: a probe of the slow canary takes 200ms + 15 × 60ms.
	writeFile(t, proberCfg, fmt.Sprintf(`global:
  probe_interval: 2s
  scrape_interval: 1s
  scrape_timeout: 900ms
  rate_window: 10s
modules:
  completion:
    prober: completions
    prompt: %q
    max_tokens: 16
    ignore_eos: true
baselines:
  - {name: llama, file: %s}
targets:
  - {name: llama-stable, url: %s, labels: {group: llama, track: stable}}
  - {name: llama-canary, url: %s, labels: {group: llama, track: canary}, baseline: llama}
  - {name: sparse-stable, url: %s, labels: {group: sparse, track: stable}, probe_interval: 20s}
  - {name: sparse-canary, url: %s, labels: {group: sparse, track: canary}, baseline: llama, probe_interval: 20s}
`, probePrompt, filepath.Join(benchDir, "llama.baseline.yaml"), sims["llama-stable"], sims["llama-canary"], sims["sparse-stable"], sims["sparse-canary"]))
	proberAddr := freeAddr(t)
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+proberCfg, "--web.listen-address="+proberAddr)
	if err := waitReady(ctx, prober, "http://"+proberAddr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Prometheus 3 with the mixin's rules, windows scaled.
	spec, err := mixin.LoadSpec(sloFile)
	if err != nil {
		t.Fatal(err)
	}
	ruleFiles, err := mixin.Generate(mixin.Options{SLOFile: sloFile, OutDir: filepath.Join(dir, "rules"), ForScale: rolloutScale})
	if err != nil {
		t.Fatal(err)
	}
	promCfg := filepath.Join(dir, "prometheus.yml")
	promYAML, err := mixin.PrometheusConfig(spec, []string{proberAddr}, time.Second, ruleFiles)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, promCfg, string(promYAML))
	_, promURL := startPrometheusFile(t, promBin, dir, promCfg)
	tl.add("vllm_prober and Prometheus up")

	// The Kubernetes API server, Argo's CRDs and its analysis controller.
	k := startKube(t, "rollouts-e2e", "vllm-prober")
	for _, f := range []string{"analysis-template-crd.yaml", "cluster-analysis-template-crd.yaml", "analysis-run-crd.yaml"} {
		k.kubectlT(t, "", "apply", "--server-side", "-f", filepath.Join(crdDir, f))
	}
	k.kubectlT(t, "", "wait", "--for=condition=Established", "--timeout=60s",
		"crd/analysistemplates.argoproj.io", "crd/clusteranalysistemplates.argoproj.io", "crd/analysisruns.argoproj.io")
	k.kubectlT(t, "", "create", "namespace", "rollouts-e2e")
	ctrl := startProcess(t, "rollouts-controller", controllerBin, "--kubeconfig="+k.kubeconfig, "--leader-elect=false",
		"--controllers=analysis", "--metricsPort="+port(t, freeAddr(t)), "--healthzPort="+port(t, freeAddr(t)))
	tl.add("kube-apiserver up, Argo Rollouts CRDs installed, analysis controller started")

	// The chart's templates, rendered by helm and installed as they are.
	argoObjs := helmTemplate(t, helm, map[string]any{"rollouts": map[string]any{
		"prometheusAddress": promURL, "window": rolloutWindow,
		"argo":    map[string]any{"enabled": true, "interval": "4s", "count": 3},
		"flagger": map[string]any{"enabled": true, "group": "llama", "canaryTarget": "llama-canary", "stableTarget": "llama-stable"},
	}})
	var tmplYAML, clusterTmplYAML string
	var tmpl argov1.AnalysisTemplate
	var metricTemplates []flaggerv1.MetricTemplate
	var canary flaggerv1.CanaryAnalysis
	for _, o := range argoObjs {
		switch o.kind {
		case "AnalysisTemplate":
			tmplYAML = o.yaml
			decodeJSON(t, o.obj, &tmpl)
		case "ClusterAnalysisTemplate":
			clusterTmplYAML = o.yaml
		case "MetricTemplate":
			var mt flaggerv1.MetricTemplate
			decodeJSON(t, o.obj, &mt)
			metricTemplates = append(metricTemplates, mt)
		case "ConfigMap":
			if s, ok := o.obj["data"].(map[string]any)["canary-analysis.yaml"].(string); ok {
				var doc map[string]any
				if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
					t.Fatal(err)
				}
				var c struct {
					Analysis flaggerv1.CanaryAnalysis `json:"analysis"`
				}
				decodeJSON(t, jsonable(doc), &c)
				canary = c.Analysis
			}
		}
	}
	if tmplYAML == "" || clusterTmplYAML == "" || len(metricTemplates) == 0 || len(canary.Metrics) == 0 {
		t.Fatalf("the chart rendered no AnalysisTemplate, MetricTemplate or Canary analysis")
	}
	// The API server validates the template against the CRD's schema.
	k.kubectlT(t, tmplYAML, "apply", "-n", "rollouts-e2e", "-f", "-")
	k.kubectlT(t, clusterTmplYAML, "apply", "-f", "-")

	// Warm-up: a window of probes in Prometheus' recorded ratios.
	if err := waitFor(ctx, 90*time.Second, time.Second, "the llama canary/stable ratio", func(ctx context.Context) (bool, error) {
		s, err := queryValues(ctx, promURL, `group_module:vllm_probe_ttft_seconds:canary_stable_ratio1m{group="llama"}`)
		return len(s) == 1, err
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(rolloutEvalTime) // a whole window of probes since the ratio appeared
	tl.add("warm-up done")

	type step struct {
		name, group, canaryTarget string
		argo                      string // the AnalysisRun's phase
		// exprExcept are the metrics whose conditions give another phase
		// than argo (a slow canary still succeeds: its success ratio passes).
		exprExcept map[string]string
		// flagger: whether each Flagger check passes (all alike unless in
		// flaggerExcept).
		flagger       bool
		flaggerExcept map[string]bool
	}
	run := func(s step) {
		t.Helper()
		args := map[string]string{"group": s.group, "canary-target": s.canaryTarget}
		// expr-lang/expr on the results of the same Prometheus, then Flagger's checks.
		phases := exprPhases(t, promURL, tmpl.Spec, args)
		t.Logf("%s: expr phases %v", s.name, phases)
		if len(phases) != 3 {
			t.Errorf("%s: %d metrics evaluated, want 3", s.name, len(phases))
		}
		for m, p := range phases {
			want, ok := s.exprExcept[m]
			if !ok {
				want = s.argo
			}
			if p != want {
				t.Errorf("%s: %s evaluates to %s with expr-lang/expr, want %s", s.name, m, p, want)
			}
		}
		pass := flaggerChecks(t, promURL, metricTemplates, canary, s.group, s.canaryTarget)
		t.Logf("%s: Flagger checks %v", s.name, pass)
		if len(pass) != 3 {
			t.Errorf("%s: %d Flagger checks, want 3", s.name, len(pass))
		}
		for m, ok := range pass {
			want, found := s.flaggerExcept[m]
			if !found {
				want = s.flagger
			}
			if ok != want {
				t.Errorf("%s: Flagger's check of %s passes=%v, want %v", s.name, m, ok, want)
			}
		}
		// The real controller.
		name := "vllm-" + s.name
		k.kubectlT(t, analysisRun(t, name, tmpl.Spec, args), "create", "-n", "rollouts-e2e", "-f", "-")
		phase, msg := waitRun(t, k, ctrl, name, 2*time.Minute)
		tl.add("AnalysisRun %s: %s %s", name, phase, msg)
		if phase != s.argo {
			t.Errorf("AnalysisRun %s ended %s (%s), want %s", name, phase, msg, s.argo)
		}
	}

	run(step{name: "equal", group: "llama", canaryTarget: "llama-canary", argo: rolloutcheck.Successful, flagger: true})

	// Too few probes: the sparse canary has probed, but fewer than three
	// times a window. No data is Inconclusive for Argo, a failed check for
	// Flagger: never a pass.
	if err := waitFor(ctx, 60*time.Second, time.Second, "a probe of sparse-canary", func(ctx context.Context) (bool, error) {
		s, err := queryValues(ctx, promURL, `vllm_probe_time_to_first_token_seconds_count{target="sparse-canary"} >= 1`)
		return len(s) > 0, err
	}); err != nil {
		t.Fatal(err)
	}
	run(step{name: "sparse", group: "sparse", canaryTarget: "sparse-canary", argo: rolloutcheck.Inconclusive, flagger: false})
	// The control: the same metric with unguarded conditions ends in Error.
	var unguarded argov1.AnalysisTemplateSpec
	for _, m := range tmpl.Spec.Metrics {
		if m.Name == "canary-stable-latency-ratio" {
			m.SuccessCondition = strings.ReplaceAll(m.SuccessCondition, "len(result) > 0 && ", "")
			m.FailureCondition = strings.ReplaceAll(m.FailureCondition, "len(result) > 0 && ", "")
			unguarded.Metrics = append(unguarded.Metrics, m)
		}
	}
	unguarded.Args = tmpl.Spec.Args
	k.kubectlT(t, analysisRun(t, "vllm-sparse-unguarded", unguarded, map[string]string{"group": "sparse", "canary-target": "sparse-canary"}),
		"create", "-n", "rollouts-e2e", "-f", "-")
	tl.add("control AnalysisRun vllm-sparse-unguarded created")

	if err := simConfig(ctx, sims["llama-canary"], `{"itl":"`+rolloutSlowITL+`"}`); err != nil {
		t.Fatal(err)
	}
	tl.add("llama-canary ITL tripled")
	time.Sleep(rolloutEvalTime + 3*time.Second) // a whole window of slow probes
	run(step{name: "slow", group: "llama", canaryTarget: "llama-canary", argo: rolloutcheck.Failed, flagger: false,
		exprExcept:    map[string]string{"canary-success-ratio": rolloutcheck.Successful},
		flaggerExcept: map[string]bool{"vllm-canary-success-ratio": true}})

	phase, msg := waitRun(t, k, ctrl, "vllm-sparse-unguarded", 3*time.Minute)
	tl.add("AnalysisRun vllm-sparse-unguarded: %s %s", phase, msg)
	if phase != rolloutcheck.Error {
		t.Errorf("the unguarded control run ended %s (%s), want Error: the guard proves nothing", phase, msg)
	}
}

// waitRun waits for AnalysisRun name to complete and returns its phase and
// message, logging each metric's measurements.
func waitRun(t *testing.T, k *kubeCluster, ctrl *process, name string, timeout time.Duration) (phase, msg string) {
	t.Helper()
	if err := waitFor(t.Context(), timeout, time.Second, "AnalysisRun "+name+" to finish", func(ctx context.Context) (bool, error) {
		if err := ctrl.exited(); err != nil {
			return false, err
		}
		out, err := k.run(ctx, "", "get", "analysisrun", "-n", "rollouts-e2e", name, "-o", "json")
		if err != nil {
			return false, err
		}
		var ar argov1.AnalysisRun
		if err := json.Unmarshal([]byte(out), &ar); err != nil {
			return false, err
		}
		phase, msg = string(ar.Status.Phase), ar.Status.Message
		if !ar.Status.Phase.Completed() {
			return false, fmt.Errorf("phase %q", phase)
		}
		for _, mr := range ar.Status.MetricResults {
			var vals []string
			for _, m := range mr.Measurements {
				vals = append(vals, fmt.Sprintf("%s %s %s", m.Phase, m.Value, m.Message))
			}
			t.Logf("%s: %s %s: %s", name, mr.Name, mr.Phase, strings.Join(vals, "; "))
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return phase, msg
}

// exprPhases runs every metric's query (args filled) on Prometheus and
// evaluates its conditions with expr-lang/expr as Argo does.
func exprPhases(t *testing.T, promURL string, spec argov1.AnalysisTemplateSpec, args map[string]string) map[string]string {
	t.Helper()
	all := map[string]string{}
	for _, a := range spec.Args {
		if a.Value != nil {
			all[a.Name] = *a.Value
		}
	}
	for k, v := range args {
		all[k] = v
	}
	out := map[string]string{}
	for _, m := range spec.Metrics {
		q, err := rolloutcheck.ArgoArgs(m.Provider.Prometheus.Query, all)
		if err != nil {
			t.Fatal(err)
		}
		samples, err := queryValues(t.Context(), promURL, q)
		if err != nil {
			t.Fatal(err)
		}
		result := make([]float64, len(samples))
		for i, s := range samples {
			result[i] = s.Value
		}
		succ, _ := rolloutcheck.ArgoArgs(m.SuccessCondition, all)
		fail, _ := rolloutcheck.ArgoArgs(m.FailureCondition, all)
		phase, err := rolloutcheck.ArgoPhase(result, succ, fail)
		if err != nil {
			t.Errorf("%s on %v: %v", m.Name, result, err)
		}
		out[m.Name] = phase
		t.Logf("  %s = %v -> %s", m.Name, result, phase)
	}
	return out
}

// flaggerChecks renders each Canary metric's MetricTemplate query with
// Flagger's template functions, runs it on Prometheus and checks its
// thresholdRange as Flagger does.
func flaggerChecks(t *testing.T, promURL string, mts []flaggerv1.MetricTemplate, a flaggerv1.CanaryAnalysis, group, canaryTarget string) map[string]bool {
	t.Helper()
	byName := map[string]flaggerv1.MetricTemplate{}
	for _, mt := range mts {
		byName[mt.Name] = mt
	}
	out := map[string]bool{}
	for _, m := range a.Metrics {
		mt, ok := byName[m.TemplateRef.Name]
		if !ok {
			t.Fatalf("metric %s: no MetricTemplate %s", m.Name, m.TemplateRef.Name)
		}
		vars := map[string]string{}
		for k := range m.TemplateVariables {
			vars[k] = map[string]string{"group": group, "canary_target": canaryTarget}[k]
		}
		q, err := rolloutcheck.FlaggerQuery(mt.Spec.Query, flaggerv1.MetricTemplateModel{Name: group, Namespace: "rollouts-e2e",
			Target: group, Interval: "1m", Variables: vars})
		if err != nil {
			t.Fatal(err)
		}
		samples, err := queryValues(t.Context(), promURL, q)
		if err != nil {
			t.Fatal(err)
		}
		result := make([]float64, len(samples))
		for i, s := range samples {
			result[i] = s.Value
		}
		pass, why := rolloutcheck.FlaggerCheck(result, m.ThresholdRange)
		t.Logf("  Flagger %s = %v -> pass %v %s", m.Name, result, pass, why)
		out[m.Name] = pass
	}
	return out
}

// analysisRun is an AnalysisRun from the template's spec with args filled,
// as Argo Rollouts creates one for an analysis step.
func analysisRun(t *testing.T, name string, spec argov1.AnalysisTemplateSpec, args map[string]string) string {
	t.Helper()
	var runArgs []argov1.Argument
	for _, a := range spec.Args {
		if v, ok := args[a.Name]; ok {
			a.Value = &v
		}
		runArgs = append(runArgs, a)
	}
	ar := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AnalysisRun",
		"metadata":   map[string]any{"name": name},
		"spec":       argov1.AnalysisRunSpec{Metrics: spec.Metrics, Args: runArgs},
	}
	b, err := json.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type renderedObject struct {
	kind string
	obj  map[string]any
	yaml string
}

// helmTemplate renders the chart with values and returns its objects.
func helmTemplate(t *testing.T, helm string, values map[string]any) []renderedObject {
	t.Helper()
	vb, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	vf := filepath.Join(t.TempDir(), "values.json")
	writeFile(t, vf, string(vb))
	cmd := exec.CommandContext(t.Context(), helm, "template", "vllm-prober", "../deploy/helm/vllm-prober", "--namespace", "rollouts-e2e", "-f", vf)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v\n%s", err, errb.String())
	}
	var objs []renderedObject
	for _, doc := range strings.Split(out.String(), "\n---") {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		if v == nil {
			continue
		}
		o := jsonable(v).(map[string]any)
		kind, _ := o["kind"].(string)
		objs = append(objs, renderedObject{kind: kind, obj: o, yaml: doc})
	}
	return objs
}

// jsonable turns yaml.v2's map[any]any into map[string]any, recursively.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = jsonable(e)
		}
		return m
	case []any:
		for i := range v {
			v[i] = jsonable(v[i])
		}
		return v
	}
	return v
}

func decodeJSON(t *testing.T, v any, into any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("decoding into %T: %v", into, err)
	}
}

func port(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if _, err := strconv.Atoi(addr[i+1:]); err != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return addr[i+1:]
}
