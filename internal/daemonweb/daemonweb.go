// Package daemonweb joins vllm_prober's two halves: the daemon (configuration,
// reloads, managers) and its pages (internal/web), which sees the daemon
// only through web.Options. cmd/vllm_prober and the programs and tests that
// run a whole vllm_prober build the pages here, so that neither half imports
// the other.
package daemonweb

import (
	"fmt"
	"net/http"

	"github.com/vllm-prober/vllm_prober/internal/daemon"
	"github.com/vllm-prober/vllm_prober/internal/web"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// Handler serves the pages and endpoints of d (web.New over WebOptions).
func Handler(d *daemon.Daemon) http.Handler { return web.New(WebOptions(d)) }

// WebOptions are the pages' view of d.
func WebOptions(d *daemon.Daemon) web.Options {
	o := d.Options()
	cache, own := d.Exposition()
	return web.Options{
		Exposition:          cache,
		Own:                 own,
		Logger:              d.Logger(),
		Gatherer:            d.Registry(),
		Registerer:          d.Registerer(),
		TelemetryPath:       o.TelemetryPath,
		HistoryLimit:        o.HistoryLimit,
		DisableReload:       o.DisableReload,
		RegressionThreshold: regressionThreshold(),
		Config:              d.Config,
		Running:             d.Running,
		Reload:              d.Reload,
		Ready:               d.Ready,
		Scrubber:            d.Redactor(),
		Probes:              d.Prober(),
		Bursts:              d.Bursts(),
		Baselines:           d.Baselines(),
		Scrapes:             d.Collector(),
		Clients:             d.Clients(),
		Vantage:             d.Vantage(),
	}
}

// regressionThreshold is the threshold of the latency regression alert
// (alerts.latency_regression in mixin/slo.yml, from which
// alerts/vllm_prober.alerts.yml is generated), which the pages colour.
func regressionThreshold() float64 {
	spec, err := mixin.DefaultSpec()
	if err != nil || spec.Alerts.LatencyRegression.Threshold == nil {
		// The file is built in and validated by the mixin's tests.
		panic(fmt.Sprintf("mixin/slo.yml has no latency_regression threshold: %v", err))
	}
	return *spec.Alerts.LatencyRegression.Threshold
}
