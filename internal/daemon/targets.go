package daemon

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/internal/config"
	"github.com/vllm-prober/vllm_prober/internal/discovery"
	"github.com/vllm-prober/vllm_prober/internal/shard"
)

// discoveryRun is the target discovery of one configuration file (none when
// the file configures no discovery).
type discoveryRun struct {
	m   *discovery.Manager
	cfg *config.Config
	gen uint64

	cancel context.CancelFunc // nil until started
	done   chan struct{}
}

// apply is SafeConfig's apply: it makes cfg, a new valid configuration file,
// the one the managers run. The baselines are loaded first, so that a bad
// baseline file fails the reload; if any manager refuses the configuration,
// the others go back to the previous one. On success the discovery of the old
// configuration stops and the new one starts.
func (d *Daemon) apply(cfg *config.Config) error {
	// First, so that every error and log line about cfg is scrubbed of its
	// secrets. On failure the previous configuration's stay too: scrubbing
	// more is harmless.
	d.red.Set("config", append(configSecrets(cfg), configSecrets(d.sc.Config())...))
	// Without discovery the static targets run in the file's order.
	list := cfg.Targets
	var m *discovery.Manager
	if cfg.Discovery.Enabled() {
		var err error
		m, err = discovery.New(cfg.Discovery, cfg.Targets, discovery.Options{Logger: log.With(d.logger, "component", "discovery"), Metrics: d.sdMetrics})
		if err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		if err := m.CheckFiles(); err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		list = m.Targets() // the static targets, until discovery reports
	}

	d.applyMu.Lock()
	if m != nil {
		list = d.carryOver(cfg, list)
	}
	// The configuration work (baselines read, modules compiled) is done
	// once per configuration file; discovery refreshes only hand the
	// managers new targets (targetSteps).
	if err := d.applyTargets(cfg, list, append(d.configSteps(), d.targetSteps()...)); err != nil {
		d.applyMu.Unlock()
		return err
	}
	d.gen++
	var run *discoveryRun
	if m != nil {
		run = &discoveryRun{m: m, cfg: cfg, gen: d.gen}
	}
	d.applyMu.Unlock()

	// Not under applyMu: the old discovery may be waiting for it to hand over
	// a list, which the new generation makes it drop.
	d.discMu.Lock()
	defer d.discMu.Unlock()
	if old := d.disc; old != nil {
		old.stop()
	}
	d.disc = run
	if run != nil && d.runCtx != nil {
		d.startLocked(run)
	}
	return nil
}

// carryOver adds to static (the new file's static targets) the targets
// discovered under the previous configuration that still fit cfg (their
// modules and baseline exist, no static target has their name), so that a
// reload does not restart their series while the new discovery starts up.
// Called with applyMu held.
func (d *Daemon) carryOver(cfg *config.Config, static []config.Target) []config.Target {
	prev := d.running.Load()
	if prev == nil {
		return static
	}
	taken := map[string]bool{}
	for _, t := range static {
		taken[t.Name] = true
	}
	baselines := map[string]bool{}
	for _, b := range cfg.Baselines {
		baselines[b.Name] = true
	}
	out := static
	for _, t := range prev.Targets {
		if d.static[t.Name] || taken[t.Name] || (t.Baseline != "" && !baselines[t.Baseline]) {
			continue
		}
		fits := true
		for _, mod := range t.Modules {
			if _, ok := cfg.Modules[mod]; !ok {
				fits = false
			}
		}
		if fits {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// step is one manager's part in running a configuration: apply hands it the
// new one; when a later step fails, restore hands it back the one in force
// before. Its name prefixes its errors.
type step struct {
	name           string
	apply, restore func(*config.Config) error
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
// pairs against the modules it compiled, the collector's scrapes, the
// gateways' /metrics.
func (d *Daemon) targetSteps() []step {
	return []step{
		{"baselines", d.cmp.SetTargets, d.cmp.SetTargets},
		{"prober", d.probes.SetTargets, d.probes.SetTargets},
		{"collector", d.coll.SetTargets, d.coll.SetTargets},
		{"gateways", d.gateways.SetTargets, d.gateways.SetTargets},
	}
}

// applyTargets runs steps with cfg and this shard's share of targets
// (static and discovered). When a step fails, the steps before it go back
// to the previous running configuration, last first. Called with applyMu
// held.
func (d *Daemon) applyTargets(cfg *config.Config, targets []config.Target, steps []step) error {
	run := *cfg
	run.Targets = shard.Targets(targets, d.opts.ShardCount, d.opts.ShardIndex)
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
	static := map[string]bool{}
	for _, t := range cfg.Targets {
		static[t.Name] = true
	}
	var nStatic, nDiscovered int
	for _, t := range run.Targets {
		if static[t.Name] {
			nStatic++
		} else {
			nDiscovered++
		}
	}
	d.targets.WithLabelValues("static").Set(float64(nStatic))
	d.targets.WithLabelValues("discovered").Set(float64(nDiscovered))
	d.static = static
	d.running.Store(&run)
	return nil
}

// discovered applies a target list published by the discovery of r.
func (d *Daemon) discovered(r *discoveryRun, targets []config.Target) {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if r.gen != d.gen {
		return // a newer configuration file replaced r's
	}
	prev := d.running.Load()
	if prev != nil && slices.EqualFunc(prev.Targets, shard.Targets(targets, d.opts.ShardCount, d.opts.ShardIndex), sameTarget) {
		return
	}
	if err := d.applyTargets(r.cfg, targets, d.targetSteps()); err != nil {
		level.Error(d.logger).Log("msg", "Cannot apply discovered targets, keeping the previous ones", "err", d.scrub(err.Error()))
		return
	}
	run := d.running.Load()
	level.Info(d.logger).Log("msg", "Discovered targets applied", "targets", len(targets), "this_shard", len(run.Targets))
}

func sameTarget(a, b config.Target) bool { return reflect.DeepEqual(a, b) }

// startDiscovery starts the current configuration's discovery under ctx,
// Run's context; discoveries of later reloads start under it too.
func (d *Daemon) startDiscovery(ctx context.Context) {
	d.discMu.Lock()
	defer d.discMu.Unlock()
	d.runCtx = ctx
	if d.disc != nil {
		d.startLocked(d.disc)
	}
}

// stopDiscovery stops the running discovery and waits for it.
func (d *Daemon) stopDiscovery() {
	d.discMu.Lock()
	defer d.discMu.Unlock()
	d.runCtx = nil
	if d.disc != nil {
		d.disc.stop()
	}
}

// startLocked runs r until stop: its Manager, and a goroutine applying each
// list it publishes. Called with discMu held.
func (d *Daemon) startLocked(r *discoveryRun) {
	if r.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(d.runCtx)
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		runDone := make(chan struct{})
		go func() {
			defer close(runDone)
			r.m.Run(ctx)
		}()
		// Updates is closed when Run returns.
		for targets := range r.m.Updates() {
			d.discovered(r, targets)
		}
		<-runDone
	}()
}

// stop cancels r and waits until its goroutines have returned; a no-op for a
// discovery that never started.
func (r *discoveryRun) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}
