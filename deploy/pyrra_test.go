package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// pyrraFiles lists the Pyrra ServiceLevelObjectives of alerts/slo.
func pyrraFiles(t *testing.T) []string {
	t.Helper()
	return listDir(t, filepath.Join(repoRoot, "alerts", "slo"), "*.pyrra.yml")
}

// TestChartPyrraCopiesInSync: files/pyrra holds exactly alerts/slo/*.pyrra.yml.
func TestChartPyrraCopiesInSync(t *testing.T) {
	want := pyrraFiles(t)
	if len(want) == 0 {
		t.Fatal("alerts/slo has no Pyrra ServiceLevelObjectives")
	}
	dst := filepath.Join(chartDir, "files", "pyrra")
	if got := listDir(t, dst, "*.pyrra.yml"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s holds %v, alerts/slo %v: run `make chart-sync`", dst, got, want)
	}
	for _, f := range want {
		a, err := os.ReadFile(filepath.Join(repoRoot, "alerts", "slo", f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dst, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from alerts/slo/%s: run `make chart-sync`", filepath.Join(dst, f), f)
		}
	}
}

// TestChartPyrra: by default the chart installs no Pyrra object; with
// pyrra.enabled one ServiceLevelObjective per file of alerts/slo, its spec
// unchanged, with the chart's labels and pyrra.labels, beside the PrometheusRules
// (prometheusRule.enabled: false leaves the Pyrra objects alone).
func TestChartPyrra(t *testing.T) {
	files := pyrraFiles(t)
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			objs, err := r.render(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(byKind(objs, "ServiceLevelObjective")); n != 0 {
				t.Errorf("default values render %d ServiceLevelObjectives, want none", n)
			}
			objs, err = r.render(t, map[string]any{
				"pyrra":          map[string]any{"enabled": true, "labels": map[string]any{"release": "pyrra"}},
				"prometheusRule": map[string]any{"enabled": false},
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(byKind(objs, "PrometheusRule")); n != 0 {
				t.Errorf("prometheusRule.enabled=false still renders %d PrometheusRules", n)
			}
			slos := byKind(objs, "ServiceLevelObjective")
			if len(slos) != len(files) {
				t.Fatalf("rendered %d ServiceLevelObjectives, alerts/slo has %d: %v", len(slos), len(files), files)
			}
			bySource := map[string]object{}
			for _, o := range slos {
				bySource[toString(dig(o, "metadata", "annotations", "vllm-prober/source"))] = o
			}
			for _, f := range files {
				o, ok := bySource["alerts/slo/"+f]
				if !ok {
					t.Errorf("no ServiceLevelObjective from alerts/slo/%s", f)
					continue
				}
				var want any
				readYAML(t, filepath.Join(repoRoot, "alerts", "slo", f), &want)
				if got := dig(o, "spec"); !reflect.DeepEqual(got, dig(want, "spec")) {
					t.Errorf("%s: spec %v, want %v", f, got, dig(want, "spec"))
				}
				if dig(o, "apiVersion") != "pyrra.dev/v1alpha1" || dig(o, "metadata", "labels", "release") != "pyrra" {
					t.Errorf("%s: apiVersion %v, labels %v", f, dig(o, "apiVersion"), dig(o, "metadata", "labels"))
				}
			}
		})
	}
}
