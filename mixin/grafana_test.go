package mixin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRenderLegend(t *testing.T) {
	l := map[string]string{"__name__": "m", "target": "a", "module": "chat"}
	for format, want := range map[string]string{
		"{{target}} {{ module }}": "a chat",
		"live {{missing}}":        "live ",
		"probe mean":              "probe mean",
		"":                        `m{module="chat", target="a"}`,
		"__auto":                  `m{module="chat", target="a"}`,
	} {
		if got := RenderLegend(format, l); got != want {
			t.Errorf("RenderLegend(%q) = %q, want %q", format, got, want)
		}
	}
}

func TestInterpolateAndRegexValue(t *testing.T) {
	vals := map[string]string{"target": RegexValue([]string{"a.b"}), "targets": "x", "model": RegexValue([]string{"m-1", "m/2"})}
	got := Interpolate(`f{target=~"$target", t=~"${targets}", model=~"$model"}[$__rate_interval]`, vals, 5*time.Second)
	want := `f{target=~"a\\.b", t=~"x", model=~"(m-1|m/2)"}[5s]`
	if got != want {
		t.Errorf("Interpolate = %s, want %s", got, want)
	}
}

func TestLoadDashboard(t *testing.T) {
	d, err := LoadDashboard(root("dashboards/" + EndpointDashboard))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]Variable{}
	for _, v := range d.Variables {
		vars[v.Name] = v
	}
	if v := vars["target"]; v.Multi || v.IncludeAll || v.DefaultAll {
		t.Errorf("endpoint detail's target variable must be single-valued: %+v", v)
	}
	if v := vars["model"]; !v.DefaultAll || v.AllValue != ".+" {
		t.Errorf("model variable: %+v, want All (.+) by default", v)
	}
	if len(d.Panels) < 20 {
		t.Errorf("%d panels", len(d.Panels))
	}
	f, err := LoadDashboard(root("dashboards/" + FleetDashboard))
	if err != nil {
		t.Fatal(err)
	}
	if f.Panels[0].Repeat != "target" {
		t.Errorf("fleet overview's first row must repeat for target, got %q", f.Panels[0].Repeat)
	}
}

// TestDashboardsHoldAcrossReplicas checks the conventions of a sharded fleet on the
// committed dashboards: every "All" is .+ (the engine variable's .*); every baseline query has a job
// matcher and deduplicates the replicas (every shard exports every baseline);
// server queries never select by $model (LoRA adapters are served under the
// base model's name); every series-plotting query has a legend format.
func TestDashboardsHoldAcrossReplicas(t *testing.T) {
	paths, err := filepath.Glob(root("dashboards/*.json"))
	if err != nil || len(paths) != 3 {
		t.Fatalf("dashboards: %v %v", paths, err)
	}
	baseline := regexp.MustCompile(`vllm_baseline_[a-z_]+\{([^}]*)\}`)
	server := regexp.MustCompile(`vllm_server_[a-z_]+\{([^}]*)\}`)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			Templating struct {
				List []map[string]any `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		for _, v := range raw.Templating.List {
			// The engine variable's All also matches the probe series, which
			// have no engine label, so that probe-only targets stay listed.
			if v["name"] == "engine" && v["allValue"] == ".*" {
				continue
			}
			if inc, _ := v["includeAll"].(bool); inc && v["allValue"] != ".+" {
				t.Errorf("%s: variable %v: allValue %v, want .+", p, v["name"], v["allValue"])
			}
		}
		d, err := LoadDashboard(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, panel := range d.Panels {
			for _, tg := range panel.Targets {
				where := d.Title + " / " + panel.Title + ": " + tg.Expr
				for _, m := range baseline.FindAllStringSubmatchIndex(tg.Expr, -1) {
					if !strings.Contains(tg.Expr[m[2]:m[3]], `job=~"$job"`) {
						t.Errorf("%s: baseline selector without a job matcher", where)
					}
					if !strings.HasSuffix(tg.Expr[:m[0]], "max without (instance, pod) (") {
						t.Errorf("%s: baseline series not deduplicated with max without (instance, pod)", where)
					}
				}
				for _, m := range server.FindAllStringSubmatch(tg.Expr, -1) {
					if strings.Contains(m[1], "$model") {
						t.Errorf("%s: server series selected by $model", where)
					}
				}
				if !tg.Table && tg.LegendFormat == "" {
					t.Errorf("%s: no legendFormat", where)
				}
			}
		}
	}
}
