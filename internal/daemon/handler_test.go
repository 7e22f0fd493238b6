package daemon

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/web"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// Handler serves d's pages as cmd/vllm_prober does (daemonweb.Handler, which
// imports this package, so these tests cannot call it), for the tests that
// drive the daemon over HTTP.
func (d *Daemon) Handler() http.Handler {
	spec, err := mixin.DefaultSpec()
	if err != nil {
		panic(err)
	}
	return web.New(web.Options{
		Logger: d.logger, Gatherer: d.reg, Registerer: d.registerer, Exposition: d.cache, Own: prometheus.Gatherers{d.own, d.cache.Shared()},
		TelemetryPath: d.opts.TelemetryPath, HistoryLimit: d.opts.HistoryLimit, DisableReload: d.opts.DisableReload,
		RegressionThreshold: *spec.Alerts.LatencyRegression.Threshold,
		Config:              d.Config, Running: d.Running, Reload: d.Reload, Ready: d.Ready,
		Scrubber: d.red, Probes: d.probes, Bursts: d.bursts, Baselines: d.cmp, Scrapes: d.coll, Clients: d.clients, Vantage: d.vantage,
	})
}
