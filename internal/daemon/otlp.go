package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/genaiotel"
)

// otlpSettings are the OTLP push's endpoint and interval: the flags',
// else global.otlp of the configuration the daemon started with.
func (d *Daemon) otlpSettings() (endpoint string, interval time.Duration) {
	g := d.sc.Config().Global.OTLP
	endpoint, interval = d.opts.OTLPEndpoint, d.opts.OTLPInterval
	if endpoint == "" {
		endpoint = g.Endpoint
	}
	if interval <= 0 {
		interval = time.Duration(g.Interval)
	}
	return endpoint, interval
}

// startOTLP starts the OTLP push of the probes' GenAI metrics when an
// endpoint is set. The returned stop flushes what was recorded since the
// last push, within the shutdown timeout, and stops the push's goroutine.
func (d *Daemon) startOTLP(ctx context.Context) (stop func(), err error) {
	endpoint, interval := d.otlpSettings()
	if endpoint == "" {
		return func() {}, nil
	}
	e, err := genaiotel.New(ctx, genaiotel.Options{Endpoint: endpoint, Interval: interval, Version: version.Version,
		Vantage: d.vantage, Logger: d.logger, Registerer: d.registerer})
	if err != nil {
		return nil, fmt.Errorf("starting the OTLP push: %w", err)
	}
	d.otlp.Store(e)
	level.Info(d.logger).Log("msg", "Pushing the probes' GenAI metrics over OTLP", "endpoint", endpoint, "interval", interval,
		"semantic_conventions", genaiotel.Semconv)
	return func() {
		d.otlp.Store(nil)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.ShutdownTimeout)
		defer cancel()
		if err := e.Shutdown(sctx); err != nil {
			level.Warn(d.logger).Log("msg", "The last OTLP push failed", "err", err)
		}
	}, nil
}

// checkOTLP refuses a configuration whose global.otlp differs from the one
// the daemon started with, as checkVantage does: the push is set at start,
// unless both flags override the section anyway.
func (d *Daemon) checkOTLP(cfg *config.Config) error {
	prev := d.sc.Config()
	if prev == nil || cfg.Global.OTLP == prev.Global.OTLP || (d.opts.OTLPEndpoint != "" && d.opts.OTLPInterval > 0) {
		return nil
	}
	return errors.New("global.otlp changed: the OTLP push is set at start, restart vllm_prober to change it")
}
