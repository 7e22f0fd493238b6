package mixin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	yaml "go.yaml.in/yaml/v2"
)

// promQL parses the expressions the tests check, as Prometheus does with
// its default options.
var promQL = parser.NewParser(parser.Options{})

// dashboardLinterRules are the rule names of grafana/dashboard-linter v0.1.1
// (the `name:` of each rule in its lint/rule_*.go; target-job-rule and
// target-instance-rule are built by newTargetRequiredMatcherRule). A .lint key
// that is not one of them is silently ignored by the linter.
var dashboardLinterRules = []string{
	"panel-datasource-rule", "panel-no-targets-rule", "panel-title-description-rule",
	"panel-units-rule", "target-counter-agg-rule", "target-instance-rule", "target-job-rule",
	"target-logql-auto-rule", "target-logql-rule", "target-promql-rule",
	"target-rate-interval-rule", "template-datasource-rule", "template-instance-rule",
	"template-job-rule", "template-label-promql-rule", "template-on-time-change-reload-rule",
	"uneditable-dashboard",
}

// lintFile mirrors dashboard-linter's lint.ConfigurationFile as its yaml.v3
// decoder reads it: `exclusions` and `warnings` map a rule name to a reason and
// optional entries; an entry's fields have no yaml tags there, so their keys
// are the lower-cased field names (targetidx, not targetIdx).
type lintFile struct {
	Exclusions map[string]lintRuleEntries `yaml:"exclusions"`
	Warnings   map[string]lintRuleEntries `yaml:"warnings"`
}

type lintRuleEntries struct {
	Reason  string `yaml:"reason"`
	Entries []struct {
		Reason    string `yaml:"reason"`
		Dashboard string `yaml:"dashboard"`
		Panel     string `yaml:"panel"`
		Alert     string `yaml:"alert"`
		TargetIdx string `yaml:"targetidx"`
	} `yaml:"entries"`
}

// TestLintFileMatchesDashboards checks dashboards/.lint against
// dashboard-linter's format and against the dashboards: every key is a rule the
// linter has, every exclusion gives a reason, entries name panels that exist,
// and each exclusion is needed and complete (the panels excluded from
// target-job-rule are exactly those with a selector without job=~"$job"; no
// dashboard has an instance variable; no query selects by instance). The
// linter itself is not a module this repository may depend on; the .lint was
// checked with dashboard-linter v0.1.1 built from its source (`lint --strict`
// passes on each dashboard, and fails without the .lint).
func TestLintFileMatchesDashboards(t *testing.T) {
	b, err := os.ReadFile(root("dashboards/" + LintFile))
	if err != nil {
		t.Fatal(err)
	}
	var lf lintFile
	if err := yaml.UnmarshalStrict(b, &lf); err != nil {
		t.Fatalf("dashboards/.lint is not in dashboard-linter's format: %v", err)
	}
	if len(lf.Exclusions) == 0 {
		t.Fatal("dashboards/.lint excludes nothing")
	}

	titles := map[string]bool{}
	panels := map[string]bool{}
	var missingJob []string
	hasInstanceVar := false
	for _, d := range committedDashboards(t) {
		titles[d.Title] = true
		for _, v := range d.Variables {
			if v.Name == "instance" {
				hasInstanceVar = true
			}
		}
		for _, panel := range d.Panels {
			panels[panel.Title] = true
			for _, tg := range panel.Targets {
				e, err := promQL.ParseExpr(strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"))
				if err != nil {
					t.Errorf("%s / %s: %v", d.Title, panel.Title, err)
					continue
				}
				for _, sel := range parser.ExtractSelectors(e) {
					if !hasMatcher(sel, "job", labels.MatchRegexp, "$job") && !slices.Contains(missingJob, panel.Title) {
						missingJob = append(missingJob, panel.Title)
					}
					for _, m := range sel {
						if m.Name == "instance" {
							t.Errorf("%s / %s: selects by instance (the prober replica): %s", d.Title, panel.Title, tg.Expr)
						}
					}
				}
			}
		}
	}

	for _, section := range []map[string]lintRuleEntries{lf.Exclusions, lf.Warnings} {
		for rule, ex := range section {
			if !slices.Contains(dashboardLinterRules, rule) {
				t.Errorf(".lint: %q is not a dashboard-linter rule; the linter would ignore it", rule)
			}
			if strings.TrimSpace(ex.Reason) == "" {
				t.Errorf(".lint: %s has no reason", rule)
			}
			for _, e := range ex.Entries {
				if e.Dashboard != "" && !titles[e.Dashboard] {
					t.Errorf(".lint: %s names dashboard %q, which does not exist", rule, e.Dashboard)
				}
				if e.Panel != "" && !panels[e.Panel] {
					t.Errorf(".lint: %s names panel %q, which does not exist", rule, e.Panel)
				}
			}
		}
	}

	var jobEntries []string
	for _, e := range lf.Exclusions["target-job-rule"].Entries {
		jobEntries = append(jobEntries, e.Panel)
	}
	sort.Strings(jobEntries)
	sort.Strings(missingJob)
	if !slices.Equal(jobEntries, missingJob) {
		t.Errorf(".lint target-job-rule excludes panels %q; the panels with a selector without job=~\"$job\" are %q", jobEntries, missingJob)
	}
	if _, ok := lf.Exclusions["template-instance-rule"]; ok == hasInstanceVar {
		t.Errorf(".lint: template-instance-rule excluded: %v, yet a dashboard has an instance variable: %v", ok, hasInstanceVar)
	}
	if _, ok := lf.Exclusions["target-instance-rule"]; !ok {
		t.Error(".lint: no query selects by instance, so target-instance-rule must be excluded")
	}
}

func hasMatcher(sel []*labels.Matcher, name string, typ labels.MatchType, value string) bool {
	for _, m := range sel {
		if m.Name == name && m.Type == typ && m.Value == value {
			return true
		}
	}
	return false
}

// signalOf maps the series a panel may plot to the vllm_server_signal_available
// signal that says whether the server exports its source family
// (collector/signals.go). vllm_server_requests is split by its state matcher.
var signalOf = map[string]string{
	"vllm_server_preemptions_per_second":      "preemptions",
	"vllm_server_queue_time_seconds":          "queue_time",
	"vllm_server_kv_cache_usage_ratio":        "kv_cache_usage",
	"vllm_server_time_to_first_token_seconds": "ttft",
	"vllm_probe_server_ttft_gap_seconds":      "ttft",
	"vllm_server_inter_token_latency_seconds": "itl",
	"vllm_server_e2e_latency_seconds":         "e2e",
	"vllm_server_request_success_per_second":  "request_success",
}

// TestMissingSignalPanelsCarryHint checks the "not exported by this
// server" on every dashboard: a panel that plots a series of an optional
// family also queries the hint for that signal (vllm_server_signal_available
// == 0, drawn dashed with that legend, and mapped to that text in a stat), so
// a server without the family shows why the panel is empty instead of "No
// data".
func TestMissingSignalPanelsCarryHint(t *testing.T) {
	checked := 0
	for _, d := range committedDashboards(t) {
		for _, panel := range d.Panels {
			need, have := map[string]bool{}, map[string]bool{}
			for _, tg := range panel.Targets {
				e, err := promQL.ParseExpr(strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"))
				if err != nil {
					t.Fatalf("%s / %s: %v", d.Title, panel.Title, err)
				}
				for _, sel := range parser.ExtractSelectors(e) {
					var name, state, signal string
					for _, m := range sel {
						switch m.Name {
						case model.MetricNameLabel:
							name = m.Value
						case "state":
							state = m.Value
						case "signal":
							signal = m.Value
						}
					}
					switch {
					case name == "vllm_server_signal_available" && signal != "":
						if !strings.Contains(tg.LegendFormat, "not exported by this server") {
							t.Errorf("%s / %s: hint for %s has legend %q", d.Title, panel.Title, signal, tg.LegendFormat)
						}
						have[signal] = true
					case name == "vllm_server_requests":
						for _, s := range []string{"running", "waiting"} {
							if state == "" || strings.Contains(state, s) {
								need[s] = true
							}
						}
					case signalOf[name] != "":
						need[signalOf[name]] = true
					}
				}
			}
			for s := range need {
				checked++
				if !have[s] {
					t.Errorf("%s / %s: plots the %s signal without its \"not exported by this server\" hint", d.Title, panel.Title, s)
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d panel signals checked", checked)
	}
}

// TestHintQueriesOnPromtool runs every "not exported by this server" hint
// query of the dashboards (variables at All) in Prometheus' engine through
// promtool: target "a" lacks the signal and is exported by two prober
// replicas (as during a move), target "b" exports it. Each hint must return
// one series, for "a" only, whose rendered legend says the signal is not
// exported.
func TestHintQueriesOnPromtool(t *testing.T) {
	var b strings.Builder
	b.WriteString("rule_files: []\nevaluation_interval: 1m\ntests:\n")
	n := 0
	for _, d := range committedDashboards(t) {
		for _, panel := range d.Panels {
			for _, tg := range panel.Targets {
				if !strings.Contains(tg.Expr, "vllm_server_signal_available") || !strings.Contains(tg.LegendFormat, "not exported") {
					continue
				}
				signal := regexp.MustCompile(`signal="([a-z0-9_]+)"`).FindStringSubmatch(tg.Expr)
				if signal == nil {
					t.Errorf("%s / %s: hint without a signal matcher: %s", d.Title, panel.Title, tg.Expr)
					continue
				}
				sig := signal[1]
				legend := RenderLegend(tg.LegendFormat, map[string]string{"target": "a", "signal": sig})
				if legend != "a "+sig+": not exported by this server" {
					t.Errorf("%s / %s: hint legend renders as %q", d.Title, panel.Title, legend)
				}
				n++
				series := func(instance, pod, target, value string) string {
					return fmt.Sprintf("      - series: 'vllm_server_signal_available{job=\"vllm_prober\",instance=%q,pod=%q,target=%q,signal=%q}'\n        values: '%sx10'\n",
						instance, pod, target, sig, value)
				}
				fmt.Fprintf(&b, "  - name: %s\n    interval: 1m\n    input_series:\n", yamlQuote(d.Title+" / "+panel.Title+" / "+sig))
				b.WriteString(series("10.0.0.1:10040", "vllm-prober-0", "a", "0"))
				b.WriteString(series("10.0.0.2:10040", "vllm-prober-1", "a", "0"))
				b.WriteString(series("10.0.0.1:10040", "vllm-prober-0", "b", "1"))
				fmt.Fprintf(&b, "    promql_expr_test:\n      - expr: %s\n        eval_time: 5m\n        exp_samples:\n          - labels: '{target=\"a\", signal=%q}'\n            value: 0\n",
					yamlQuote(Interpolate(tg.Expr, allValues, 5*time.Minute)), sig)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d hint queries found", n)
	}
	file := filepath.Join(t.TempDir(), "hints_test.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "test", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules (%d hint queries): %v\n%s\n%s", n, err, out, b.String())
	}
}

// outputLabels returns the labels that can tell a query's series apart: the
// grouping of its outermost `by` aggregation (le dropped under
// histogram_quantile), the labels a group_left/group_right copies, or ok=false
// when the query keeps labels it does not name (`without`, a bare selector).
func outputLabels(e parser.Expr) (ls []string, ok bool) {
	switch n := e.(type) {
	case *parser.ParenExpr:
		return outputLabels(n.Expr)
	case *parser.AggregateExpr:
		if n.Without {
			return nil, false
		}
		return n.Grouping, true
	case *parser.Call:
		if n.Func.Name == "histogram_quantile" {
			ls, ok := outputLabels(n.Args[1])
			return slices.DeleteFunc(slices.Clone(ls), func(l string) bool { return l == "le" }), ok
		}
		if n.Func.Name == "time" || n.Func.Name == "vector" {
			return nil, true
		}
		for _, a := range n.Args {
			if a.Type() == parser.ValueTypeVector {
				return outputLabels(a)
			}
		}
		return nil, false
	case *parser.BinaryExpr:
		l, lok := outputLabels(n.LHS)
		r, rok := outputLabels(n.RHS)
		switch {
		case n.LHS.Type() == parser.ValueTypeScalar:
			return r, rok
		case n.RHS.Type() == parser.ValueTypeScalar:
			return l, lok
		case n.Op == parser.LOR:
			return append(slices.Clone(l), r...), lok && rok
		}
		if n.VectorMatching != nil {
			l = append(slices.Clone(l), n.VectorMatching.Include...)
		}
		return l, lok
	case *parser.NumberLiteral:
		return nil, true
	}
	return nil, false
}

// TestLegendsNameEveryGroupingLabel is the static half of the sharded fleet's legend
// proof (the live half is e2e's TestDashboardLegendsWithShards): every label a
// query keeps in its outermost aggregation can differ between its series, so
// the legend must name it, except target where the panel shows one target
// (Endpoint detail's single-value variable, or a row repeated per target).
func TestLegendsNameEveryGroupingLabel(t *testing.T) {
	checked := 0
	for _, d := range committedDashboards(t) {
		singleTarget := false
		for _, v := range d.Variables {
			if v.Name == "target" && !v.Multi && !v.IncludeAll {
				singleTarget = true
			}
		}
		for _, panel := range d.Panels {
			for _, tg := range panel.Targets {
				if tg.Table {
					continue
				}
				e, err := promQL.ParseExpr(strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"))
				if err != nil {
					t.Fatalf("%s / %s: %v", d.Title, panel.Title, err)
				}
				ls, ok := outputLabels(e)
				if !ok {
					continue // keeps unnamed labels: the live test renders its legends
				}
				checked++
				for _, l := range ls {
					if l == "target" && (singleTarget || panel.Repeat == "target") {
						continue
					}
					if !strings.Contains(tg.LegendFormat, "{{"+l+"}}") {
						t.Errorf("%s / %s: legend %q leaves out %s, by which the query %s splits its series", d.Title, panel.Title, tg.LegendFormat, l, tg.Expr)
					}
				}
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d queries checked", checked)
	}
}

// committedDashboards loads every dashboard of dashboards/.
func committedDashboards(t *testing.T) []Dashboard {
	t.Helper()
	paths, err := filepath.Glob(root("dashboards/*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("dashboards: %v %v", paths, err)
	}
	out := make([]Dashboard, 0, len(paths))
	for _, p := range paths {
		d, err := LoadDashboard(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}
