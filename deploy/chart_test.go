package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

const repoRoot = ".."

// ruleFiles are the Prometheus rule files of alerts/: every .yml file there,
// each with a top-level groups key, so that `rule_files: [alerts/*.yml]` loads
// (the generator's input is mixin/slo.yml, outside alerts/).
func ruleFiles(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(repoRoot, "alerts", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	groupsKey := regexp.MustCompile(`(?m)^groups:`)
	var out []string
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if !groupsKey.Match(b) {
			t.Errorf("%s has no top-level groups key: alerts/ must hold only rule files", m)
		}
		out = append(out, filepath.Base(m))
	}
	return out
}

func dashboardFiles(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(repoRoot, "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range matches {
		matches[i] = filepath.Base(matches[i])
	}
	return matches
}

func listDir(t *testing.T, dir, pattern string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	for i := range matches {
		matches[i] = filepath.Base(matches[i])
	}
	sort.Strings(matches)
	return matches
}

// TestChartCopiesInSync: the chart reads alerts/ and dashboards/ through copies
// under files/ (helm's .Files cannot see outside the chart); they must be
// identical to the sources.
func TestChartCopiesInSync(t *testing.T) {
	for _, c := range []struct {
		src, dst string
		want     []string
		pattern  string
	}{
		{"alerts", "alerts", ruleFiles(t), "*.yml"},
		{"dashboards", "dashboards", dashboardFiles(t), "*.json"},
	} {
		dstDir := filepath.Join(chartDir, "files", c.dst)
		got := listDir(t, dstDir, c.pattern)
		want := append([]string(nil), c.want...)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: chart copies %v, sources %v: run `make chart-sync`", dstDir, got, want)
			continue
		}
		for _, f := range want {
			src, err := os.ReadFile(filepath.Join(repoRoot, c.src, f))
			if err != nil {
				t.Fatal(err)
			}
			dst, err := os.ReadFile(filepath.Join(dstDir, f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(src, dst) {
				t.Errorf("%s differs from %s/%s: run `make chart-sync`", filepath.Join(dstDir, f), c.src, f)
			}
		}
	}
	if len(ruleFiles(t)) == 0 {
		t.Error("alerts/ has no rule files: nothing for the PrometheusRule to carry")
	}
}

func byKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func one(t *testing.T, objs []object, kind string) object {
	t.Helper()
	os := byKind(objs, kind)
	if len(os) != 1 {
		t.Fatalf("want 1 %s, rendered %d", kind, len(os))
	}
	return os[0]
}

func container(t *testing.T, sts object) map[string]any {
	t.Helper()
	c, ok := dig(sts, "spec", "template", "spec", "containers", 0).(map[string]any)
	if !ok {
		t.Fatalf("StatefulSet has no container: %v", sts)
	}
	return c
}

func strs(v any) []string {
	var out []string
	for _, e := range asList(v) {
		out = append(out, toString(e))
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// configMap returns the chart's configuration ConfigMap (the one with config.yml).
func configMap(t *testing.T, objs []object) object {
	t.Helper()
	var found []object
	for _, o := range byKind(objs, "ConfigMap") {
		if _, ok := dig(o, "data", "config.yml").(string); ok {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want 1 ConfigMap with config.yml, rendered %d", len(found))
	}
	return found[0]
}

const configDir = "/etc/vllm_prober/config"

// proberJob is the job name the rules select (mixin/slo.yml prober_job).
func proberJob(t *testing.T) string {
	t.Helper()
	var slo struct {
		ProberJob string `yaml:"prober_job"`
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "mixin", "slo.yml"))
	if err != nil {
		t.Fatalf("mixin/slo.yml: %v", err)
	}
	if err := yaml.Unmarshal(b, &slo); err != nil || slo.ProberJob == "" {
		t.Fatalf("mixin/slo.yml has no prober_job: %v", err)
	}
	return slo.ProberJob
}

func TestChartDefaults(t *testing.T) {
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			objs, err := r.render(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for _, o := range objs {
				counts[o.kind()]++
				if o.name() == "" {
					t.Errorf("%s without a name", o.kind())
				}
				if ns := dig(o, "metadata", "namespace"); ns != namespace {
					t.Errorf("%s %s: namespace %v, want %s", o.kind(), o.name(), ns, namespace)
				}
			}
			want := map[string]int{
				// config.yml, the dashboards and the Grafana datasource.
				"ConfigMap":      2 + len(dashboardFiles(t)),
				"Service":        1,
				"StatefulSet":    1,
				"ServiceMonitor": 1,
				"PrometheusRule": len(ruleFiles(t)),
				// Kubernetes discovery in the release's namespace.
				"ServiceAccount": 1,
				"Role":           1,
				"RoleBinding":    1,
			}
			if !reflect.DeepEqual(counts, want) {
				t.Errorf("rendered kinds %v, want %v (no Secret without apiKeys)", counts, want)
			}

			sts := one(t, objs, "StatefulSet")
			if got := dig(sts, "spec", "replicas"); got != 1.0 {
				t.Errorf("replicas = %v without sharding, want 1", got)
			}
			c := container(t, sts)
			args := strs(c["args"])
			for _, a := range []string{"--config.file=" + configDir + "/config.yml", "--web.listen-address=:10040"} {
				if !contains(args, a) {
					t.Errorf("args %v lack %s", args, a)
				}
			}
			for _, a := range args {
				if strings.HasPrefix(a, "--shard.") {
					t.Errorf("shard flag %s without sharding.enabled", a)
				}
			}
			if c["env"] != nil {
				t.Errorf("env %v without sharding", c["env"])
			}
			if got := dig(c, "ports", 0, "containerPort"); got != 10040.0 {
				t.Errorf("containerPort = %v, want 10040", got)
			}
			if got := dig(sts, "spec", "template", "spec", "securityContext", "runAsNonRoot"); got != true {
				t.Errorf("runAsNonRoot = %v", got)
			}

			// The config volume is the ConfigMap, mounted where --config.file points.
			cm := configMap(t, objs)
			if got := dig(sts, "spec", "template", "spec", "volumes", 0, "configMap", "name"); got != cm.name() {
				t.Errorf("config volume uses ConfigMap %v, want %s", got, cm.name())
			}
			if got := dig(c, "volumeMounts", 0, "mountPath"); got != configDir {
				t.Errorf("config mounted at %v, want %s", got, configDir)
			}
			if _, err := config.Load([]byte(dig(cm, "data", "config.yml").(string)), configDir); err != nil {
				t.Errorf("default config.yml does not load: %v", err)
			}

			// Service, StatefulSet and ServiceMonitor agree on labels and port.
			svc := one(t, objs, "Service")
			podLabels, _ := dig(sts, "spec", "template", "metadata", "labels").(map[string]any)
			for k, v := range dig(svc, "spec", "selector").(map[string]any) {
				if podLabels[k] != v {
					t.Errorf("Service selects %s=%v, pods have %v", k, v, podLabels[k])
				}
			}
			if got := dig(sts, "spec", "serviceName"); got != svc.name() {
				t.Errorf("serviceName %v, want %s", got, svc.name())
			}
			if got := dig(svc, "spec", "ports", 0, "port"); got != 10040.0 {
				t.Errorf("Service port %v, want 10040", got)
			}
			sm := one(t, objs, "ServiceMonitor")
			svcLabels, _ := dig(svc, "metadata", "labels").(map[string]any)
			for k, v := range dig(sm, "spec", "selector", "matchLabels").(map[string]any) {
				if svcLabels[k] != v {
					t.Errorf("ServiceMonitor selects %s=%v, Service has %v", k, v, svcLabels[k])
				}
			}
			ep := dig(sm, "spec", "endpoints", 0)
			if got := dig(ep, "port"); got != dig(svc, "spec", "ports", 0, "name") {
				t.Errorf("ServiceMonitor port %v is not the Service's port name", got)
			}
			job := ""
			for _, rl := range asList(dig(ep, "relabelings")) {
				switch dig(rl, "targetLabel") {
				case "job":
					job = toString(dig(rl, "replacement"))
				default:
					// The SLI rules sum away only instance and pod, the
					// replica labels the operator adds (mixin/rules.go,
					// replicaLabels); a label naming the replica set
					// here would split the SLIs at every restart.
					t.Errorf("ServiceMonitor relabeling sets %v: a per-replica label the SLI rules do not aggregate away", dig(rl, "targetLabel"))
				}
			}
			for _, k := range []string{"podTargetLabels", "targetLabels"} {
				if v := dig(sm, "spec", k); v != nil {
					t.Errorf("ServiceMonitor sets %s %v: labels the SLI rules do not aggregate away", k, v)
				}
			}
			if want := proberJob(t); job != want {
				t.Errorf("ServiceMonitor sets job=%q, the rules select job=%q", job, want)
			}
		})
	}
}

// TestChartPrometheusRules: the rendered PrometheusRules carry exactly the rule
// groups of alerts/*.yml, one object per file.
func TestChartPrometheusRules(t *testing.T) {
	files := ruleFiles(t)
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			objs, err := r.render(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			rendered := map[string]object{}
			for _, o := range byKind(objs, "PrometheusRule") {
				src := toString(dig(o, "metadata", "annotations", "vllm-prober/source"))
				if _, dup := rendered[src]; dup {
					t.Errorf("two PrometheusRules from %s", src)
				}
				rendered[src] = o
			}
			if len(rendered) != len(files) {
				t.Errorf("rendered %d PrometheusRules, alerts/ has %d rule files %v", len(rendered), len(files), files)
			}
			for _, f := range files {
				o, ok := rendered["alerts/"+f]
				if !ok {
					t.Errorf("no PrometheusRule for alerts/%s", f)
					continue
				}
				var want any
				readYAML(t, filepath.Join(repoRoot, "alerts", f), &want)
				got := dig(o, "spec")
				if !reflect.DeepEqual(got, want) {
					t.Errorf("PrometheusRule %s spec differs from alerts/%s\nrules rendered: %v\nrules in file:  %v",
						o.name(), f, ruleNames(got), ruleNames(want))
				}
				if n := len(ruleNames(got)); n == 0 {
					t.Errorf("PrometheusRule %s has no rules", o.name())
				}
			}
		})
	}
}

func ruleNames(spec any) []string {
	var out []string
	for _, g := range asList(dig(spec, "groups")) {
		for _, r := range asList(dig(g, "rules")) {
			if a, ok := dig(r, "alert").(string); ok {
				out = append(out, "alert:"+a)
			} else {
				out = append(out, "record:"+toString(dig(r, "record")))
			}
		}
	}
	return out
}

// TestChartDashboards: one ConfigMap per dashboard with the Grafana sidecar
// label, holding the dashboard unchanged.
func TestChartDashboards(t *testing.T) {
	files := dashboardFiles(t)
	if len(files) == 0 {
		t.Log("dashboards/ has no dashboards yet: checking that none are rendered")
	}
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			objs, err := r.render(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			found := map[string]bool{}
			for _, o := range byKind(objs, "ConfigMap") {
				if dig(o, "metadata", "labels", "grafana_dashboard") != "1" {
					continue
				}
				data, _ := dig(o, "data").(map[string]any)
				for name, v := range data {
					found[name] = true
					src, err := os.ReadFile(filepath.Join(repoRoot, "dashboards", name))
					if err != nil {
						t.Errorf("ConfigMap %s holds %s, which is not in dashboards/", o.name(), name)
						continue
					}
					if got := toString(v); got != strings.TrimRight(string(src), "\n") {
						t.Errorf("ConfigMap %s: %s differs from dashboards/%s", o.name(), name, name)
					}
					if !json.Valid([]byte(toString(v))) {
						t.Errorf("ConfigMap %s: %s is not valid JSON", o.name(), name)
					}
				}
			}
			for _, f := range files {
				if !found[f] {
					t.Errorf("no dashboard ConfigMap for dashboards/%s", f)
				}
			}
			if len(found) != len(files) {
				t.Errorf("rendered %d dashboards, dashboards/ has %d", len(found), len(files))
			}
		})
	}
}

// TestChartShardingSecretsBaselines renders the chart as a sharded fleet with an
// API key and a baseline and checks how the pieces reference each other.
func TestChartShardingSecretsBaselines(t *testing.T) {
	const apiKey = "sk-chart-test-0123456789"
	const baseline = "format: vllm_prober/baseline/v1\n# test content\n"
	overrides := map[string]any{
		"sharding": map[string]any{"enabled": true, "shards": 4},
		"apiKeys":  map[string]any{"vllm-a": apiKey},
		"baselines": map[string]any{
			"h100-8b.yml": baseline,
		},
		"config": map[string]any{
			"modules": map[string]any{
				"chat": map[string]any{"prober": "chat", "messages": []any{map[string]any{"role": "user", "content": "Hi"}}},
			},
			"baselines": []any{map[string]any{"name": "h100", "file": "h100-8b.yml"}},
			"targets": []any{map[string]any{
				"name": "a", "url": "http://vllm-a:8000", "baseline": "h100",
				"http_client_config": map[string]any{
					"authorization": map[string]any{"credentials_file": "/etc/vllm_prober/secrets/vllm-a"},
				},
			}},
		},
	}
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			objs, err := r.render(t, overrides)
			if err != nil {
				t.Fatal(err)
			}
			sts := one(t, objs, "StatefulSet")
			if got := dig(sts, "spec", "replicas"); got != 4.0 {
				t.Errorf("replicas = %v, want 4 (one per shard)", got)
			}
			c := container(t, sts)
			args := strs(c["args"])
			for _, a := range []string{"--shard.count=4", "--shard.index=$(SHARD_INDEX)"} {
				if !contains(args, a) {
					t.Errorf("args %v lack %s", args, a)
				}
			}
			if got := dig(c, "env", 0, "name"); got != "SHARD_INDEX" {
				t.Errorf("env[0].name = %v, want SHARD_INDEX", got)
			}
			if got := dig(c, "env", 0, "valueFrom", "fieldRef", "fieldPath"); got != "metadata.labels['apps.kubernetes.io/pod-index']" {
				t.Errorf("SHARD_INDEX from %v, want the pod-index label", got)
			}

			sec := one(t, objs, "Secret")
			if got := dig(sec, "stringData", "vllm-a"); got != apiKey {
				t.Errorf("Secret stringData[vllm-a] = %v", got)
			}
			var secretMount string
			for _, m := range asList(c["volumeMounts"]) {
				if dig(m, "name") == "api-keys" {
					secretMount = toString(dig(m, "mountPath"))
				}
			}
			var secretName any
			for _, v := range asList(dig(sts, "spec", "template", "spec", "volumes")) {
				if dig(v, "name") == "api-keys" {
					secretName = dig(v, "secret", "secretName")
				}
			}
			if secretName != sec.name() {
				t.Errorf("api-keys volume uses Secret %v, want %s", secretName, sec.name())
			}

			cm := configMap(t, objs)
			if got := dig(cm, "data", "h100-8b.yml"); got != baseline {
				t.Errorf("baseline in ConfigMap = %q, want %q", got, baseline)
			}
			text := dig(cm, "data", "config.yml").(string)
			for _, o := range objs {
				if o.kind() != "Secret" && strings.Contains(toString(map[string]any(o)), apiKey) {
					t.Errorf("the API key leaks into %s %s", o.kind(), o.name())
				}
			}
			cfg, err := config.Load([]byte(text), configDir)
			if err != nil {
				t.Fatalf("config.yml does not load: %v", err)
			}
			if got := cfg.Baselines[0].File; got != path.Join(configDir, "h100-8b.yml") {
				t.Errorf("baseline file resolves to %s, not into the ConfigMap mount", got)
			}
			cf := cfg.Targets[0].HTTPClientConfig.Authorization.CredentialsFile
			if path.Dir(cf) != secretMount || dig(sec, "stringData", path.Base(cf)) == nil {
				t.Errorf("credentials_file %s is not a key of the Secret mounted at %s", cf, secretMount)
			}
		})
	}
}

// TestChartRejectsBaselineNamedConfig: a baseline may not shadow config.yml.
func TestChartRejectsBaselineNamedConfig(t *testing.T) {
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			_, err := r.render(t, map[string]any{"baselines": map[string]any{"config.yml": "x"}})
			if err == nil || !strings.Contains(err.Error(), "baselines: the file name config.yml is taken") {
				t.Errorf("err = %v, want the config.yml collision error", err)
			}
		})
	}
}

// TestChartRenderersAgree: where helm exists, the built-in renderer must render
// the same objects, so that the checks above mean the same without helm.
func TestChartRenderersAgree(t *testing.T) {
	rs := renderers(t)
	if len(rs) < 2 {
		testtool.Skip(t, "helm", "make helm; nothing to compare the built-in renderer with")
	}
	for _, o := range []map[string]any{nil, {"sharding": map[string]any{"enabled": true}, "apiKeys": map[string]any{"k": "v"}}} {
		a, err := rs[0].render(t, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := rs[1].render(t, o)
		if err != nil {
			t.Fatal(err)
		}
		index := func(objs []object) map[string]object {
			m := map[string]object{}
			for _, x := range objs {
				m[x.kind()+"/"+x.name()] = x
			}
			return m
		}
		ia, ib := index(a), index(b)
		if len(ia) != len(ib) {
			t.Errorf("builtin rendered %d objects, helm %d", len(ia), len(ib))
		}
		for k, x := range ib {
			if !reflect.DeepEqual(ia[k], x) {
				ja, _ := json.MarshalIndent(ia[k], "", " ")
				jb, _ := json.MarshalIndent(x, "", " ")
				t.Errorf("%s differs:\nbuiltin: %s\nhelm:    %s", k, ja, jb)
			}
		}
	}
}

func TestHelmLint(t *testing.T) {
	h := helmPath(t)
	if h == "" {
		testtool.Skip(t, "helm", "make helm; the other chart tests ran on the built-in renderer")
	}
	out, err := exec.Command(h, "lint", "--strict", chartDir).CombinedOutput()
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

// TestChartVantage: the vantage value becomes --vantage; without it (the
// default) no --vantage flag is passed.
func TestChartVantage(t *testing.T) {
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			for _, c := range []struct {
				overrides map[string]any
				want      bool
			}{{map[string]any{"vantage": "eu-west"}, true}, {map[string]any{}, false}} {
				objs, err := r.render(t, c.overrides)
				if err != nil {
					t.Fatal(err)
				}
				args := strs(container(t, one(t, objs, "StatefulSet"))["args"])
				if got := contains(args, "--vantage=eu-west"); got != c.want {
					t.Errorf("values %v: args %v, want --vantage=eu-west: %v", c.overrides, args, c.want)
				}
				for _, a := range args {
					if !c.want && strings.HasPrefix(a, "--vantage") {
						t.Errorf("default values pass %s", a)
					}
				}
			}
		})
	}
}

// TestChartProbeOnly: probeOnly: true becomes --probe-only (a vantage that
// scrapes no /metrics); by default no such flag is passed.
func TestChartProbeOnly(t *testing.T) {
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			for _, c := range []struct {
				overrides map[string]any
				want      bool
			}{{map[string]any{"probeOnly": true}, true}, {map[string]any{}, false}} {
				objs, err := r.render(t, c.overrides)
				if err != nil {
					t.Fatal(err)
				}
				args := strs(container(t, one(t, objs, "StatefulSet"))["args"])
				if got := contains(args, "--probe-only"); got != c.want {
					t.Errorf("values %v: args %v, want --probe-only: %v", c.overrides, args, c.want)
				}
				for _, a := range args {
					if !c.want && strings.HasPrefix(a, "--probe-only") {
						t.Errorf("default values pass %s", a)
					}
				}
			}
		})
	}
}
