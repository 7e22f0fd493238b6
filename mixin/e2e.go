package mixin

// Helpers for the end-to-end proof on a real Prometheus (scraping vllm_prober,
// which probes vllm_sim): render scaled rules with Generate, write a Prometheus
// configuration with PrometheusConfig, then use Client to check that every
// dashboard query returns data and that alerts fire.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// PrometheusConfig returns a Prometheus configuration that scrapes the
// vllm_prober replicas at proberAddrs (host:port each, e.g. one per shard) under
// the spec's job name, evaluates ruleFiles every interval, and scrapes every
// interval.
func PrometheusConfig(spec *Spec, proberAddrs []string, interval time.Duration, ruleFiles []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", interval, interval)
	b.WriteString("rule_files:\n")
	for _, f := range ruleFiles {
		fmt.Fprintf(&b, "  - %s\n", yamlString(f))
	}
	quoted := make([]string, len(proberAddrs))
	for i, a := range proberAddrs {
		quoted[i] = yamlString(a)
	}
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: %s\n    static_configs:\n      - targets: [%s]\n",
		yamlString(spec.ProberJob), strings.Join(quoted, ", "))
	return []byte(b.String())
}

// DashboardQuery is one panel target of a committed dashboard, with its Grafana
// variables replaced so it runs against Prometheus directly.
type DashboardQuery struct {
	Dashboard, Panel string
	Expr             string
}

// allValues are the variables of the committed dashboards at "All" (.+).
var allValues = map[string]string{"job": ".+", "target": ".+", "model": ".+", "baseline": ".+"}

// DashboardQueries reads every *.json dashboard in dir and returns its panel
// queries, sorted, with every variable at All (.+) and rateInterval standing
// in for $__rate_interval.
func DashboardQueries(dir string, rateInterval time.Duration) ([]DashboardQuery, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("listing dashboards: %w", err)
	}
	var out []DashboardQuery
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading dashboard: %w", err)
		}
		var d struct {
			Title  string `json:"title"`
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("decoding dashboard %s: %w", p, err)
		}
		for _, panel := range d.Panels {
			for _, t := range panel.Targets {
				out = append(out, DashboardQuery{Dashboard: d.Title, Panel: panel.Title, Expr: Interpolate(t.Expr, allValues, rateInterval)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dashboard != out[j].Dashboard {
			return out[i].Dashboard < out[j].Dashboard
		}
		if out[i].Panel != out[j].Panel {
			return out[i].Panel < out[j].Panel
		}
		return out[i].Expr < out[j].Expr
	})
	return out, nil
}

// Client talks to the Prometheus HTTP API through client_golang's api/v1.
type Client struct {
	BaseURL string       // e.g. http://127.0.0.1:9090
	HTTP    *http.Client // nil means http.DefaultClient
}

// Alert is one entry of /api/v1/alerts.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Value       string            `json:"value"`
}

// api is the Prometheus HTTP API client of client_golang.
func (c *Client) api() (promv1.API, error) {
	cl, err := promapi.NewClient(promapi.Config{Address: c.BaseURL, Client: c.HTTP})
	if err != nil {
		return nil, fmt.Errorf("creating the Prometheus API client: %w", err)
	}
	return promv1.NewAPI(cl), nil
}

// Query runs an instant query and returns the number of series (or 1 for a
// scalar) it returned.
func (c *Client) Query(ctx context.Context, expr string) (int, error) {
	a, err := c.api()
	if err != nil {
		return 0, err
	}
	v, _, _, err := a.Query(ctx, expr, time.Now())
	if err != nil {
		return 0, fmt.Errorf("querying Prometheus: %w", err)
	}
	switch v := v.(type) {
	case model.Vector:
		return len(v), nil
	case model.Matrix:
		return len(v), nil
	case *model.Scalar, *model.String:
		return 1, nil
	}
	return 0, fmt.Errorf("unexpected result type %s", v.Type())
}

// Alerts returns the pending and firing alerts.
func (c *Client) Alerts(ctx context.Context) ([]Alert, error) {
	a, err := c.api()
	if err != nil {
		return nil, err
	}
	res, err := a.Alerts(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing alerts: %w", err)
	}
	out := make([]Alert, len(res.Alerts))
	for i, al := range res.Alerts {
		out[i] = Alert{Labels: labelMap(al.Labels), Annotations: labelMap(al.Annotations), State: string(al.State), Value: al.Value}
	}
	return out, nil
}

func labelMap(ls model.LabelSet) map[string]string {
	m := make(map[string]string, len(ls))
	for k, v := range ls {
		m[string(k)] = string(v)
	}
	return m
}

// WaitForAlert polls until an alert named name whose labels include match is
// firing, and returns it; it gives up when ctx is done.
func (c *Client) WaitForAlert(ctx context.Context, name string, match map[string]string, poll time.Duration) (Alert, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		alerts, err := c.Alerts(ctx)
		if err == nil {
			for _, a := range alerts {
				if a.State == "firing" && a.Labels["alertname"] == name && labelsMatch(a.Labels, match) {
					return a, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return Alert{}, fmt.Errorf("waiting for alert %s: %w (last error: %v)", name, ctx.Err(), err)
			}
			return Alert{}, fmt.Errorf("waiting for alert %s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
