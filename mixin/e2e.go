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
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// HistogramMode is how a Prometheus ingests a histogram exposed with both
// classic buckets and native (sparse) buckets, as vllm_prober exposes its probe
// histograms when native_histogram_bucket_factor is set. The mixin's SLI rules and
// quantile panels work in every mode (docs/runbook.md, "Histogram modes").
type HistogramMode string

const (
	// HistogramClassic ingests the classic _bucket, _sum and _count series only
	// (Prometheus' default; scrape_native_histograms: false).
	HistogramClassic HistogramMode = "classic"
	// HistogramNative ingests the native histogram only and drops _bucket
	// (scrape_native_histograms: true; on 2.x --enable-feature=native-histograms).
	HistogramNative HistogramMode = "native"
	// HistogramNHCB converts the classic buckets into a native histogram with
	// custom buckets and drops _bucket (convert_classic_histograms_to_nhcb: true;
	// Prometheus 3.x).
	HistogramNHCB HistogramMode = "nhcb"
)

// HistogramModes lists every mode, classic first.
var HistogramModes = []HistogramMode{HistogramClassic, HistogramNative, HistogramNHCB}

// promConfig is the subset of Prometheus' configuration file the tests write.
type promConfig struct {
	Global struct {
		ScrapeInterval                 string `yaml:"scrape_interval"`
		EvaluationInterval             string `yaml:"evaluation_interval"`
		ScrapeNativeHistograms         *bool  `yaml:"scrape_native_histograms,omitempty"`
		ConvertClassicHistogramsToNHCB *bool  `yaml:"convert_classic_histograms_to_nhcb,omitempty"`
	} `yaml:"global"`
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// PrometheusConfig returns a Prometheus configuration that scrapes the
// vllm_prober replicas at proberAddrs (host:port each, e.g. one per shard) under
// the spec's job name, evaluates ruleFiles every interval, and scrapes every
// interval, ingesting histograms the classic way.
func PrometheusConfig(spec *Spec, proberAddrs []string, interval time.Duration, ruleFiles []string) ([]byte, error) {
	return PrometheusConfigMode(spec, proberAddrs, interval, ruleFiles, HistogramClassic, 3)
}

// PrometheusConfigMode is PrometheusConfig for a histogram mode and a
// Prometheus major version (2 or 3): on 3.x the mode is set in the global
// section; on 2.x native ingestion is the command-line flag
// --enable-feature=native-histograms (PrometheusFlags) and NHCB does not exist.
func PrometheusConfigMode(spec *Spec, proberAddrs []string, interval time.Duration, ruleFiles []string, mode HistogramMode, major int) ([]byte, error) {
	var c promConfig
	c.Global.ScrapeInterval = model.Duration(interval).String()
	c.Global.EvaluationInterval = model.Duration(interval).String()
	yes := true
	switch {
	case mode == HistogramClassic:
	case mode == HistogramNative && major >= 3:
		c.Global.ScrapeNativeHistograms = &yes
	case mode == HistogramNative:
		// 2.x: the feature flag alone switches native ingestion on.
	case mode == HistogramNHCB && major >= 3:
		c.Global.ConvertClassicHistogramsToNHCB = &yes
	default:
		return nil, fmt.Errorf("histogram mode %q is not available on Prometheus %d.x", mode, major)
	}
	c.RuleFiles = ruleFiles
	c.ScrapeConfigs = make([]struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	}, 1)
	c.ScrapeConfigs[0].JobName = spec.ProberJob
	c.ScrapeConfigs[0].StaticConfigs = make([]struct {
		Targets []string `yaml:"targets"`
	}, 1)
	c.ScrapeConfigs[0].StaticConfigs[0].Targets = proberAddrs
	b, err := yaml.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encoding Prometheus configuration: %w", err)
	}
	return b, nil
}

// PrometheusFlags returns the command-line flags a Prometheus of the major
// version needs for the histogram mode.
func PrometheusFlags(mode HistogramMode, major int) []string {
	if mode == HistogramNative && major < 3 {
		return []string{"--enable-feature=native-histograms"}
	}
	return nil
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
	// ActiveAt is when the alert became pending.
	ActiveAt time.Time `json:"activeAt"`
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
		out[i] = Alert{Labels: labelMap(al.Labels), Annotations: labelMap(al.Annotations), State: string(al.State), Value: al.Value, ActiveAt: al.ActiveAt}
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
