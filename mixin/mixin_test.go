package mixin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/config"

	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// ruleFile mirrors the Prometheus rule file format for the fields we check.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         model.Duration    `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRuleFile(t *testing.T, name string) ruleFile {
	t.Helper()
	b, err := os.ReadFile(root("alerts/" + name))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func TestDashboardsUpToDate(t *testing.T) {
	files, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		path := root("dashboards/" + name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./mixin/... -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the dashboard generator; run `go test ./mixin/... -update`", path)
		}
	}
	entries, err := os.ReadDir(root("dashboards"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			t.Errorf("dashboards/%s is not produced by the generator", e.Name())
		}
	}
}

// grafanaDashboard is the part of a dashboard JSON the checks read.
type grafanaDashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID          int             `json:"id"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Datasource  json.RawMessage `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
}

func loadDashboards(t *testing.T) map[string]grafanaDashboard {
	t.Helper()
	paths, err := filepath.Glob(root("dashboards/*.json"))
	if err != nil || len(paths) != 3 {
		t.Fatalf("want 3 dashboards in dashboards/, got %v (%v)", paths, err)
	}
	out := map[string]grafanaDashboard{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d grafanaDashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = d
	}
	return out
}

func TestDashboardConventions(t *testing.T) {
	uids := map[string]string{}
	for name, d := range loadDashboards(t) {
		if d.SchemaVersion < 39 {
			t.Errorf("%s: schemaVersion %d, want >= 39", name, d.SchemaVersion)
		}
		if d.UID == "" || len(d.UID) > 40 {
			t.Errorf("%s: uid %q must be set and at most 40 characters", name, d.UID)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %q", name, other, d.UID)
		}
		uids[d.UID] = name
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type
			if v.Name == "datasource" && string(v.Query) != `"prometheus"` {
				t.Errorf("%s: datasource variable must query prometheus, got %s", name, v.Query)
			}
		}
		for v, typ := range map[string]string{"datasource": "datasource", "job": "query", "target": "query", "model": "query"} {
			if vars[v] != typ {
				t.Errorf("%s: template variable %q must exist with type %q, got %q", name, v, typ, vars[v])
			}
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			where := fmt.Sprintf("%s panel %d %q", name, p.ID, p.Title)
			if p.Description == "" {
				t.Errorf("%s: no description", where)
			}
			if p.FieldConfig.Defaults.Unit == "" {
				t.Errorf("%s: no unit", where)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no targets", where)
			}
			checkDatasource(t, where, p.Datasource)
			for _, tg := range p.Targets {
				checkDatasource(t, where+" target", tg.Datasource)
			}
		}
	}
}

func checkDatasource(t *testing.T, where string, raw json.RawMessage) {
	t.Helper()
	var ref struct{ Type, UID string }
	if err := json.Unmarshal(raw, &ref); err != nil || ref.Type != "prometheus" || ref.UID != "${datasource}" {
		t.Errorf("%s: datasource %s, want {type: prometheus, uid: ${datasource}}", where, raw)
	}
}

// grafanaVars replaces Grafana variables with values that keep the PromQL valid.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"${datasource}", "prometheus", "$datasource", "prometheus",
	"$job", "vllm_prober", "$target", "a", "$model", "m", "$baseline", "b",
)

// queries returns every PromQL expression of the rules and dashboards, keyed by
// where it comes from.
func queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{RulesFile, AlertsFile} {
		for _, g := range loadRuleFile(t, f).Groups {
			for i, r := range g.Rules {
				out[fmt.Sprintf("%s %s rule %d (%s%s)", f, g.Name, i, r.Record, r.Alert)] = r.Expr
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*), *\w+\)$`)
	for name, d := range loadDashboards(t) {
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil {
				t.Errorf("%s variable %s: definition %q is not label_values(<selector>, <label>)", name, v.Name, v.Definition)
				continue
			}
			out[fmt.Sprintf("%s variable %s", name, v.Name)] = grafanaVars.Replace(m[1])
		}
		for _, p := range d.Panels {
			for i, tg := range p.Targets {
				out[fmt.Sprintf("%s panel %q target %d", name, p.Title, i)] = grafanaVars.Replace(tg.Expr)
			}
		}
	}
	return out
}

// knownNames returns every metric name an expression may use.
func knownNames(t *testing.T) map[string]string {
	t.Helper()
	known := map[string]string{"ALERTS": "builtin", "ALERTS_FOR_STATE": "builtin", "up": "builtin"}
	for name, typ := range docMetrics(t) {
		known[name] = "docs/metrics.md"
		if typ == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[name+s] = "docs/metrics.md"
			}
		}
	}
	for _, n := range readList(t, "testdata/vllm-metrics.txt") {
		known[n] = "vllm"
	}
	for _, g := range loadRuleFile(t, RulesFile).Groups {
		for _, r := range g.Rules {
			known[r.Record] = "recording rule"
		}
	}
	return known
}

// docMetrics parses the metric tables of docs/metrics.md: name → type.
func docMetrics(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(root("docs/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z0-9_:]+)` \\| (counter|gauge|histogram|summary) \\|")
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			if _, dup := out[m[1]]; dup {
				t.Errorf("docs/metrics.md lists %s twice", m[1])
			}
			out[m[1]] = m[2]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md: no metric table rows found")
	}
	return out
}

func readList(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// plainAlternation is a __name__ regex that is a list of names: a|b|c.
var plainAlternation = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\|[a-zA-Z_:][a-zA-Z0-9_:]*)*$`)

// metricNames returns the metric names an expression selects.
func metricNames(e parser.Expr) []string {
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			names = append(names, vs.Name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			switch {
			case m.Name != model.MetricNameLabel:
			case m.Type == labels.MatchRegexp && plainAlternation.MatchString(m.Value):
				// {__name__=~"a|b"}: each name is checked.
				names = append(names, strings.Split(m.Value, "|")...)
			default:
				names = append(names, m.Value)
			}
		}
		return nil
	})
	return names
}

func TestExpressionsParseAndUseKnownNames(t *testing.T) {
	known := knownNames(t)
	qs := queries(t)
	if len(qs) < 80 {
		t.Fatalf("found only %d expressions; the collection is broken", len(qs))
	}
	used := map[string]bool{}
	for where, q := range qs {
		e, err := promQL.ParseExpr(q)
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, q)
			continue
		}
		names := metricNames(e)
		if len(names) == 0 && !strings.Contains(where, "absent") {
			t.Errorf("%s selects no metric: %s", where, q)
		}
		for _, n := range names {
			used[n] = true
			if _, ok := known[n]; !ok {
				t.Errorf("%s uses %q, which is neither in docs/metrics.md, a recording rule, a vllm: name vLLM exposes nor a builtin", where, n)
			}
		}
	}
	// Every recording rule is used by an alert or a dashboard, or is part of a
	// window family that is.
	for n, src := range known {
		if src != "recording rule" {
			continue
		}
		family := regexp.MustCompile(`(rate|increase)[0-9]+[smhd]$`).ReplaceAllString(n, "$1")
		if strings.HasPrefix(n, "group_module") {
			// The canary-versus-stable rules feed the rollout analyses of the
			// chart (deploy/rollouts_test.go checks that they query them).
			continue
		}
		found := false
		for u := range used {
			if strings.HasPrefix(u, family) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("recording rule family %s is used by no alert and no dashboard", family)
		}
	}
}

// TestNameCheckCatchesUnknownNames proves the name check can fail.
func TestNameCheckCatchesUnknownNames(t *testing.T) {
	known := knownNames(t)
	for _, q := range []string{
		`rate(vllm:num_preemptions[5m])`,     // the bug in vLLM's example rules
		`vllm:gpu_cache_usage_perc > 0.95`,   // removed name
		`vllm_probe_sucess{job="x"} == 0`,    // typo
		`{__name__="vllm_probe_ttft_total"}`, // not exported
	} {
		e, err := promQL.ParseExpr(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range metricNames(e) {
			if _, ok := known[n]; ok {
				t.Errorf("%q: %s is accepted but must not be", q, n)
			}
		}
	}
}

func TestMetricsDocListsContract(t *testing.T) {
	doc := docMetrics(t)
	contract := readList(t, "testdata/contract-metrics.txt")
	if len(contract) < 40 {
		t.Fatalf("contract list has %d names, want the full contract", len(contract))
	}
	for _, n := range contract {
		if _, ok := doc[n]; !ok {
			t.Errorf("docs/metrics.md does not list %s", n)
		}
	}
}

func TestSpecMatchesProberBuckets(t *testing.T) {
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.Buckets, config.DefaultBuckets) {
		t.Errorf("mixin/slo.yml histogram_buckets %v differ from config.DefaultBuckets %v", spec.Buckets, config.DefaultBuckets)
	}
}

// alertRules returns the alerting rules of the committed alert file.
func alertRules(t *testing.T) (names []string, rules []struct {
	Alert       string
	For         model.Duration
	Labels      map[string]string
	Annotations map[string]string
}) {
	t.Helper()
	seen := map[string]bool{}
	for _, g := range loadRuleFile(t, AlertsFile).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s has a recording rule %s; recording rules belong in %s", g.Name, r.Record, RulesFile)
				continue
			}
			rules = append(rules, struct {
				Alert       string
				For         model.Duration
				Labels      map[string]string
				Annotations map[string]string
			}{r.Alert, r.For, r.Labels, r.Annotations})
			if !seen[r.Alert] {
				names = append(names, r.Alert)
				seen[r.Alert] = true
			}
		}
	}
	return names, rules
}

func TestAlertConventions(t *testing.T) {
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	names, rules := alertRules(t)
	required := []string{"VLLMEngineHung", "VLLMEndpointDown", "VLLMProbesFailing", "VLLMMetricsScrapeFailing",
		"VLLMProberAbsent", "VLLMKVCacheSaturated", "VLLMRequestsQueueing", "VLLMPreemptionsHigh", "VLLMHeadroomLow",
		"VLLMThroughputRegression", "VLLMLatencyRegression", "VLLMProbeBudgetExhausted",
		"VLLMAvailabilityBudgetBurn", "VLLMTTFTBudgetBurn", "VLLME2EBudgetBurn"}
	for _, r := range required {
		if !slices.Contains(names, r) {
			t.Errorf("alert %s is missing", r)
		}
	}
	camel := regexp.MustCompile(`^VLLM[A-Z0-9][A-Za-z0-9]*$`)
	noTarget := map[string]bool{"VLLMProberAbsent": true, "VLLMProberConfigReloadFailed": true}
	for _, r := range rules {
		if !camel.MatchString(r.Alert) {
			t.Errorf("%s: name is not CamelCase with the VLLM prefix", r.Alert)
		}
		if r.For <= 0 {
			t.Errorf("%s: no `for`", r.Alert)
		}
		if !slices.Contains(validSeverities, r.Labels["severity"]) {
			t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
		}
		if s := r.Annotations["summary"]; s == "" || strings.Contains(s, "{{") {
			t.Errorf("%s: summary %q must be set and untemplated", r.Alert, s)
		}
		d := r.Annotations["description"]
		want := []string{`{{ printf "%.2f" $value }}`}
		if !noTarget[r.Alert] {
			want = append(want, "{{ $labels.target }}", "{{ $labels.model }}")
		}
		for _, w := range want {
			if !strings.Contains(d, w) {
				t.Errorf("%s: description %q does not contain %s", r.Alert, d, w)
			}
		}
		if got, want := r.Annotations["runbook_url"], spec.RunbookURL+"#"+strings.ToLower(r.Alert); got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
	}
}

// githubAnchor is the anchor GitHub generates for a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestRunbookHasSectionPerAlert(t *testing.T) {
	b, err := os.ReadFile(root("docs/runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			anchors[githubAnchor(h)] = h
		}
	}
	names, rules := alertRules(t)
	for _, r := range rules {
		_, frag, _ := strings.Cut(r.Annotations["runbook_url"], "#")
		h, ok := anchors[frag]
		if !ok {
			t.Errorf("%s: docs/runbook.md has no `## %s` section for anchor #%s", r.Alert, r.Alert, frag)
			continue
		}
		if h != r.Alert {
			t.Errorf("%s: runbook section is titled %q", r.Alert, h)
		}
	}
	for _, sec := range []string{"Meaning", "Confirm", "Act"} {
		if n, want := strings.Count(string(b), "**"+sec+".**"), len(names); n < want {
			t.Errorf("docs/runbook.md: %d sections have **%s.**, want %d", n, sec, want)
		}
	}
}

// promtoolTestFile mirrors the promtool unit test format for the fields we check.
type promtoolTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name           string `yaml:"name"`
		AlertRuleTests []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromQLExprTests []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

func TestEveryAlertHasFireAndNoFireCases(t *testing.T) {
	paths, err := filepath.Glob(root("alerts/tests/*.yml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no promtool tests in alerts/tests: %v", err)
	}
	fires, silent := map[string]int{}, map[string]int{}
	exprTested := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f promtoolTestFile
		if err := yaml.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		sort.Strings(f.RuleFiles)
		if want := []string{"../" + AlertsFile, "../" + RulesFile}; !slices.Equal(f.RuleFiles, want) {
			t.Errorf("%s: rule_files %v, want %v", p, f.RuleFiles, want)
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTests {
				if len(a.ExpAlerts) == 0 {
					silent[a.Alertname]++
					continue
				}
				fires[a.Alertname]++
				for _, e := range a.ExpAlerts {
					if e.ExpAnnotations["runbook_url"] == "" || e.ExpAnnotations["description"] == "" || e.ExpAnnotations["summary"] == "" {
						t.Errorf("%s %q: a firing case of %s lacks summary, description or runbook_url in exp_annotations", p, tc.Name, a.Alertname)
					}
					if e.ExpLabels["severity"] == "" {
						t.Errorf("%s %q: a firing case of %s lacks exp_labels.severity", p, tc.Name, a.Alertname)
					}
				}
			}
			for _, e := range tc.PromQLExprTests {
				exprTested[e.Expr] = true
			}
		}
	}
	names, _ := alertRules(t)
	for _, n := range names {
		if fires[n] == 0 {
			t.Errorf("%s has no promtool case where it fires", n)
		}
		if silent[n] == 0 {
			t.Errorf("%s has no promtool case where it must not fire", n)
		}
	}
	for n := range fires {
		if !slices.Contains(names, n) {
			t.Errorf("promtool tests expect unknown alert %s", n)
		}
	}
	// Each recording-rule family is checked by a promql_expr_test.
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for _, r := range spec.RecordingGroups()[0].Rules {
		families[regexp.MustCompile(`[0-9]+[smhd]$`).ReplaceAllString(r.Record, "")] = false
	}
	for e := range exprTested {
		for f := range families {
			if strings.HasPrefix(e, f) {
				families[f] = true
			}
		}
	}
	for f, ok := range families {
		if !ok {
			t.Errorf("no promql_expr_test checks a %s<window> recording rule", f)
		}
	}
}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found in PATH: install Debian's prometheus package (apt-get install -y prometheus), as CI does: %v", err)
	}
	return p
}

func TestPromtoolCheckRules(t *testing.T) {
	args := []string{"check", "rules", root("alerts/" + RulesFile), root("alerts/" + AlertsFile)}
	if out, err := exec.Command(promtool(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAlertsGlobLoads checks that alerts/ holds only loadable rule files: a
// Prometheus configuration with `rule_files: [<repo>/alerts/*.yml]`, as the
// README suggests, passes `promtool check config`, and the glob finds the
// generated files.
func TestAlertsGlobLoads(t *testing.T) {
	abs, err := filepath.Abs(root("alerts"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "prometheus.yml")
	body := "rule_files:\n  - " + yamlQuote(filepath.Join(abs, "*.yml")) + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool(t), "check", "config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config with rule_files %s/*.yml: %v\n%s", abs, err, out)
	}
	for _, f := range []string{RulesFile, AlertsFile} {
		if !strings.Contains(string(out), f) {
			t.Errorf("promtool check config did not load %s through the glob:\n%s", f, out)
		}
	}
}

func TestPromtoolTestRules(t *testing.T) {
	paths, err := filepath.Glob(root("alerts/tests/*.yml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no promtool tests: %v", err)
	}
	args := append([]string{"test", "rules"}, paths...)
	if out, err := exec.Command(promtool(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestScaledRulesAreValid renders the rules with a small --for-scale factor, as an
// end-to-end test would, and checks them with promtool.
func TestScaledRulesAreValid(t *testing.T) {
	dir := t.TempDir()
	written, err := Generate(Options{SLOFile: root("mixin/slo.yml"), OutDir: dir, ForScale: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, AlertsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"with --for-scale 0.01 (for testing only)",
		"[6s]) > 0),\n            1\n          ) >= 0.5",               // engine_hung window 10m → 6s
		"      - alert: VLLMLatencyRegression\n", "        for: 18s\n", // 30m → 18s
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("scaled alerts lack %q", want)
		}
	}
	r, err := os.ReadFile(filepath.Join(dir, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- record: target_module:vllm_probe_success:ratio_rate3d", "[43m12s])"} {
		if !bytes.Contains(r, []byte(want)) {
			t.Errorf("scaled rules lack %q", want)
		}
	}
	if out, err := exec.Command(promtool(t), append([]string{"check", "rules"}, written...)...).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on scaled rules: %v\n%s", err, out)
	}
}

func TestScaled(t *testing.T) {
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	same, err := spec.Scaled(1)
	if err != nil {
		t.Fatal(err)
	}
	a, errA := Render(same, "x")
	b, errB := Render(spec, "x")
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if !bytes.Equal(a[AlertsFile], b[AlertsFile]) {
		t.Error("Scaled(1) changed the output")
	}
	tiny, err := spec.Scaled(0.0001)
	if err != nil {
		t.Fatal(err)
	}
	if got := tiny.window(model.Duration(5 * 60e9)); got.String() != "1s" {
		t.Errorf("5m scaled by 0.0001 = %s, want the 1s floor", got)
	}
	if spec.Alerts.EngineHung.For.String() != "2m" {
		t.Errorf("Scaled modified the original spec: for = %s", spec.Alerts.EngineHung.For)
	}
	for _, f := range []float64{0, -1} {
		if _, err := spec.Scaled(f); err == nil || !strings.Contains(err.Error(), "scale factor must be a positive number") {
			t.Errorf("Scaled(%v): err = %v", f, err)
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	good, err := os.ReadFile(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"unknown field", "prober_job: vllm_prober", "prober_job: vllm_prober\nprober_jobs: x", "field prober_jobs not found"},
		{"threshold not a bucket", "threshold_seconds: 2\n", "threshold_seconds: 2.5\n", "slos.ttft.threshold_seconds 2.5 must be one of histogram_buckets"},
		{"objective out of range", "objective: 99.5", "objective: 100", "slos.availability.objective must be a percentage between 0 and 100 (exclusive), got 100"},
		{"bad severity", "engine_hung: {severity: critical", "engine_hung: {severity: page", `alerts.engine_hung.severity "page" must be one of critical, warning, info`},
		{"missing threshold", "kv_cache_saturated: {severity: warning, threshold: 0.95,", "kv_cache_saturated: {severity: warning,", "alerts.kv_cache_saturated.threshold is required"},
		{"unused window", "endpoint_down: {severity: critical,", "endpoint_down: {severity: critical, window: 5m,", "alerts.endpoint_down.window is not used by this alert"},
		{"window not an SLI window", "long_window: 1h,", "long_window: 2h,", "burn_rates[0]: long_window 2h is not one of sli_windows"},
		{"guard", "min_bad_probes: 3", "min_bad_probes: 0", "min_bad_probes must be at least 1, got 0"},
		{"runbook fragment", "runbook.md\n", "runbook.md#x\n", `runbook_url "https://github.com/vllm-prober/vllm_prober/blob/main/docs/runbook.md#x" must not contain a fragment`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(string(good), tc.from, tc.to, 1)
			if src == string(good) {
				t.Fatalf("test setup: %q not found in slo.yml", tc.from)
			}
			_, err := ParseSpec([]byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := LoadSpec(filepath.Join(t.TempDir(), "missing.yml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadSpec(missing) = %v, want ErrNotExist", err)
	}
}

func TestLeMatcherAndFormatting(t *testing.T) {
	for in, want := range map[float64]string{1: `le=~"1(\\.0)?"`, 2.5: `le="2.5"`, 0.005: `le="0.005"`, 60: `le=~"60(\\.0)?"`} {
		if got := leMatcher(in); got != want {
			t.Errorf("leMatcher(%v) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[float64]string{99.5: "0.995", 99: "0.99", 99.95: "0.9995", 99.99: "0.9999", 90: "0.9"} {
		if got := objectiveRatio(in); got != want {
			t.Errorf("objectiveRatio(%v) = %s, want %s", in, got, want)
		}
	}
}

// TestPromtoolHistogramModes runs alerts/tests/prometheus3/ (the SLI rules and
// burn-rate alerts on classic, native and NHCB input series of the same probes)
// with a Prometheus 3.x promtool: Prometheus 2.42's promtool cannot parse native
// histogram input series. `make e2e` sets E2E_PROMETHEUS3_DIR to the build of
// scripts/e2e-tools.sh prometheus3; without it the test skips, saying so.
func TestPromtoolHistogramModes(t *testing.T) {
	dir := os.Getenv("E2E_PROMETHEUS3_DIR")
	if dir == "" {
		testtool.Skip(t, "Prometheus 3.x promtool (E2E_PROMETHEUS3_DIR)", "make e2e builds it once with scripts/e2e-tools.sh prometheus3")
	}
	paths, err := filepath.Glob(root("alerts/tests/prometheus3/*.yml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no promtool tests in alerts/tests/prometheus3: %v", err)
	}
	args := append([]string{"test", "rules"}, paths...)
	out, err := exec.Command(filepath.Join(dir, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool (3.x) %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool (3.x) %s:\n%s", strings.Join(args, " "), out)
}
