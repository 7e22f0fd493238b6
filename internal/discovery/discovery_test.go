package discovery

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/vllm-prober/vllm_prober/config"
)

func group(source string, labels model.LabelSet, addrs ...string) *targetgroup.Group {
	g := &targetgroup.Group{Source: source, Labels: labels}
	for _, a := range addrs {
		g.Targets = append(g.Targets, model.LabelSet{model.AddressLabel: model.LabelValue(a)})
	}
	return g
}

const relabelConfig = `
file_sd_configs: [{files: [unused.json]}]
relabel_configs:
  # Name pods after their first DNS label.
  - source_labels: [__address__]
    regex: '(vllm-[a-z0-9-]+)\..*'
    target_label: __target_name__
  - source_labels: [served_model]
    target_label: __model__
  - source_labels: [tls]
    regex: "true"
    target_label: __scheme__
    replacement: https
  - source_labels: [metrics_path]
    regex: '(.+)'
    target_label: __metrics_path__
  - source_labels: [env]
    regex: dev
    action: drop
  - regex: served_model|tls|metrics_path
    action: labeldrop
target_defaults:
  modules: [short, long]
  labels: {team: infra, env: unknown}
  max_num_seqs: 256
  baseline: h100
`

func TestRelabelling(t *testing.T) {
	cfg := loadConfig(t, relabelConfig)
	logs := &logBuffer{}
	static := config.DefaultTarget
	static.Name, static.URL, static.Modules = "static", "http://127.0.0.1:8000", []string{"short"}
	got := Targets(map[string][]*targetgroup.Group{"file_sd_configs[0]": {
		group("a.json:0", model.LabelSet{"env": "prod", "served_model": "llama-3-8b", "tls": "true"},
			"vllm-0.vllm.ml.svc:8000", "vllm-1.vllm.ml.svc:8000"),
		group("a.json:1", model.LabelSet{"env": "dev"}, "vllm-dev.vllm.ml.svc:8000"),
		group("a.json:2", model.LabelSet{"metrics_path": "/engine/metrics"}, "10.0.0.7:8000"),
		// Same name as a static target: the static one wins.
		group("a.json:3", model.LabelSet{"__target_name__": "static"}, "10.0.0.8:8000"),
		// Identical to an earlier one: collapsed without a warning.
		group("a.json:4", model.LabelSet{"metrics_path": "/engine/metrics"}, "10.0.0.7:8000"),
	}}, []config.Target{static}, cfg, logs.logger())

	base := config.DefaultTarget
	base.Modules = []string{"short", "long"}
	base.MaxNumSeqs = 256
	base.Baseline = "h100"
	want := []config.Target{}
	for _, w := range []struct {
		name, url, model, path string
		labels                 map[string]string
	}{
		{"10.0.0.7:8000", "http://10.0.0.7:8000", "", "/engine/metrics", map[string]string{"team": "infra", "env": "unknown"}},
		{"vllm-0", "https://vllm-0.vllm.ml.svc:8000", "llama-3-8b", "/metrics", map[string]string{"team": "infra", "env": "prod"}},
		{"vllm-1", "https://vllm-1.vllm.ml.svc:8000", "llama-3-8b", "/metrics", map[string]string{"team": "infra", "env": "prod"}},
	} {
		tg := cloneTarget(base)
		tg.Name, tg.URL, tg.Model, tg.MetricsPath, tg.Labels = w.name, w.url, w.model, w.path, w.labels
		want = append(want, tg)
	}
	want = append(want[:1], append([]config.Target{static}, want[1:]...)...)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets\n got: %+v\nwant: %+v", got, want)
	}
	if !strings.Contains(logs.String(), `level=warn msg="Two targets have the same name, keeping the first" discovery=file_sd_configs[0] source=a.json:3 target=static`) {
		t.Errorf("no warning for the clash with the static target; log:\n%s", logs)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 {
		t.Errorf("%d log lines, want 1 (the identical duplicate is silent):\n%s", n, logs)
	}
	// The template is not shared with the targets built from it.
	got[2].Labels["team"] = "changed"
	got[2].Modules[0] = "changed"
	if cfg.TargetDefaults.Labels["team"] != "infra" || cfg.TargetDefaults.Modules[0] != "short" {
		t.Error("a built target shares its labels or modules with the template")
	}
}

func TestRelabellingDefaults(t *testing.T) {
	// No relabelling and no target_defaults: the name is the address, the
	// target is config.DefaultTarget, group labels become static labels.
	got := Targets(map[string][]*targetgroup.Group{"file_sd_configs[0]": {group("x", model.LabelSet{"zone": "eu-1", "__meta_filepath": "/x.json"}, "[::1]:8000", "gpu-box:8000")}},
		nil, loadConfig(t, "file_sd_configs: [{files: [x.json]}]"), nil)
	want := []config.Target{config.DefaultTarget, config.DefaultTarget}
	want[0].Name, want[0].URL, want[0].Labels = "1_:8000", "http://[::1]:8000", map[string]string{"zone": "eu-1"}
	want[1].Name, want[1].URL, want[1].Labels = "gpu-box:8000", "http://gpu-box:8000", map[string]string{"zone": "eu-1"}
	want[0].Modules, want[1].Modules = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets\n got: %+v\nwant: %+v", got, want)
	}
}

func TestRelabellingInvalid(t *testing.T) {
	cfg := loadConfig(t, `
file_sd_configs: [{files: [x.json]}]
relabel_configs:
  - {source_labels: [scheme], regex: '(.+)', target_label: __scheme__}
  - {source_labels: [name], regex: '(.+)', target_label: __target_name__}
  - {source_labels: [path], regex: '(.+)', target_label: __metrics_path__}
  - {regex: scheme|name|path, action: labeldrop}
  - {source_labels: [drop_address], regex: 'yes', target_label: __address__, replacement: ''}
  - {regex: drop_address, action: labeldrop}
`)
	for _, tc := range []struct {
		labels model.LabelSet
		addr   string
		err    string
	}{
		{model.LabelSet{"scheme": "ftp"}, "h:1", `__scheme__ "ftp" is not http or https`},
		{model.LabelSet{"name": "-bad"}, "h:1", `target name "-bad" must match ^[A-Za-z0-9][A-Za-z0-9_.:-]*$`},
		{model.LabelSet{"path": "metrics"}, "h:1", `__metrics_path__ "metrics" must start with /`},
		{model.LabelSet{"drop_address": "yes"}, "h:1", `no __address__ label`},
		{nil, "http://h:1", `__address__ "http://h:1" must be host:port, without scheme or path`},
		{nil, "user:hunter2@h:1", `__address__ must not carry credentials: use target_defaults.http_client_config`},
		{nil, "h:1?x=y", `__address__ "h:1?x=y" is not a valid host:port`},
	} {
		logs := &logBuffer{}
		bad := model.LabelSet{model.AddressLabel: model.LabelValue(tc.addr)}
		for n, v := range tc.labels {
			bad[n] = v
		}
		g := group("x.json:0", nil, "good:1")
		g.Targets = append([]model.LabelSet{bad}, g.Targets...)
		got := Targets(map[string][]*targetgroup.Group{"file_sd_configs[0]": {g}}, nil, cfg, logs.logger())
		if !hasNames("good:1")(got) {
			t.Errorf("%v %s: targets %v, want only good:1", tc.labels, tc.addr, names(got))
		}
		line := `level=error msg="Discovered target is not valid, ignoring it" discovery=file_sd_configs[0] source=x.json:0 index=0 err=`
		if got, want := strings.TrimSpace(logs.String()), line+strconv.Quote(tc.err); got != want {
			t.Errorf("%v %s: log\n got: %s\nwant: %s", tc.labels, tc.addr, got, want)
		}
		if strings.Contains(logs.String(), "hunter2") {
			t.Errorf("the log shows a credential: %s", logs)
		}
	}
}

// TestReservedLabelsDropped: a discovered label (a group label of file_sd, a
// relabelled pod label) whose name is one of the prober's own series' labels
// is dropped from the target, logged and counted; the target is kept with its
// other labels. Passed on, engine crashed the daemon's /metrics with a vantage
// set and vantage emptied it.
func TestReservedLabelsDropped(t *testing.T) {
	cfg := loadConfig(t, "file_sd_configs: [{files: [x.json]}]")
	for _, name := range config.ReservedLabels {
		logs := &logBuffer{}
		dropped := NewDroppedLabels()
		g := group("x.json:0", model.LabelSet{model.LabelName(name): "vllm", "zone": "eu-1"}, "pod:8000")
		got := TargetsCounting(map[string][]*targetgroup.Group{"file_sd_configs[0]": {g}}, nil, cfg, logs.logger(), Counters{DroppedLabels: dropped})
		if len(got) != 1 || got[0].Name != "pod:8000" {
			t.Fatalf("%s: targets %v, want pod:8000 kept", name, names(got))
		}
		if want := map[string]string{"zone": "eu-1"}; !reflect.DeepEqual(got[0].Labels, want) {
			t.Errorf("%s: labels %v, want %v", name, got[0].Labels, want)
		}
		if n := testutil.ToFloat64(dropped); n != 1 {
			t.Errorf("%s: vllm_prober_discovery_dropped_labels_total = %v, want 1", name, n)
		}
		want := `level=warn msg="Dropped a label of a discovered target" target=pod:8000 err="label name \"` + name + `\" is reserved: rename or drop it with relabel_configs"`
		if got := strings.TrimSpace(logs.String()); got != want {
			t.Errorf("%s: log\n got: %s\nwant: %s", name, got, want)
		}
	}
}

// TestTargetsWithoutGroups: before discovery reports, and for groups of a
// set the configuration does not have (a reload removed it), the list is
// the static targets, sorted.
func TestTargetsWithoutGroups(t *testing.T) {
	static := config.DefaultTarget
	static.Name, static.URL = "b", "http://127.0.0.1:1"
	static2 := static
	static2.Name = "a"
	cfg := loadConfig(t, "file_sd_configs: [{files: [x.json]}]")
	for _, groups := range []map[string][]*targetgroup.Group{
		nil,
		{"http_sd_configs[0]": {group("x", nil, "gone:1")}},
	} {
		if got := Targets(groups, []config.Target{static, static2}, cfg, nil); !hasNames("a", "b")(got) {
			t.Errorf("groups %v: targets %v, want the static targets a, b", groups, names(got))
		}
	}
}

// TestExamples loads the documented examples.
func TestExamples(t *testing.T) {
	for _, f := range []string{"example.yml", "relabel-example.yml"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		cfg := loadConfig(t, string(data))
		if err := Check(cfg); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	cfg := loadConfig(t, func() string {
		data, _ := os.ReadFile(filepath.Join("testdata", "relabel-example.yml"))
		return string(data)
	}())
	got := Targets(map[string][]*targetgroup.Group{"file_sd_configs[0]": {
		group("x", model.LabelSet{"served_model": "llama", "tls": "true", "env": "prod"}, "vllm-7.vllm.ml.svc:8000"),
		group("y", model.LabelSet{"env": "dev"}, "vllm-8.vllm.ml.svc:8000"),
	}}, nil, cfg, nil)
	if len(got) != 1 || got[0].Name != "vllm-7" || got[0].URL != "https://vllm-7.vllm.ml.svc:8000" ||
		got[0].Model != "llama" || !reflect.DeepEqual(got[0].Labels, map[string]string{"env": "prod"}) {
		t.Errorf("relabel example: %+v", got)
	}
}
