package mixin

// What Grafana does with a committed dashboard, done against Prometheus
// directly so that end-to-end tests can check every panel as a user sees it:
// resolve the template variables (defaults, or a single value each), expand
// the queries, run them over a time range and render each series' legend from
// its legendFormat.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Dashboard is the part of a committed Grafana dashboard the checks need.
type Dashboard struct {
	Title     string
	Variables []Variable
	Panels    []Panel
}

// Variable is a query template variable (the datasource variable is left out).
type Variable struct {
	Name string
	// Query is the label_values(...) query, with other variables unexpanded.
	Query string
	// Multi and IncludeAll as in Grafana; AllValue is the regex "All" stands for.
	Multi, IncludeAll bool
	AllValue          string
	// DefaultAll: the committed default is "All"; otherwise Grafana selects the
	// first option.
	DefaultAll bool
}

// Panel is one panel with its queries; Repeat names the variable its row is
// repeated for ("" when not repeated).
type Panel struct {
	Title, Type, Repeat string
	Targets             []PanelTarget
}

// PanelTarget is one query of a panel.
type PanelTarget struct {
	RefID, Expr, LegendFormat string
	// Table is true for instant queries in table format, which show labels as
	// columns rather than legends.
	Table bool
}

// LoadDashboard reads a dashboard JSON file.
func LoadDashboard(path string) (Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Dashboard{}, fmt.Errorf("reading dashboard: %w", err)
	}
	var raw struct {
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
				Multi      bool   `json:"multi"`
				IncludeAll bool   `json:"includeAll"`
				AllValue   string `json:"allValue"`
				Current    struct {
					Value any `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Repeat  string `json:"repeat"`
			Targets []struct {
				RefID        string `json:"refId"`
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
				Format       string `json:"format"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Dashboard{}, fmt.Errorf("decoding dashboard %s: %w", path, err)
	}
	d := Dashboard{Title: raw.Title}
	for _, v := range raw.Templating.List {
		if v.Type != "query" {
			continue
		}
		all := false
		switch cur := v.Current.Value.(type) {
		case string:
			all = cur == "$__all"
		case []any:
			all = len(cur) == 1 && cur[0] == "$__all"
		}
		d.Variables = append(d.Variables, Variable{Name: v.Name, Query: v.Definition, Multi: v.Multi,
			IncludeAll: v.IncludeAll, AllValue: v.AllValue, DefaultAll: all && v.IncludeAll})
	}
	repeat := ""
	for _, p := range raw.Panels {
		if p.Type == "row" {
			repeat = p.Repeat
			continue
		}
		panel := Panel{Title: p.Title, Type: p.Type, Repeat: repeat}
		for _, t := range p.Targets {
			panel.Targets = append(panel.Targets, PanelTarget{RefID: t.RefID, Expr: t.Expr, LegendFormat: t.LegendFormat, Table: t.Format == "table"})
		}
		d.Panels = append(d.Panels, panel)
	}
	return d, nil
}

var labelValuesQuery = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// VariableOptions returns the options of v as Grafana lists them (sorted), with
// the variables it depends on set to vals.
func (c *Client) VariableOptions(ctx context.Context, v Variable, vals map[string]string, lookback time.Duration) ([]string, error) {
	m := labelValuesQuery.FindStringSubmatch(v.Query)
	if m == nil {
		return nil, fmt.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.Query)
	}
	sel := Interpolate(m[1], vals, 0)
	a, err := c.api()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	vals2, _, _, err := a.LabelValues(ctx, m[2], []string{sel}, now.Add(-lookback), now)
	if err != nil {
		return nil, fmt.Errorf("variable %s: %w", v.Name, err)
	}
	out := make([]string, len(vals2))
	for i, lv := range vals2 {
		out[i] = string(lv)
	}
	sort.Strings(out)
	return out, nil
}

// Interpolate replaces the variables of expr as Grafana does for Prometheus:
// $name and ${name} by vals[name] (a regex: the All value, a single value, or
// (a|b) for several), and $__rate_interval, $__interval and $__range by
// rateInterval (when non-zero).
func Interpolate(expr string, vals map[string]string, rateInterval time.Duration) string {
	if rateInterval > 0 {
		ri := rateInterval.String()
		expr = strings.NewReplacer("$__rate_interval", ri, "${__rate_interval}", ri, "$__interval", ri, "$__range", ri).Replace(expr)
	}
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	// Longest first, so $targets is not read as $target + "s".
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		expr = strings.ReplaceAll(expr, "${"+n+"}", vals[n])
		expr = strings.ReplaceAll(expr, "$"+n, vals[n])
	}
	return expr
}

// RegexValue is the value Grafana substitutes for a selection of options of a
// variable: the option, or (a|b|...), each regex-escaped for use inside a
// PromQL double-quoted string (a backslash doubled, as Grafana's
// prometheusSpecialRegexEscape does).
func RegexValue(options []string) string {
	q := make([]string, len(options))
	for i, o := range options {
		q[i] = strings.ReplaceAll(regexp.QuoteMeta(o), `\`, `\\`)
	}
	if len(q) == 1 {
		return q[0]
	}
	return "(" + strings.Join(q, "|") + ")"
}

var legendRef = regexp.MustCompile(`\{\{\s*(.+?)\s*\}\}`)

// RenderLegend renders a legendFormat for a series' labels as Grafana does:
// {{name}} becomes the label's value (empty when absent). An empty format (or
// "__auto") gives the series' name and labels, metric{a="x", b="y"}.
func RenderLegend(format string, labels map[string]string) string {
	if format == "" || format == "__auto" {
		names := make([]string, 0, len(labels))
		for k := range labels {
			if k != "__name__" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
		}
		return labels["__name__"] + "{" + strings.Join(parts, ", ") + "}"
	}
	return legendRef.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendRef.FindStringSubmatch(m)[1]]
	})
}

// RangeSeries runs a range query and returns the label set of every series it
// returned.
func (c *Client) RangeSeries(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]map[string]string, error) {
	a, err := c.api()
	if err != nil {
		return nil, err
	}
	v, _, _, err := a.QueryRange(ctx, expr, promv1.Range{Start: start, End: end, Step: step})
	if err != nil {
		return nil, fmt.Errorf("querying Prometheus: %w", err)
	}
	mat, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("range query %q returned %s, not a matrix", expr, v.Type())
	}
	out := make([]map[string]string, len(mat))
	for i, ss := range mat {
		out[i] = make(map[string]string, len(ss.Metric))
		for k, lv := range ss.Metric {
			out[i][string(k)] = string(lv)
		}
	}
	return out, nil
}
