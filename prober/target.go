package prober

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/schedule"
	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// target is one configured target, in the manner of a Prometheus scrape
// pool: SetTargets creates it, syncs it with each configuration, starts and
// stops it. It owns its client, its /health and /v1/models loop and its
// resolved model, and reaches its pairs only through its host. It survives
// SetTargets while the target's name stays.
type target struct {
	host targetHost

	cfg      config.Target
	client   *http.Client
	secrets  []string // redact.ClientSecrets of cfg, read when client was built
	interval time.Duration
	timeout  time.Duration // for /health and /v1/models

	model              string   // configured, or the first id of /v1/models
	models             []string // with cfg.Models: the matching ids of /v1/models (models.go)
	checked            bool
	healthUp, modelsUp bool
	// version moves whenever a series of the target or of its pairs would
	// render differently (ExpositionVersion), but for the probes' attempt
	// counts, whose part moves with started as well (attemptsPart); m.mu
	// guards both.
	version, started uint64

	// modelsRefresh is how often the check reads /v1/models again
	// (global.models_refresh_interval); modelsAt when it last did (zero:
	// never, or re-resolve); modelsStale asks the next check to read it
	// whatever modelsAt says: a probe's model was refused.
	modelsRefresh time.Duration
	modelsAt      time.Time
	modelsStale   bool
	// scrapeInterval is the collector's for t: a scrape that answered
	// within two of them stands for /health (check).
	scrapeInterval time.Duration

	pairs []*pair // its pairs, in configuration order

	// scheduled is the token budget of the scheduled probes, keyed by pair
	// model key; onDemand that of /probe (budget.go).
	scheduled, onDemand TokenPool

	cancel context.CancelFunc // of the check loop; nil when not running
	starts int                // times its check loop started (tests)
}

// targetHost is what a target reaches of its Manager: the lock they share,
// the goroutines it runs, what it logs and scrubs with, and its pairs.
type targetHost interface {
	sync.Locker
	// spawn runs f in a goroutine the Manager waits for; ok is false when
	// the Manager is not running.
	spawn(f func(ctx context.Context)) (cancel context.CancelFunc, ok bool)
	logger() log.Logger
	redactor() Redactor
	// release hands a client the target no longer uses back to the pool.
	release(c *http.Client)
	phase(target string, interval time.Duration) time.Duration
	// modelsChanged rebuilds t's pairs after its listed models changed;
	// the lock must be held.
	modelsChanged(t *target)
	now() time.Time
	// scrapeAnswered tells when the collector's last scrape of target's
	// /metrics started, ok only when it succeeded (Options.ScrapeAnswered).
	scrapeAnswered(target string) (at time.Time, ok bool)
}

// sync takes t's configuration tc under cfg, and client when its
// http_client_config changed (nil: keep the client; the one it replaces
// goes back to the pool). It reports whether its check loop must restart.
// The lock must be held.
func (t *target) sync(cfg *config.Config, tc *config.Target, client *http.Client, secrets []string) (restart bool) {
	interval := cfg.ProbeInterval(tc)
	restart = t.cfg.URL != tc.URL || t.interval != interval || t.cfg.Probe != tc.Probe || client != nil
	if t.cfg.Model != tc.Model || t.cfg.URL != tc.URL || t.cfg.Models != tc.Models {
		t.model, t.models, t.modelsAt = "", nil, time.Time{} // re-resolve
	}
	if client != nil {
		if t.client != nil {
			t.host.release(t.client)
		}
		t.client = client
	}
	t.cfg, t.interval, t.timeout, t.secrets = *tc, interval, cfg.ProbeTimeout(tc, &config.Module{}), secrets
	t.modelsRefresh, t.scrapeInterval = time.Duration(cfg.Global.ModelsRefresh), cfg.ScrapeInterval(tc)
	if tc.Model != "" {
		t.model = tc.Model
	}
	if !tc.Probe {
		// Now scrape-only: its health series go (Collect renders them
		// only for checked targets).
		t.checked, t.healthUp, t.modelsUp = false, false, false
	}
	return restart
}

// start starts t's check loop when its Manager runs. A scrape-only target
// (probe: false, modules: none) has none: the prober sends it no request at
// all, so a metrics-only endpoint without /health or /v1/models raises no
// VLLMEndpointDown; the collector's scrapes (vllm_server_up) tell whether
// it is up. The lock must be held.
func (t *target) start() {
	if t.cancel != nil || !t.cfg.Probe {
		return
	}
	interval, offset := t.interval, t.host.phase(t.cfg.Name, t.interval)
	if offset <= 0 {
		offset = interval
	}
	if cancel, ok := t.host.spawn(func(ctx context.Context) {
		// After the first check the loop moves to a stable phase of its
		// own in the interval (the second check comes at most an interval
		// after the first), so that the checks of many targets started
		// together do not all fire at once: in phase, 1,000 targets opened
		// up to 1,000 connections every interval.
		schedule.Run(ctx, interval, offset, true, t.check)
	}); ok {
		t.cancel = cancel
		t.starts++
	}
}

// stop stops t's check loop. The lock must be held.
func (t *target) stop() {
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
}

// resolved records the model t's /v1/models listed first, the one its
// pairs probe when it configures none. The lock must be held.
func (t *target) resolved(model string) {
	if t.cfg.Model == "" {
		t.model = model
	}
}

// modelsRefused asks t's next check to read /v1/models again: a probe's
// model was refused. The lock must be held.
func (t *target) modelsRefused() { t.modelsStale = true }

// check runs one check of t, whether it is up, and one /v1/models read when
// it is due (models_refresh_interval, or a probe's model was refused), and
// records them. Up is its /metrics answering recently when the collector
// scrapes it and its probes succeed: GET /health (its health_path) only for
// a target that is not scraped (scrape_metrics: false, a probe-only
// vantage), whose last scrape did not answer, or whose last probe failed
// (vLLM's API server serves /metrics while /health says its engine is dead;
// a hung engine answers /health: VLLMEndpointDown and VLLMEngineHung read
// /health then). A healthy scraped target costs no request here between two
// model listings (docs/performance.md).
func (t *target) check(ctx context.Context) {
	t.host.Lock()
	client, base, healthPath, timeout, name, red := t.client, t.cfg.URL, t.cfg.HealthCheckPath(), t.timeout, t.cfg.Name, t.host.redactor()
	begin := t.host.now()
	list := t.modelsAt.IsZero() || t.modelsStale || begin.Sub(t.modelsAt) >= t.modelsRefresh
	scraped := t.cfg.ScrapeMetrics && t.scrapedRecently(begin) && !t.probesFailing()
	t.host.Unlock()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	healthUp := scraped || vllmapi.Health(ctx, client, base, healthPath) == nil
	var (
		ids  []string
		fail *probe.Result
	)
	if list {
		ids, fail = probe.ListModels(ctx, client, base, red)
		warnHeldModels(t.host.logger(), name, ids)
		if fail != nil {
			fail.Scrub(red)
		}
	}
	if ctx.Err() != nil && context.Cause(ctx) == context.Canceled {
		return // shutting down or reconfigured
	}

	t.host.Lock()
	defer t.host.Unlock()
	if t.cancel == nil || !t.cfg.Probe {
		return // removed, or made scrape-only meanwhile
	}
	// Only what renders differently moves the target's version (a new
	// list of models moves it in syncPairs): a check that finds what the
	// last one found, most of them, has the exposition cache encode
	// nothing again.
	was := t.checkState()
	defer func() {
		if t.checkState() != was {
			t.version++
		}
	}()
	if !list {
		t.checked, t.healthUp = true, healthUp
		return
	}
	t.modelsStale = false
	modelsUp := false
	if fail == nil {
		if t.cfg.Models != "" {
			modelsUp = t.listed(ids)
		} else if t.cfg.Model != "" {
			modelsUp = slices.ContainsFunc(ids, func(id string) bool { return sameModel(id, t.cfg.Model) })
		} else if len(ids) > 0 {
			modelsUp = true
			t.resolved(ids[0])
		}
	} else {
		level.Debug(t.host.logger()).Log("msg", "Listing models failed", "target", name, "reason", fail.Reason, "err", fail.Err)
	}
	t.checked, t.healthUp, t.modelsUp = true, healthUp, modelsUp
	// A list that failed, or lacks the model, is read again at the next
	// check, as before: only a good one lasts models_refresh_interval.
	t.modelsAt = time.Time{}
	if modelsUp {
		t.modelsAt = begin
	}
}

// checkState is what a check finds that t's series render: its health
// and models series, and the model they and the pairs name.
type checkState struct {
	checked, healthUp, modelsUp bool
	model                       string
}

// checkState returns t's. The lock must be held.
func (t *target) checkState() checkState {
	return checkState{t.checked, t.healthUp, t.modelsUp, t.model}
}

// scrapedRecently reports whether the collector's last scrape of t
// answered, no longer than two scrape intervals before now. The lock must
// be held.
func (t *target) scrapedRecently(now time.Time) bool {
	at, ok := t.host.scrapeAnswered(t.cfg.Name)
	return ok && now.Sub(at) <= 2*t.scrapeInterval
}

// probesFailing reports whether the last probe of any of t's pairs failed.
// The lock must be held.
func (t *target) probesFailing() bool {
	for _, p := range t.pairs {
		if !p.state.failingSince.IsZero() {
			return true
		}
	}
	return false
}

// warnHeldModels warns when a model id target lists held a secret: ListModels
// made it redact.Placeholder, and the warning names the target and the
// field, never the value.
func warnHeldModels(logger log.Logger, target string, ids []string) {
	if slices.Contains(ids, redact.Placeholder) {
		level.Warn(logger).Log("msg", "A model id the target lists holds a configured secret: it is shown as "+redact.Placeholder,
			"target", target, "field", "/v1/models id")
	}
}

// host is the Manager as its targets see it.
type host struct{ m *Manager }

func (h host) Lock()   { h.m.mu.Lock() }
func (h host) Unlock() { h.m.mu.Unlock() }

func (h host) spawn(f func(ctx context.Context)) (context.CancelFunc, bool) {
	if h.m.runCtx == nil {
		return nil, false
	}
	ctx, cancel := context.WithCancel(h.m.runCtx)
	h.m.wg.Add(1)
	go func() {
		defer h.m.wg.Done()
		f(ctx)
	}()
	return cancel, true
}

func (h host) logger() log.Logger     { return h.m.logger }
func (h host) redactor() Redactor     { return h.m.red }
func (h host) release(c *http.Client) { h.m.clients.Release(c) }
func (h host) phase(target string, interval time.Duration) time.Duration {
	return h.m.offset(pairKey{target: target}, interval)
}
func (h host) now() time.Time { return h.m.now() }
func (h host) scrapeAnswered(target string) (time.Time, bool) {
	if h.m.scrapeAnswered == nil {
		return time.Time{}, false
	}
	return h.m.scrapeAnswered(target)
}
func (h host) modelsChanged(t *target) {
	h.m.warnBudgetShare(t)
	h.m.syncPairs(t)
	h.m.sortPairs()
}
