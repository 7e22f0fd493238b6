package daemon

import (
	"fmt"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/config"
)

// startVantage is the vantage the daemon runs with: --vantage when set,
// else global.vantage of the configuration file (read here, before the
// registry is wrapped with it; a file that does not load fails New right
// after, with the load's own error). The label is part of every series'
// identity, so it is set once: checkVantage refuses a reload that changes it.
func startVantage(opts Options, logger log.Logger) string {
	cfg, err := config.LoadFile(opts.ConfigFile)
	if err != nil {
		return opts.Vantage
	}
	if opts.Vantage != "" {
		if cfg.Global.Vantage != "" && cfg.Global.Vantage != opts.Vantage {
			level.Warn(logger).Log("msg", "--vantage overrides global.vantage", "vantage", opts.Vantage, "global_vantage", cfg.Global.Vantage)
		}
		return opts.Vantage
	}
	return cfg.Global.Vantage
}

// checkVantage refuses a configuration whose global.vantage differs from the
// one the daemon started with, unless --vantage overrides it anyway.
func (d *Daemon) checkVantage(cfg *config.Config) error {
	if d.opts.Vantage != "" || cfg.Global.Vantage == d.vantage {
		return nil
	}
	return fmt.Errorf("global.vantage changed from %q to %q: the vantage label is set at start, restart vllm_prober to change it", d.vantage, cfg.Global.Vantage)
}

// probeOnly is whether this replica leaves every target's /metrics to a
// scraping vantage: --probe-only or global.probe_only.
func (d *Daemon) probeOnly(cfg *config.Config) bool {
	return d.opts.ProbeOnly || cfg.Global.ProbeOnly
}

// probeOnlyTargets is targets as a probe-only replica runs them: none
// scrapes /metrics, and a scrape-only target (nothing left to do) is not
// run at all. targets is not modified.
func probeOnlyTargets(targets []config.Target) []config.Target {
	out := make([]config.Target, 0, len(targets))
	for _, t := range targets {
		if !t.Probe {
			continue
		}
		t.ScrapeMetrics = false
		out = append(out, t)
	}
	return out
}

// Vantage is the vantage this replica probes from (--vantage, else
// global.vantage), "" without one.
func (d *Daemon) Vantage() string { return d.vantage }
