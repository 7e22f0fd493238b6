package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/shard"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// TestDashboardLegendsWithShards proves the dashboards on a sharded fleet:
// Prometheus scrapes TWO vllm_prober shards (--shard.count=2),
// which split two vllm_sim targets between them, each probed with two modules
// and compared with its own baseline (every shard exports every baseline, as
// in production). Every query of every dashboard runs over the last seconds,
// with the variables at their defaults and at a single value each (every
// target in turn), repeated rows expanded as Grafana does. For each panel, the
// legends rendered from legendFormat must tell its series apart: two series of
// a panel with the same legend are a defect (a line drawn twice under one
// name, or two endpoints that cannot be told apart).
//
// $DASHBOARDS_DIR checks another directory of dashboards (e.g. an older
// checkout's) with the same stack.
func TestDashboardLegendsWithShards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two vllm_sim, two vllm_prober shards and a real Prometheus for about a minute; skipped with -short")
	}
	promBin := prometheusBinary(t)
	proberBin, simBin := binaries(t)
	ctx := t.Context()
	dir := t.TempDir()
	dashDir := dashboardsDir
	if d := os.Getenv("DASHBOARDS_DIR"); d != "" {
		dashDir = d
	}

	// Two target names that land on different shards.
	names := []string{"sim-a"}
	for i := 'b'; len(names) < 2 && i <= 'z'; i++ {
		if n := "sim-" + string(i); shard.Of(n, 2) != shard.Of(names[0], 2) {
			names = append(names, n)
		}
	}
	if len(names) != 2 {
		t.Fatal("no pair of target names on different shards")
	}

	// Two baselines from the example file, one per target.
	example, err := os.ReadFile("../examples/baselines/vllm-sim-default.yml")
	if err != nil {
		t.Fatal(err)
	}
	// Both modules check their answer (vllm_sim --answers), so that the answer
	// panels have series from two targets and two modules to tell apart.
	answersFile := filepath.Join(dir, "answers.json")
	if err := os.WriteFile(answersFile, []byte(`{"What is 2+2? Answer with the number only.": "4", "Name three prime numbers.": "2, 3, 5"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var targets strings.Builder
	var baselines strings.Builder
	for i, name := range names {
		addr := freeAddr(t)
		sim := startProcess(t, "vllm_sim-"+name, simBin, "--web.listen-address="+addr, "--ttft=20ms", "--itl=5ms", "--answers="+answersFile)
		if err := waitReady(ctx, sim, "http://"+addr+"/health", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		bname := fmt.Sprintf("baseline-%d", i)
		bfile := filepath.Join(dir, bname+".yml")
		b := strings.Replace(string(example), "- name: vllm-sim-default", "- name: "+bname, 1)
		if err := os.WriteFile(bfile, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&baselines, "  - name: %s\n    file: %s\n", bname, bfile)
		fmt.Fprintf(&targets, "  - name: %s\n    url: http://%s\n    modules: [completion, chat]\n    max_num_seqs: 256\n    baseline: %s\n", name, addr, bname)
	}
	proberCfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(proberCfg, []byte(`global:
  probe_interval: 1s
  scrape_interval: 1s
  scrape_timeout: 900ms
  rate_window: 10s
modules:
  completion:
    prober: completions
    prompt: "What is 2+2? Answer with the number only."
    max_tokens: 4
    expect:
      equals: "4"
  chat:
    prober: chat
    messages:
      - role: user
        content: "Name three prime numbers."
    max_tokens: 8
    expect:
      regex: "\\b3\\b"
baselines:
`+baselines.String()+`targets:
`+targets.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var proberAddrs []string
	for i := range 2 {
		addr := freeAddr(t)
		p := startProcess(t, fmt.Sprintf("vllm_prober-%d", i), proberBin, "--config.file="+proberCfg,
			"--web.listen-address="+addr, "--shard.count=2", fmt.Sprintf("--shard.index=%d", i))
		if err := waitReady(ctx, p, "http://"+addr+"/-/ready", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		proberAddrs = append(proberAddrs, addr)
	}

	_, promURL := startPrometheus(t, promBin, dir, proberAddrs)
	client := &mixin.Client{BaseURL: promURL, HTTP: httpClient}

	// Warm-up: both shards' targets with both modules in the SLIs, both
	// servers scraped, both baselines from both shards, regression ratios.
	warm := map[string]int{
		`count(target_module:vllm_probe_success:ratio_rate5m)`:                       4,
		`count(vllm_server_up == 1)`:                                                 2,
		`count(count by (instance) (vllm_probe_attempts_total))`:                     2,
		`count(vllm_baseline_saturation_output_tokens_per_second)`:                   4,
		`count(count by (target) (vllm_probe_regression_ratio))`:                     2,
		`count(count_over_time(vllm_server_generation_tokens_per_second[10s]) >= 8)`: 2,
		`count(vllm_probe_answer_correct == 1)`:                                      4,
	}
	if err := waitFor(ctx, 90*time.Second, time.Second, "two shards, two targets, two modules in Prometheus", func(ctx context.Context) (bool, error) {
		for e, want := range warm {
			s, err := queryValues(ctx, client.BaseURL, e)
			if err != nil {
				return false, err
			}
			if len(s) != 1 || int(s[0].Value) != want {
				return false, fmt.Errorf("%s = %v, want %d", e, s, want)
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}

	paths, err := filepath.Glob(filepath.Join(dashDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no dashboards in %s: %v", dashDir, err)
	}
	end := time.Now()
	start := end.Add(-20 * time.Second)
	var queries, withData, empty int
	for _, p := range paths {
		d, err := mixin.LoadDashboard(p)
		if err != nil {
			t.Fatal(err)
		}
		assignments, err := variableAssignments(ctx, client, d)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range assignments {
			for _, panel := range d.Panels {
				for _, vals := range expandRepeat(ctx, t, client, d, panel, a.vals) {
					where := fmt.Sprintf("%s / %s (%s)", d.Title, panel.Title, describe(vals))
					seen := map[string]string{} // legend -> series
					for _, tg := range panel.Targets {
						expr := mixin.Interpolate(tg.Expr, vals, rateInterval)
						queries++
						series, err := client.RangeSeries(ctx, expr, start, end, interval)
						if err != nil {
							t.Errorf("%s: query %s: %v", where, expr, err)
							continue
						}
						if len(series) == 0 {
							empty++
							t.Logf("no series: %s: %s", where, expr)
							continue
						}
						withData++
						if tg.Table {
							continue // labels are columns, not legends
						}
						for _, s := range series {
							legend := mixin.RenderLegend(tg.LegendFormat, s)
							id := tg.RefID + " " + mixin.RenderLegend("", s)
							if other, dup := seen[legend]; dup {
								t.Errorf("%s: legend %q (legendFormat %q) is shared by %s and %s", where, legend, tg.LegendFormat, other, id)
								continue
							}
							seen[legend] = id
						}
					}
				}
			}
		}
	}
	t.Logf("%d panel queries run (%d dashboards, defaults and single values): %d returned series, %d none "+
		"(hints of signals vllm_sim exports, alerts, skips: absent here; listed above)", queries, len(paths), withData, empty)
	if withData < queries/2 {
		t.Errorf("only %d of %d queries returned data", withData, queries)
	}
}

// assignment is one setting of a dashboard's variables.
type assignment struct{ vals map[string]string }

// variableAssignments returns the dashboard's variables at their defaults
// (All where the default is All, else the first option, as Grafana selects)
// and, for every option of the target variable, at single values: that target
// and the first option of every other variable.
func variableAssignments(ctx context.Context, c *mixin.Client, d mixin.Dashboard) ([]assignment, error) {
	resolve := func(fixed map[string]string, single bool) (map[string]string, error) {
		vals := map[string]string{}
		for _, v := range d.Variables {
			if x, ok := fixed[v.Name]; ok {
				vals[v.Name] = x
				continue
			}
			opts, err := c.VariableOptions(ctx, v, vals, time.Minute)
			if err != nil {
				return nil, err
			}
			switch {
			case v.DefaultAll && !single:
				vals[v.Name] = v.AllValue
				if v.AllValue == "" {
					vals[v.Name] = mixin.RegexValue(opts)
				}
			case len(opts) > 0:
				vals[v.Name] = mixin.RegexValue(opts[:1])
			default:
				return nil, fmt.Errorf("%s: variable %s has no option", d.Title, v.Name)
			}
		}
		return vals, nil
	}
	def, err := resolve(nil, false)
	if err != nil {
		return nil, err
	}
	out := []assignment{{def}}
	for _, v := range d.Variables {
		if v.Name != "target" {
			continue
		}
		opts, err := c.VariableOptions(ctx, v, def, time.Minute)
		if err != nil {
			return nil, err
		}
		for _, o := range opts {
			vals, err := resolve(map[string]string{"target": mixin.RegexValue([]string{o})}, true)
			if err != nil {
				return nil, err
			}
			out = append(out, assignment{vals})
		}
	}
	return out, nil
}

// expandRepeat returns the variable settings a panel is drawn with: one per
// option of its row's repeat variable (Grafana repeats the row for each
// selected option), or vals itself.
func expandRepeat(ctx context.Context, t *testing.T, c *mixin.Client, d mixin.Dashboard, p mixin.Panel, vals map[string]string) []map[string]string {
	t.Helper()
	if p.Repeat == "" {
		return []map[string]string{vals}
	}
	for _, v := range d.Variables {
		if v.Name != p.Repeat {
			continue
		}
		opts, err := c.VariableOptions(ctx, v, vals, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]string
		for _, o := range opts {
			if !matchesRegex(vals[p.Repeat], o) {
				continue
			}
			x := map[string]string{}
			for k, val := range vals {
				x[k] = val
			}
			x[p.Repeat] = mixin.RegexValue([]string{o})
			out = append(out, x)
		}
		return out
	}
	t.Fatalf("%s: panel %s repeats for unknown variable %s", d.Title, p.Title, p.Repeat)
	return nil
}

func describe(vals map[string]string) string {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + vals[k]
	}
	return strings.Join(parts, ", ")
}

// matchesRegex reports whether Prometheus' anchored regex re matches s.
func matchesRegex(re, s string) bool {
	ok, err := regexp.MatchString("^(?:"+re+")$", s)
	return err == nil && ok
}
