package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vllm-prober/vllm_prober/config"
)

// TestChartRecipes renders the chart with each values file of recipes/ (as
// `helm install -f recipes/<name>.yaml` does): its config.yml loads, it
// discovers through kubernetes_sd_configs with RBAC for exactly the kinds it
// watches (list and watch, nothing more), and a Probe lists only URLs that
// url_probes allows. The real API server accepts each rendering in make e2e
// (e2e/kubernetes_test.go).
func TestChartRecipes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "recipes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recipes: %v", err)
	}
	for _, r := range renderers(t) {
		for _, file := range files {
			name := strings.TrimSuffix(filepath.Base(file), ".yaml")
			t.Run(r.name+"/"+name, func(t *testing.T) {
				var values any
				readYAML(t, file, &values)
				objs, err := r.render(t, values.(map[string]any))
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := config.Load([]byte(dig(configMap(t, objs), "data", "config.yml").(string)), configDir)
				if err != nil {
					t.Fatalf("config.yml does not load: %v", err)
				}
				var kinds []string
				for _, sd := range cfg.Discovery.KubernetesSDConfigs {
					kinds = append(kinds, string(sd.Role)+"s")
					if sd.APIServer.URL != nil || sd.KubeConfig != "" {
						t.Errorf("kubernetes_sd_config %s does not use the pod's ServiceAccount", sd.Role)
					}
				}
				slices.Sort(kinds)
				for _, o := range objs {
					if k := o.kind(); k != "Role" && k != "ClusterRole" {
						continue
					}
					rules := asList(dig(o, "rules"))
					if len(rules) != 1 {
						t.Fatalf("%s %s has %d rules, want 1", o.kind(), o.name(), len(rules))
					}
					got := strs(dig(rules[0], "resources"))
					slices.Sort(got)
					if !slices.Equal(got, kinds) || !slices.Equal(strs(dig(rules[0], "verbs")), []string{"list", "watch"}) ||
						!slices.Equal(strs(dig(rules[0], "apiGroups")), []string{""}) {
						t.Errorf("%s %s grants %v, want list and watch on %v only", o.kind(), o.name(), rules[0], kinds)
					}
				}
				for _, o := range objs {
					if o.kind() != "Probe" {
						continue
					}
					if cfg.URLProbes == nil {
						t.Fatal("a Probe without url_probes in config.yml")
					}
					for _, u := range strs(dig(o, "spec", "targets", "staticConfig", "static")) {
						if !cfg.URLProbes.Allowed(u) {
							t.Errorf("the Probe lists %s, which url_probes.allowed_urls refuses", u)
						}
					}
					if m := toString(dig(o, "spec", "module")); cfg.Modules[m].Prober == "" {
						t.Errorf("the Probe's module %q is not configured", m)
					}
				}
			})
		}
	}
}
