package mixin

// Helpers for the end-to-end proof on a real Prometheus (scraping vllm_prober,
// which probes vllm_sim): render scaled rules with Generate, write a Prometheus
// configuration with PrometheusConfig, then use Client to check that every
// dashboard query returns data and that alerts fire.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
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

// Client talks to the Prometheus HTTP API.
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

func (c *Client) get(ctx context.Context, path string, q url.Values, into any) error {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("querying Prometheus: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading Prometheus response: %w", err)
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("decoding Prometheus response (HTTP %d): %w", resp.StatusCode, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("prometheus %s: %s (HTTP %d)", path, env.Error, resp.StatusCode)
	}
	if err := json.Unmarshal(env.Data, into); err != nil {
		return fmt.Errorf("decoding Prometheus data: %w", err)
	}
	return nil
}

// Query runs an instant query and returns the number of series (or 1 for a
// scalar) it returned.
func (c *Client) Query(ctx context.Context, expr string) (int, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := c.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return 0, err
	}
	switch data.ResultType {
	case "scalar", "string":
		return 1, nil
	}
	var series []json.RawMessage
	if err := json.Unmarshal(data.Result, &series); err != nil {
		return 0, fmt.Errorf("decoding query result: %w", err)
	}
	return len(series), nil
}

// Alerts returns the pending and firing alerts.
func (c *Client) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := c.get(ctx, "/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
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
