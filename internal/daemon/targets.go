package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	promdiscovery "github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/discovery"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/shard"
)

// sdManagerName names the daemon's discovery manager: the name label of the
// prometheus_sd_* metrics of the manager itself
// (prometheus_sd_discovered_targets, prometheus_sd_updates_total, ...).
const sdManagerName = "vllm_prober"

// newDiscoveryManager builds the daemon's one discovery manager, Prometheus'
// own, registering the prometheus_sd_* metrics of every mechanism and of the
// manager on reg. Nothing runs until Run (runDiscovery); cancel stops it.
func newDiscoveryManager(reg prometheus.Registerer, logger *slog.Logger) (m *promdiscovery.Manager, cancel context.CancelFunc, err error) {
	sdMetrics, err := promdiscovery.CreateAndRegisterSDMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m = promdiscovery.NewManager(ctx, logger, reg, sdMetrics,
		promdiscovery.Name(sdManagerName), promdiscovery.Updatert(discovery.PublishDelay))
	if m == nil { // it logged why: its metrics did not register
		cancel()
		return nil, nil, fmt.Errorf("registering the metrics of the discovery manager %q", sdManagerName)
	}
	return m, cancel, nil
}

// apply is SafeConfig's apply: it makes cfg, a new valid configuration file,
// the one the managers run. The discovery sections are checked first, then
// the steps run: what the file sets for every target (the baselines are
// read, so that a bad baseline file fails the reload), the targets (the
// static ones, and those of the groups discovery last sent, under cfg's
// target_defaults and relabel_configs), and last the discovery manager's
// configuration, which keeps every discoverer whose configuration did not
// change. If any step refuses cfg, the steps before it go back to the
// previous configuration.
func (d *Daemon) apply(cfg *config.Config) error {
	// First, so that every error and log line about cfg is scrubbed of its
	// secrets. On failure the previous configuration's stay too: scrubbing
	// more is harmless.
	d.red.Set("config", append(configSecrets(cfg), configSecrets(d.sc.Config())...))
	if err := d.checkVantage(cfg); err != nil {
		return err
	}
	if err := d.checkOTLP(cfg); err != nil {
		return err
	}
	if err := discovery.Check(cfg.Discovery); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	return d.applySteps(cfg, d.targetsOf(cfg), d.reloadSteps())
}

// step is one manager's part in running a configuration: apply hands it the
// new one; when a later step fails, restore hands it back the one in force
// before. Its name prefixes its errors.
type step struct {
	name           string
	apply, restore func(*config.Config) error
}

// reloadSteps are the steps of a configuration file: the configuration work
// (baselines read, modules compiled) is done once per file, then the
// targets, then discovery. A discovery update runs the target steps alone.
func (d *Daemon) reloadSteps() []step {
	steps := append(d.configSteps(), d.targetSteps()...)
	return append(steps, step{"discovery", d.applyDiscovery, d.applyDiscovery})
}

// configSteps apply what a configuration file sets for every target: the
// baselines (read once per file), the probe modules (compiled once per
// file), buckets, label names and intervals.
func (d *Daemon) configSteps() []step {
	return []step{
		{"baselines", d.cmp.ApplyConfig, d.cmp.ApplyConfig},
		{"prober", d.probes.ApplyConfig, d.probes.ApplyConfig},
		{"collector", d.coll.ApplyConfig, d.coll.ApplyConfig},
	}
}

// targetSteps hand the managers the targets to run: the regression series
// against the baselines ApplyConfig loaded (no file read), the prober's
// pairs against the modules it compiled, the collector's scrapes (the
// gateways' /metrics among them); then the baseline joins computed from
// the collector's previous targets are computed again at their next read.
func (d *Daemon) targetSteps() []step {
	serversChanged := func(*config.Config) error { d.cmp.ServersChanged(); return nil }
	idle := func(cfg *config.Config) error { d.clients.SetIdleTimeout(idleTimeout(cfg)); return nil }
	return []step{
		{"http clients", idle, idle},
		{"baselines", d.cmp.SetTargets, d.cmp.SetTargets},
		{"prober", d.probes.SetTargets, d.probes.SetTargets},
		{"collector", d.coll.SetTargets, d.coll.SetTargets},
		{"baseline joins", serversChanged, serversChanged},
	}
}

// idleTimeout is the keep-alive timeout of the HTTP clients built for cfg's
// targets (httpclient.IdleTimeoutFor): two of the longest interval at which a
// target is probed or scraped.
func idleTimeout(cfg *config.Config) time.Duration {
	longest := max(time.Duration(cfg.Global.ProbeInterval), time.Duration(cfg.Global.ScrapeInterval))
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		longest = max(longest, cfg.ProbeInterval(t))
		if t.ScrapeMetrics {
			longest = max(longest, cfg.ScrapeInterval(t))
		}
	}
	return httpclient.IdleTimeoutFor(longest)
}

// applyDiscovery is the discovery step: the manager runs cfg's discovery
// sections from now on, keeping the discoverers whose configuration is
// unchanged (Prometheus' ApplyConfig). Before Run, and after it, the
// sections are only kept for Run. Called with applyMu held.
func (d *Daemon) applyDiscovery(cfg *config.Config) error {
	d.sdSets = discovery.Sets(cfg.Discovery)
	if !d.sdRunning {
		return nil
	}
	return d.sd.ApplyConfig(d.sdSets)
}

// targetsOf is this shard's share of cfg's targets: the static ones and
// those of the groups discovery last sent, under cfg's target_defaults and
// relabel_configs. Without discovery, the static targets run in the file's
// order. Called with applyMu held.
func (d *Daemon) targetsOf(cfg *config.Config) []config.Target {
	targets := cfg.Targets
	if cfg.Discovery.Enabled() {
		targets = discovery.TargetsCounting(d.sdGroups, cfg.Targets, cfg.Discovery, log.With(d.logger, "component", "discovery"), d.discoveryCounters)
	}
	own := shard.Targets(targets, d.opts.ShardCount, d.opts.ShardIndex)
	if d.probeOnly(cfg) {
		own = probeOnlyTargets(own)
	}
	return own
}

// applySteps runs steps with cfg and targets (targetsOf). When a step fails,
// the steps before it go back to the previous running configuration, last
// first. Called with applyMu held.
func (d *Daemon) applySteps(cfg *config.Config, targets []config.Target, steps []step) error {
	run := *cfg
	run.Targets = targets
	prev := d.running.Load()
	for i, s := range steps {
		if err := s.apply(&run); err != nil {
			for j := i - 1; j >= 0 && prev != nil; j-- {
				if rerr := steps[j].restore(prev); rerr != nil {
					level.Error(d.logger).Log("msg", "Cannot restore the previous config", "component", steps[j].name, "err", d.scrub(rerr.Error()))
				}
			}
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	static := make(map[string]bool, len(cfg.Targets))
	for _, t := range cfg.Targets {
		static[t.Name] = true
	}
	nStatic := 0
	for _, t := range run.Targets {
		if static[t.Name] {
			nStatic++
		}
	}
	d.targets.WithLabelValues("static").Set(float64(nStatic))
	d.targets.WithLabelValues("discovered").Set(float64(len(run.Targets) - nStatic))
	d.file = cfg
	d.running.Store(&run)
	return nil
}

// runDiscovery runs the current configuration's discovery until ctx is
// done, in goroutines wg waits for: the manager, and the one reader of its
// groups, which keeps the latest and applies the targets they make.
func (d *Daemon) runDiscovery(ctx context.Context, wg *sync.WaitGroup) {
	d.applyMu.Lock()
	d.sdRunning = true
	if err := d.sd.ApplyConfig(d.sdSets); err != nil {
		level.Error(d.logger).Log("msg", "Cannot start discovery", "err", d.scrub(err.Error()))
	}
	d.applyMu.Unlock()
	wg.Go(func() { _ = d.sd.Run() }) // returns ctx.Err() once stopped
	wg.Go(func() {
		// SyncCh is closed when the manager's sender returns.
		for groups := range d.sd.SyncCh() {
			d.discovered(groups)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		d.applyMu.Lock()
		d.sdRunning = false
		// Stops every discoverer and waits for its provider's loop.
		_ = d.sd.ApplyConfig(nil)
		d.applyMu.Unlock()
		d.sdCancel() // the manager returns, its sender closes SyncCh
	})
}

// discovered keeps groups, the discovery manager's latest, and applies the
// targets they make under the running configuration file when they changed.
func (d *Daemon) discovered(groups map[string][]*targetgroup.Group) {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if !d.sdRunning {
		return // stopping
	}
	d.sdGroups = groups
	targets := d.targetsOf(d.file)
	if prev := d.running.Load(); slices.EqualFunc(prev.Targets, targets, sameTarget) {
		return
	}
	if err := d.applySteps(d.file, targets, d.targetSteps()); err != nil {
		level.Error(d.logger).Log("msg", "Cannot apply discovered targets, keeping the previous ones", "err", d.scrub(err.Error()))
		return
	}
	level.Info(d.logger).Log("msg", "Discovered targets applied", "this_shard", len(targets))
}

func sameTarget(a, b config.Target) bool { return reflect.DeepEqual(a, b) }
