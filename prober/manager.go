package prober

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/safemetric"
	"github.com/vllm-prober/vllm_prober/internal/schedule"
	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Skip reasons: why a scheduled probe did not start (label reason of vllm_probe_skipped_total).
const (
	SkipBudget      = "budget"      // the target's token budget per hour would be exceeded
	SkipInFlight    = "in_flight"   // the previous probe of the pair is still running
	SkipConcurrency = "concurrency" // max_concurrent_probes probes are already running
)

// SkipReasons lists every skip reason.
func SkipReasons() []string { return []string{SkipBudget, SkipInFlight, SkipConcurrency} }

// Manager runs the probes of every (target, module) pair of a configuration:
// each pair on its own ticker with a stable offset, at most one probe in flight
// per pair, at most max_concurrent_probes in flight overall, and within each
// target's token budget per hour. Skipped probes are counted, never queued.
type Manager struct {
	reg    prometheus.Registerer
	logger log.Logger
	errs   safemetric.Sender

	mu sync.Mutex
	// epoch moves at every change of the configuration: every target's
	// series may render differently (ExpositionVersion).
	epoch        uint64
	cfg          *config.Config
	configured   bool     // ApplyConfig succeeded once
	hist         histOpts // the latency histograms' buckets
	static       []string // the static label names of cfg's targets
	descs        *descs   // the series' families under static (metrics.go)
	targets      map[string]*target
	pairs        map[pairKey]*pair
	order        []*pair // the pairs sorted by target and module (AllStats)
	historyLimit int
	recordPrefix string // Options.RecordPrefix
	inFlight     int    // probes in flight across all pairs
	// busy counts each target's probes in flight, whatever started them
	// (launch), for WaitIdle; a target with none has no entry.
	busy        map[string]*busyTarget
	maxInFlight int             // cfg.Global.MaxConcurrentProbes
	runCtx      context.Context // non-nil while Run runs
	wg          sync.WaitGroup
	now         func() time.Time
	registered  bool
	// specs are the compiled modules of cfg, by name (compile.go);
	// compilations counts Compile calls, for tests.
	specs        map[string]*probe.Spec
	compilations int
	// run sends the probes; tests wrap it to pin timings for golden output.
	run func(context.Context, *probe.Spec, *http.Client, probe.Call) probe.Result
	// clients shares one HTTP client between targets of equal configuration
	// (with the collector and discovery when the daemon hands the same Pool).
	clients ClientPool
	// red scrubs every text the prober keeps (results' errors and headers).
	red Redactor
	// offset places a pair in its interval; tests pin it.
	offset func(pairKey, time.Duration) time.Duration
	// load tells a probe the load it met over its lifetime (Options.Load).
	load func(target string, from, to time.Time) (load float64, ok bool)
	// sleeping is Options.Sleeping.
	sleeping func(target string) (sleeping, known bool)
	// recorded is Options.Recorded.
	recorded func(target, module string)
	// scrapeAnswered is Options.ScrapeAnswered.
	scrapeAnswered func(target string) (at time.Time, ok bool)
	// urlProbes is the token pool of URL probes (urlprobe.go), apart from
	// every target's.
	urlProbes TokenPool
	// gatewayRoles are the gateways of cfg and their members, each with
	// its member header (gateway.go).
	gatewayRoles map[string]string
	// finished is Options.Finished.
	finished func(Finished)
}

// Finished is a scheduled or burst probe as it is recorded
// (Options.Finished). Its pointers are valid during the call only.
type Finished struct {
	Target *config.Target
	Module string
	Prober string // the module's prober kind (config.Prober*)
	Model  string // the pair's model; Result.Model when the probe resolved one
	Result *probe.Result
}

// pairKey names a pair; model is set on targets with models (models.go).
type pairKey struct{ target, module, model string }

// pair is one (target, module). It survives Apply while both names stay, and so
// do its schedule (when the interval is unchanged) and history.
type pair struct {
	key      pairKey
	tgt      *target
	interval time.Duration
	timeout  time.Duration
	stall    time.Duration

	inFlight       bool
	burstHolds     bool          // a burst probe holds the in-flight slot
	scheduledNext  chan struct{} // closed when a burst probe hands the slot to the scheduled probe waiting for it
	stopped        bool
	promptEstimate int     // observed usage.prompt_tokens + slack, else a heuristic
	lastEnd        float64 // Unix time the last recorded probe finished
	hist           history
	spec           *probe.Spec // the compiled module
	seq            uint64      // probes started: picks a module's next question
	state          pairState   // statistics that outlive the history (stats.go)
	records        recordState // record ids and the last hour's counts (pairstate.go)
	series         *series     // what its vllm_probe_* series say (metrics.go)
	labels         *labelSet   // its series' label pairs, for Collect (metrics.go)
	// samples are kept for the gateway joins when the target is a gateway
	// or a member of one (gateway.go), else nil; memberHeader is a
	// gateway's member header.
	samples      *sampleRing
	memberHeader string

	cancel context.CancelFunc // of the schedule loop; nil when not running
	starts int                // times its schedule loop started (tests)
}

// Options configure a Manager.
type Options struct {
	// Registerer receives the probe metrics; nil: none.
	Registerer prometheus.Registerer
	Logger     log.Logger
	// Clients is the HTTP client pool of the probes, shared with the
	// collector and discovery: one client per distinct http_client_config.
	// Redactor scrubs every text the prober keeps (results' errors and
	// headers) and learns the tokens the clients obtain. Both required.
	Clients  ClientPool
	Redactor Redactor
	// HistoryLimit is how many recent results (and, on top, recent
	// failures) each pair keeps (default DefaultHistoryLimit).
	HistoryLimit int
	// Errors counts and logs the series that cannot be built (a label
	// twice, a value that is not valid UTF-8); nil leaves them out
	// silently. No series panics or empties the collection.
	Errors interface {
		Report(target string, err error)
	}
	// Load tells a probe the load its target had over its lifetime [from,
	// to], as running + waiting + 1 (Result.Load); collector.Manager's
	// LoadDuring fits. Without one Result.Load is NaN.
	Load func(target string, from, to time.Time) (load float64, ok bool)
	// RecordPrefix starts every record id of this replica (recordid.go):
	// "" for one replica, e.g. "s3" for shard 3 of a sharded fleet. It
	// must not contain "-".
	RecordPrefix string
	// Sleeping tells whether a target's engine reports sleep (vLLM's sleep
	// mode); a probe that fails then fails with reason sleeping.
	// collector.Manager's SleepState fits. Where it does not know (nil, or
	// known false: nothing scrapes the target's /metrics), a failed probe
	// of a target that is not a gateway asks the target's GET /is_sleeping.
	Sleeping func(target string) (sleeping, known bool)
	// ScrapeAnswered tells when the last scrape of a target's /metrics
	// started, ok only when it succeeded; collector.Manager's
	// ScrapeAnswered fits. A probed target whose /metrics answered within
	// two scrape intervals, and whose probes succeed, is up
	// (vllm_probe_health_up) without a GET /health; without one (nil, or
	// not ok) the target's /health is asked.
	ScrapeAnswered func(target string) (at time.Time, ok bool)
	// Finished, when set, is told of every probe the Manager records into
	// the vllm_probe_* series (scheduled and burst probes; not /probe's),
	// at the same moment: the OTLP push (internal/genaiotel) records from
	// there. It is called with the Manager's lock held: it must not block
	// nor call the Manager.
	Finished func(Finished)
	// Recorded is called after a scheduled or burst probe of (target,
	// module) was recorded, once the pair's statistics (Stats) hold it,
	// without the Manager's lock held and before the probe's goroutine
	// ends; compare.Collector's ProbeRecorded fits. nil: none.
	Recorded func(target, module string)
}

// NewManager returns a Manager of opts.
func NewManager(opts Options) *Manager {
	if opts.Clients == nil || opts.Redactor == nil {
		panic("prober: Options.Clients and Options.Redactor are required")
	}
	logger := opts.Logger
	if logger == nil {
		logger = log.NewNopLogger()
	}
	limit := opts.HistoryLimit
	if limit < 1 {
		limit = DefaultHistoryLimit
	}
	return &Manager{
		reg:          opts.Registerer,
		logger:       logger,
		targets:      map[string]*target{},
		pairs:        map[pairKey]*pair{},
		busy:         map[string]*busyTarget{},
		historyLimit: limit,
		recordPrefix: opts.RecordPrefix,
		now:          time.Now,
		specs:        map[string]*probe.Spec{},
		run: func(ctx context.Context, s *probe.Spec, c *http.Client, call probe.Call) probe.Result {
			return s.Run(ctx, c, call)
		},
		offset:   scheduleOffset,
		red:      opts.Redactor,
		errs:     safemetric.NewSender(opts.Errors),
		clients:  opts.Clients,
		load:     opts.Load,
		finished: opts.Finished,
		sleeping: opts.Sleeping,
		recorded: opts.Recorded,

		scrapeAnswered: opts.ScrapeAnswered,
	}
}

// Apply is ApplyConfig followed by SetTargets(cfg).
func (m *Manager) Apply(cfg *config.Config) error {
	if err := m.ApplyConfig(cfg); err != nil {
		return err
	}
	return m.SetTargets(cfg)
}

// ApplyConfig applies what a configuration file sets for every target: it
// compiles the modules that are new or changed (compile.go), and takes the
// histogram buckets and max_concurrent_probes. On
// error nothing changes. The targets' pairs take the new modules at the next
// SetTargets, which a caller of ApplyConfig calls next; a discovery refresh
// calls SetTargets alone.
func (m *Manager) ApplyConfig(cfg *config.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	specs, compiled, err := m.compileModules(cfg.Modules)
	if err != nil {
		return err
	}
	if !m.registered && m.reg != nil {
		if err := m.reg.Register(collector{m}); err != nil {
			return fmt.Errorf("registering probe metrics: %w", err)
		}
		if err := m.reg.Register(attemptsPart{m}); err != nil {
			return fmt.Errorf("registering probe attempt metrics: %w", err)
		}
	}
	m.registered, m.configured = true, true
	hist := histOptsOf(&cfg.Global)
	if !m.hist.equal(hist) {
		m.hist = hist
		for _, p := range m.pairs {
			p.series.rebucket(hist)
		}
		m.epoch++
	}
	m.specs, m.compilations = specs, m.compilations+compiled
	m.maxInFlight = cfg.Global.MaxConcurrentProbes
	return nil
}

// SetTargets runs the targets of cfg, whose modules ApplyConfig compiled. It is safe before and while Run runs:
// unchanged pairs keep their schedule and history, removed pairs stop and lose
// their series, new pairs start. On error nothing changes.
//
// It is a diff, as Prometheus' scrape pool sync: a target new in cfg is
// created and started, one that stays is synced (its check loop restarts
// only when its URL, interval, probe switch or client changed), one gone
// is stopped; each target's pairs then follow its modules.
func (m *Manager) SetTargets(cfg *config.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkTargets(cfg); err != nil {
		return err
	}
	clients, secrets, err := m.acquireClients(cfg)
	if err != nil {
		return err
	}
	// Discovered targets may bring new static label names.
	if static := cfg.StaticLabelNames(); m.descs == nil || !slices.Equal(m.static, static) {
		m.static, m.descs = static, newDescs(static)
	}
	m.cfg = cfg
	m.gatewayRoles = gatewayRoles(cfg)
	keep := make(map[string]bool, len(cfg.Targets))
	for i := range cfg.Targets {
		tc := &cfg.Targets[i]
		keep[tc.Name] = true
		t, ok := m.targets[tc.Name]
		if !ok {
			t = &target{host: host{m}}
			m.targets[tc.Name] = t
		}
		if t.sync(cfg, tc, clients[tc.Name], secrets[tc.Name]) || !ok {
			t.stop()
			t.start()
		}
		m.syncPairs(t)
	}
	for name, t := range m.targets {
		if !keep[name] {
			m.removeTarget(t)
		}
	}
	m.sortPairs()
	m.epoch++ // labels, pairs and targets may have changed
	return nil
}

// checkTargets refuses cfg's targets before anything changes: every module
// they name must have been compiled (ApplyConfig). m.mu must be held.
func (m *Manager) checkTargets(cfg *config.Config) error {
	if !m.configured {
		return errors.New("no configuration applied (ApplyConfig)")
	}
	for i := range cfg.Targets {
		for _, mod := range cfg.Targets[i].Modules {
			if m.specs[mod] == nil {
				return fmt.Errorf("target %q: module %q was not applied (ApplyConfig)", cfg.Targets[i].Name, mod)
			}
		}
	}
	return nil
}

// removeTarget stops t and its pairs, whose series go, and releases its
// client. m.mu must be held.
func (m *Manager) removeTarget(t *target) {
	t.stop()
	for _, p := range t.pairs {
		m.removePair(p)
	}
	t.pairs = nil
	m.clients.Release(t.client)
	delete(m.targets, t.cfg.Name)
}

// acquireClients builds the clients of cfg's targets whose
// http_client_config is new or changed, and sets the secrets of every
// target in the scrubber. A target's credentials are read (credential files
// included) when its client is built, not at every discovery refresh that
// re-applies it unchanged. On error it releases what it acquired. m.mu must
// be held.
func (m *Manager) acquireClients(cfg *config.Config) (clients map[string]*http.Client, secrets map[string][]string, err error) {
	clients = map[string]*http.Client{}
	secrets = make(map[string][]string, len(cfg.Targets))
	var all []string
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if old, ok := m.targets[t.Name]; ok && reflect.DeepEqual(old.cfg.HTTPClientConfig, t.HTTPClientConfig) {
			secrets[t.Name] = old.secrets
		} else {
			c, err := m.clients.Acquire(t.HTTPClientConfig)
			if err != nil {
				for _, c := range clients {
					m.clients.Release(c)
				}
				return nil, nil, fmt.Errorf("target %q: %w", t.Name, err)
			}
			clients[t.Name] = c
			secrets[t.Name] = redact.ClientSecrets(&t.HTTPClientConfig)
		}
		all = append(all, secrets[t.Name]...)
	}
	m.red.Set("prober", all)
	return clients, secrets, nil
}

// setRunning starts every target's and pair's loop under ctx, or stops
// them once ctx is done.
func (m *Manager) setRunning(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	running := ctx.Err() == nil
	m.runCtx = nil
	if running {
		m.runCtx = ctx
	}
	for _, t := range m.targets {
		t.stop()
		if running {
			t.start()
		}
	}
	for _, p := range m.pairs {
		m.stopPair(p)
		if running {
			m.startPair(p)
		}
	}
}

// Run probes until ctx is done and returns once every goroutine it started
// exited. Cancelling ctx cancels the probes in flight.
func (m *Manager) Run(ctx context.Context) {
	m.setRunning(ctx)
	<-ctx.Done()
	m.setRunning(ctx)
	m.wg.Wait()

	m.mu.Lock()
	for _, t := range m.targets {
		t.client.CloseIdleConnections()
	}
	m.mu.Unlock()
}

// startPair starts p's schedule loop if running. m.mu must be held.
func (m *Manager) startPair(p *pair) {
	if m.runCtx == nil || p.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.runCtx)
	p.cancel = cancel
	p.starts++
	interval := p.interval
	offset := m.offset(p.key, interval)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.pairLoop(ctx, p, interval, offset)
	}()
}

func (m *Manager) stopPair(p *pair) {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}

// scheduleOffset spreads the pairs over the interval, stably across restarts and
// reloads, so that they do not all fire at once.
func scheduleOffset(k pairKey, interval time.Duration) time.Duration {
	return schedule.Phase(interval, k.target, k.module, k.model)
}

func (m *Manager) pairLoop(ctx context.Context, p *pair, interval, offset time.Duration) {
	schedule.Run(ctx, interval, offset, false, func(ctx context.Context) { m.tick(ctx, p) })
}

// tick starts one scheduled probe of p unless a limit says skip.
func (m *Manager) tick(ctx context.Context, p *pair) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.stopped || ctx.Err() != nil {
		return
	}
	if p.inFlight && (!p.burstHolds || p.scheduledNext != nil) {
		p.skip(SkipInFlight, unixSeconds(m.now()))
		return
	}
	cost := p.worstCost()
	if !p.tgt.scheduled.Allows(m.now(), p.tgt.cfg.TokenBudgetPerHour, budgetShare(p.tgt), p.key.model, cost) {
		p.skip(SkipBudget, unixSeconds(m.now()))
		return
	}
	if m.inFlight >= m.maxInFlight {
		p.skip(SkipConcurrency, unixSeconds(m.now()))
		return
	}
	// A burst probe in the pair's slot hands it to this probe when it ends
	// (burstProbe): the scheduled probe takes precedence, a burst never
	// makes it skip.
	var slot chan struct{}
	if p.inFlight {
		slot = make(chan struct{})
		p.scheduledNext = slot
	}
	p.inFlight = true
	m.inFlight++
	p.tgt.scheduled.Reserve(p.key.model, cost)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		recorded := false
		defer func() { // after the unlock below
			if recorded {
				m.notifyRecorded(p)
			}
		}()
		m.mu.Lock()
		defer m.mu.Unlock()
		if slot != nil {
			m.mu.Unlock()
			select {
			case <-slot:
			case <-ctx.Done():
			}
			m.mu.Lock()
			if p.scheduledNext == slot { // never handed over: shutdown or reload
				p.scheduledNext = nil
				m.inFlight--
				p.tgt.scheduled.Reserve(p.key.model, -cost)
				return
			}
		}
		_, res := m.launch(ctx, p, &p.tgt.scheduled, p.key.model, cost, m.attempt(p))
		p.inFlight = false
		m.inFlight--
		if ctx.Err() != nil || p.stopped {
			return // cancelled by shutdown or reload: not a verdict on the target
		}
		m.record(p, res)
		recorded = true
	}()
}

// launch runs one probe of p, whatever started it: the schedule (tick),
// /probe (ProbeModelNow), a URL probe (ProbeURLNow) or a burst
// (burstProbe). The caller holds m.mu and has admitted the probe, reserving
// its worst-case cost under key in pool (nil: none). launch snapshots p,
// releases the lock while the probe runs, and takes it again to settle pool;
// it returns with m.mu held. started is called (without the lock) once the
// probe counts as an attempt.
func (m *Manager) launch(ctx context.Context, p *pair, pool *TokenPool, key string, cost int, started func()) (probeSpec, *probe.Result) {
	s := m.snapshot(p)
	b := m.busy[s.target]
	if b == nil {
		b = &busyTarget{idle: make(chan struct{})}
		m.busy[s.target] = b
	}
	b.n++
	m.mu.Unlock()
	res := m.probe(ctx, s, started)
	m.mu.Lock()
	if b.n--; b.n == 0 {
		close(b.idle)
		delete(m.busy, s.target)
	}
	if pool != nil {
		m.settle(pool, key, cost, s, res)
	}
	return s, res
}

// busyTarget is one target's probes in flight: idle is closed when the
// last one ends.
type busyTarget struct {
	n    int
	idle chan struct{}
}

// WaitIdle returns once no probe of target is in flight, or when ctx ends.
// The collector waits for it before it scrapes the target, so that the
// requests it reads running are not the prober's own.
func (m *Manager) WaitIdle(ctx context.Context, target string) {
	m.mu.Lock()
	b := m.busy[target]
	m.mu.Unlock()
	if b == nil {
		return
	}
	select {
	case <-b.idle:
	case <-ctx.Done():
	}
}

// attempt counts a probe of p that started. Only the attempt counts'
// part of the target moves (attemptsPart): the rest of its series change
// when the probe ends, a few seconds later, and were encoded again twice
// a probe when the start moved them too.
func (m *Manager) attempt(p *pair) func() {
	return func() {
		m.mu.Lock()
		p.series.attempts++
		if p.tgt != nil {
			p.tgt.started++
		}
		m.mu.Unlock()
	}
}

// record books a finished scheduled probe. m.mu must be held.
func (m *Manager) record(p *pair, res *probe.Result) {
	if res.PromptTokens > 0 {
		p.promptEstimate = res.PromptTokens + probe.PromptSlack
	}
	end := m.now()
	id := p.records.note(res, end)
	p.hist.add(id, res)
	p.state.record(res, end, p.hist.limit)
	p.keepSample(res)
	p.lastEnd = unixSeconds(end)
	p.series.observe(res, p.lastEnd, m.recordID(p, id))
	p.touch()
	if m.finished != nil && p.tgt != nil && p.spec != nil {
		model := p.key.model
		if model == "" {
			model = p.tgt.model
		}
		m.finished(Finished{Target: &p.tgt.cfg, Module: p.key.module, Prober: p.spec.Module().Prober, Model: model, Result: res})
	}
	if res.Reason == probe.ReasonModelNotFound && p.tgt != nil {
		p.tgt.modelsRefused()
	}
	if !res.Success {
		level.Debug(m.logger).Log("msg", "Probe failed", "target", p.key.target, "module", p.key.module,
			"reason", res.Reason, "err", res.Err)
	}
}

// notifyRecorded calls Options.Recorded for p. m.mu must not be held.
func (m *Manager) notifyRecorded(p *pair) {
	if m.recorded != nil {
		m.recorded(p.key.target, p.key.module)
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// probeSpec is everything one probe needs, copied under the lock.
type probeSpec struct {
	target, module string
	url            string
	client         *http.Client
	spec           *probe.Spec
	model          string
	seq            uint64
	timeout, stall time.Duration
	red            Redactor
	promptEstimate int
	tgt            *target
	gateway        bool // the target is a gateway (config.Target.Gateway)
}

// sleepCheckTimeout bounds the GET /is_sleeping a failed probe asks when
// nothing else tells whether the engine sleeps.
const sleepCheckTimeout = 2 * time.Second

// engineSleeps tells whether the engine of the target a probe failed on
// with reason sleeps: from the collector's last scrape where it knows,
// else, when the target answered the probe with an HTTP error, from its own
// GET /is_sleeping (vLLM serves it in dev mode; an error, a 404 included,
// reads as awake). A target that did not answer (a timeout, a refused
// connection) is not asked again, nor a gateway, whose answer would be one
// backend's. ctx is the probe's own: the check stays within the probe's
// deadline (and sleepCheckTimeout), so that it never holds the pair past
// the probe's timeout, where the next probe would skip as in flight; a probe
// whose deadline is spent reads as awake.
func (m *Manager) engineSleeps(ctx context.Context, s probeSpec, reason probe.Reason) bool {
	if m.sleeping != nil {
		if sleeping, known := m.sleeping(s.target); known {
			return sleeping
		}
	}
	if reason != probe.ReasonHTTP5xx && reason != probe.ReasonHTTP4xx {
		return false
	}
	if s.tgt == nil || s.gateway || s.client == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, sleepCheckTimeout)
	defer cancel()
	sleeping, err := vllmapi.IsSleeping(ctx, s.client, s.url)
	return err == nil && sleeping
}

// snapshot copies what the next probe of p needs, and moves p on to its next
// question. m.mu must be held.
func (m *Manager) snapshot(p *pair) probeSpec {
	defer func() { p.seq++ }()
	return probeSpec{
		target: p.key.target, module: p.key.module,
		url: p.tgt.cfg.URL, client: p.tgt.client, spec: p.spec, model: pairModel(p), seq: p.seq,
		timeout: p.timeout, stall: p.stall, red: m.red, promptEstimate: p.promptCost(), tgt: p.tgt,
		gateway: p.tgt.cfg.Gateway != nil,
	}
}

// probe runs one probe: resolves the model if needed, runs the module's
// spec, scrubs the result and attributes it the load it met. started is
// called once the probe counts as an attempt (after model resolution, so
// that the attempt carries the resolved model label).
func (m *Manager) probe(ctx context.Context, s probeSpec, started func()) *probe.Result {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	begin := m.now() // the manager's clock, which tests pin
	res := m.resolveModel(ctx, &s, begin)
	started()
	if res == nil {
		r := m.run(ctx, s.spec, s.client, probe.Call{BaseURL: s.url, Target: s.target, Model: s.model, StallTimeout: s.stall, Seq: s.seq, Redact: s.red, Gateway: s.gateway})
		res = &r
	}
	end := m.now()
	res.Duration = end.Sub(begin)
	if res.Phase == probe.PhaseModels {
		res.E2E = res.Duration
	}
	res.Scrub(s.red)
	if !res.Success && m.engineSleeps(ctx, s, res.Reason) {
		res.Reason = probe.ReasonSleeping
	}
	res.Load = math.NaN()
	if m.load != nil {
		if l, ok := m.load(s.target, begin, end); ok {
			res.Load = l
		}
	}
	return res
}

// resolveModel sets s.model to the first model the target lists when the
// pair names none. It returns the failed probe when the listing failed.
func (m *Manager) resolveModel(ctx context.Context, s *probeSpec, begin time.Time) *probe.Result {
	if s.model != "" {
		return nil
	}
	ids, res := probe.ListModels(ctx, s.client, s.url, s.red)
	warnHeldModels(m.logger, s.target, ids)
	if res == nil && len(ids) == 0 {
		res = &probe.Result{Start: begin, Reason: probe.ReasonModelNotFound, Err: "/v1/models lists no model"}
	}
	if res != nil {
		res.Phase, res.Request = probe.PhaseModels, http.MethodGet+" /v1/models"
		return res
	}
	s.model = ids[0]
	m.mu.Lock()
	s.tgt.resolved(ids[0])
	m.mu.Unlock()
	return nil
}
