package prober

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/config"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/schedule"
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

	mu           sync.Mutex
	cfg          *config.Config
	metrics      *metrics
	targets      map[string]*target
	pairs        map[pairKey]*pair
	order        []*pair // the pairs sorted by target and module (AllStats)
	historyLimit int
	inFlight     int             // probes in flight across all pairs
	maxInFlight  int             // cfg.Global.MaxConcurrentProbes
	runCtx       context.Context // non-nil while Run runs
	wg           sync.WaitGroup
	now          func() time.Time
	registered   bool
	// specs are the compiled modules of cfg, by name (compile.go);
	// compilations counts Compile calls, for tests.
	specs        map[string]*probe.Spec
	compilations int
	// run sends the probes; tests wrap it to pin timings for golden output.
	run func(context.Context, *probe.Spec, *http.Client, probe.Call) probe.Result
	// clients shares one HTTP client between targets of equal configuration
	// (with the collector and discovery when the daemon hands the same Pool).
	clients *httpclient.Pool
	// red scrubs every text the prober keeps (results' errors and headers).
	red *redact.Redactor
	// offset places a pair in its interval; tests pin it.
	offset func(pairKey, time.Duration) time.Duration
	// load tells a probe the load it met over its lifetime (Options.Load).
	load func(target string, from, to time.Time) (load float64, ok bool)
	// sleeping is Options.Sleeping.
	sleeping func(target string) bool
	// urlProbes is the token pool of URL probes (urlprobe.go), apart from
	// every target's.
	urlProbes TokenPool
}

// pairKey names a pair; model is set on targets with models (models.go).
type pairKey struct{ target, module, model string }

// target is the state of one configured target. It survives Apply while the
// target's name stays.
type target struct {
	cfg      config.Target
	client   *http.Client
	secrets  []string // redact.ClientSecrets of cfg, read when client was built
	interval time.Duration
	timeout  time.Duration // for /health and /v1/models

	model              string   // configured, or the first id of /v1/models
	models             []string // with cfg.Models: the matching ids of /v1/models (models.go)
	checked            bool
	healthUp, modelsUp bool
	gen                *metrics // generation labels was initialised in
	labels             []string // target, model, static values of the health series

	pairs []*pair // its pairs, in configuration order

	// scheduled is the token budget of the scheduled probes, keyed by pair
	// model key; onDemand that of /probe (budget.go).
	scheduled, onDemand TokenPool

	cancel context.CancelFunc // of the check loop; nil when not running
}

// pair is one (target, module). It survives Apply while both names stay, and so
// do its schedule (when the interval is unchanged) and history.
type pair struct {
	key      pairKey
	tgt      *target
	interval time.Duration
	timeout  time.Duration
	stall    time.Duration

	inFlight       bool
	stopped        bool
	promptEstimate int     // observed usage.prompt_tokens + slack, else a heuristic
	lastEnd        float64 // Unix time the last recorded probe finished
	hist           history
	spec           *probe.Spec // the compiled module
	seq            uint64      // probes started: picks a module's next question
	state          pairState   // statistics that outlive the history (stats.go)
	records        recordState // record ids and the last hour's counts (pairstate.go)
	gen            *metrics
	labels         []string

	cancel context.CancelFunc // of the schedule loop; nil when not running
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
	Clients  *httpclient.Pool
	Redactor *redact.Redactor
	// HistoryLimit is how many recent results (and, on top, recent
	// failures) each pair keeps (default DefaultHistoryLimit).
	HistoryLimit int
	// Load tells a probe the load its target had over its lifetime [from,
	// to], as running + waiting + 1 (Result.Load); collector.Manager's
	// LoadDuring fits. Without one Result.Load is NaN.
	Load func(target string, from, to time.Time) (load float64, ok bool)
	// Sleeping tells whether a target's engine reports sleep (vLLM's sleep
	// mode); a probe that fails then fails with reason sleeping.
	// collector.Manager's Sleeping fits. Nil: never.
	Sleeping func(target string) bool
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
		historyLimit: limit,
		now:          time.Now,
		specs:        map[string]*probe.Spec{},
		run: func(ctx context.Context, s *probe.Spec, c *http.Client, call probe.Call) probe.Result {
			return s.Run(ctx, c, call)
		},
		offset:   scheduleOffset,
		red:      opts.Redactor,
		clients:  opts.Clients,
		load:     opts.Load,
		sleeping: opts.Sleeping,
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
		if err := m.reg.Register(generations{current: m.currentMetrics}); err != nil {
			return fmt.Errorf("registering probe metrics: %w", err)
		}
	}
	m.registered = true
	hist := histOpts{buckets: slices.Clone(cfg.Global.Buckets), tokenBuckets: slices.Clone(cfg.Global.TokenLatencyBuckets),
		nativeFactor: cfg.Global.NativeHistogramBucketFactor}
	if m.metrics == nil || !m.metrics.hist.equal(hist) {
		static := cfg.StaticLabelNames()
		if m.metrics != nil {
			static = m.metrics.static // the targets' until SetTargets
		}
		m.metrics = newMetrics(static, hist) // the old generation's series go with it
		m.relabelAll()
	}
	m.specs, m.compilations = specs, m.compilations+compiled
	m.maxInFlight = cfg.Global.MaxConcurrentProbes
	return nil
}

// SetTargets runs the targets of cfg, whose modules ApplyConfig compiled. It is safe before and while Run runs:
// unchanged pairs keep their schedule and history, removed pairs stop and lose
// their series, new pairs start. On error nothing changes.
func (m *Manager) SetTargets(cfg *config.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()

	// Build everything that can fail first. A target's credentials are read
	// (credential files included) when its client is built, not at every
	// discovery refresh that re-applies it unchanged.
	if m.metrics == nil {
		return errors.New("no configuration applied (ApplyConfig)")
	}
	for i := range cfg.Targets {
		for _, mod := range cfg.Targets[i].Modules {
			if m.specs[mod] == nil {
				return fmt.Errorf("target %q: module %q was not applied (ApplyConfig)", cfg.Targets[i].Name, mod)
			}
		}
	}
	clients := map[string]*http.Client{}
	secretsOf := make(map[string][]string, len(cfg.Targets))
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if old, ok := m.targets[t.Name]; ok && reflect.DeepEqual(old.cfg.HTTPClientConfig, t.HTTPClientConfig) {
			secretsOf[t.Name] = old.secrets
			continue
		}
		c, err := m.clients.Acquire(t.HTTPClientConfig)
		if err != nil {
			for _, c := range clients {
				m.clients.Release(c)
			}
			return fmt.Errorf("target %q: %w", t.Name, err)
		}
		clients[t.Name] = c
		secretsOf[t.Name] = redact.ClientSecrets(&t.HTTPClientConfig)
	}
	var secrets []string
	for i := range cfg.Targets {
		secrets = append(secrets, secretsOf[cfg.Targets[i].Name]...)
	}
	m.red.Set("prober", secrets)
	// The static label names are those of the targets' labels: discovered
	// targets may bring new ones.
	if static := cfg.StaticLabelNames(); !slices.Equal(m.metrics.static, static) {
		m.metrics = newMetrics(static, m.metrics.hist) // the old generation's series go with it
	}
	m.cfg = cfg

	// Targets.
	keepT := map[string]bool{}
	for i := range cfg.Targets {
		tc := cfg.Targets[i]
		keepT[tc.Name] = true
		interval := cfg.ProbeInterval(&tc)
		timeout := cfg.ProbeTimeout(&tc, &config.Module{})
		t, ok := m.targets[tc.Name]
		if !ok {
			t = &target{}
			m.targets[tc.Name] = t
		}
		restart := !ok || t.cfg.URL != tc.URL || t.interval != interval || t.cfg.Probe != tc.Probe || clients[tc.Name] != nil
		if c := clients[tc.Name]; c != nil {
			if t.client != nil {
				m.clients.Release(t.client)
			}
			t.client = c
		}
		if ok && (t.cfg.Model != tc.Model || t.cfg.URL != tc.URL || t.cfg.Models != tc.Models) {
			t.model, t.models = "", nil // re-resolve
		}
		t.cfg, t.interval, t.timeout, t.secrets = tc, interval, timeout, secretsOf[tc.Name]
		if tc.Model != "" {
			t.model = tc.Model
		}
		if !tc.Probe && t.checked {
			// Now scrape-only: its health series go (relabelTarget
			// recreates them only for checked targets).
			if t.gen == m.metrics && t.labels != nil {
				m.metrics.healthUp.DeleteLabelValues(t.labels...)
				m.metrics.modelsUp.DeleteLabelValues(t.labels...)
			}
			t.checked, t.healthUp, t.modelsUp = false, false, false
		}
		if restart {
			m.stopTarget(t)
			m.startTarget(t)
		}
	}
	for name, t := range m.targets {
		if !keepT[name] {
			m.stopTarget(t)
			if t.gen == m.metrics && t.labels != nil {
				m.metrics.healthUp.DeleteLabelValues(t.labels...)
				m.metrics.modelsUp.DeleteLabelValues(t.labels...)
			}
			m.clients.Release(t.client)
			delete(m.targets, name)
		}
	}

	// Pairs.
	keepP := map[pairKey]bool{}
	for i := range cfg.Targets {
		tc := &cfg.Targets[i]
		maps.Copy(keepP, m.applyTargetPairs(cfg, tc, m.targets[tc.Name]))
	}
	for key, p := range m.pairs {
		if !keepP[key] {
			m.removePair(p)
		}
	}
	m.sortPairs()
	m.relabelAll()
	return nil
}

// relabelAll (re)creates the series of every target and pair whose label
// values or metric generation changed. m.mu must be held.
func (m *Manager) relabelAll() {
	for _, t := range m.targets {
		m.relabelTarget(t)
	}
	for _, p := range m.pairs {
		m.relabelPair(p)
	}
}

func (m *Manager) currentMetrics() *metrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.metrics
}

// relabelTarget (re)creates the health series of t when its label values or the
// metric generation changed. m.mu must be held.
func (m *Manager) relabelTarget(t *target) {
	lv := append([]string{t.cfg.Name, t.model}, t.cfg.StaticLabelValues(m.metrics.static)...)
	if t.gen == m.metrics && slices.Equal(lv, t.labels) {
		return
	}
	if t.gen == m.metrics && t.labels != nil {
		m.metrics.healthUp.DeleteLabelValues(t.labels...)
		m.metrics.modelsUp.DeleteLabelValues(t.labels...)
	}
	t.gen, t.labels = m.metrics, lv
	if t.checked {
		m.metrics.healthUp.WithLabelValues(lv...).Set(b2f(t.healthUp))
		m.metrics.modelsUp.WithLabelValues(lv...).Set(b2f(t.modelsUp))
	}
}

// relabelPair (re)creates the series of p when its label values or the metric
// generation changed. m.mu must be held.
func (m *Manager) relabelPair(p *pair) {
	lv := append([]string{p.key.target, p.key.module, pairModel(p)}, p.tgt.cfg.StaticLabelValues(m.metrics.static)...)
	if p.gen == m.metrics && slices.Equal(lv, p.labels) {
		return
	}
	if p.gen == m.metrics && p.labels != nil {
		m.metrics.deletePair(p.labels)
	}
	p.gen, p.labels = m.metrics, lv
	m.metrics.initPair(lv)
	if p.spec.ChecksAnswers() {
		m.metrics.answers.init(lv)
	}
	// The "last probe" gauges describe state, not history: carry them over.
	if last, ok := p.hist.last(); ok {
		if last.Answer != probe.AnswerNotChecked {
			m.metrics.answers.correct.WithLabelValues(lv...).Set(b2f(last.Answer == probe.AnswerCorrect))
		}
		m.metrics.success.WithLabelValues(lv...).Set(b2f(last.Success))
		m.metrics.lastTimestamp.WithLabelValues(lv...).Set(p.lastEnd)
		m.metrics.duration.WithLabelValues(lv...).Set(last.Duration.Seconds())
		if !p.state.lastSuccess.IsZero() {
			m.metrics.lastSuccess.WithLabelValues(lv...).Set(unixSeconds(p.state.lastSuccess))
		}
		if last.Success {
			m.metrics.outputTPS.WithLabelValues(lv...).Set(last.OutputTokensPerSecond())
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Run probes until ctx is done and returns once every goroutine it started
// exited. Cancelling ctx cancels the probes in flight.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	m.runCtx = ctx
	for _, t := range m.targets {
		m.startTarget(t)
	}
	for _, p := range m.pairs {
		m.startPair(p)
	}
	m.mu.Unlock()

	<-ctx.Done()

	m.mu.Lock()
	m.runCtx = nil
	for _, t := range m.targets {
		m.stopTarget(t)
	}
	for _, p := range m.pairs {
		m.stopPair(p)
	}
	m.mu.Unlock()
	m.wg.Wait()

	m.mu.Lock()
	for _, t := range m.targets {
		t.client.CloseIdleConnections()
	}
	m.mu.Unlock()
}

// startTarget starts t's check loop if running. A scrape-only target
// (probe: false, modules: none) has none: the prober sends it no request at
// all, so a metrics-only endpoint without /health or /v1/models raises no
// VLLMEndpointDown; the collector's scrapes (vllm_server_up) tell whether it
// is up. m.mu must be held.
func (m *Manager) startTarget(t *target) {
	if m.runCtx == nil || t.cancel != nil || !t.cfg.Probe {
		return
	}
	ctx, cancel := context.WithCancel(m.runCtx)
	t.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.checkLoop(ctx, t)
	}()
}

func (m *Manager) stopTarget(t *target) {
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
}

// startPair starts p's schedule loop if running. m.mu must be held.
func (m *Manager) startPair(p *pair) {
	if m.runCtx == nil || p.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.runCtx)
	p.cancel = cancel
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
	if p.inFlight {
		m.metrics.skip(p.labels, SkipInFlight)
		return
	}
	cost := p.worstCost()
	if !p.tgt.scheduled.Allows(m.now(), p.tgt.cfg.TokenBudgetPerHour, budgetShare(p.tgt), p.key.model, cost) {
		m.metrics.skip(p.labels, SkipBudget)
		return
	}
	if m.inFlight >= m.maxInFlight {
		m.metrics.skip(p.labels, SkipConcurrency)
		return
	}
	p.inFlight = true
	m.inFlight++
	p.tgt.scheduled.Reserve(p.key.model, cost)
	s := m.snapshot(p)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		res := m.probe(ctx, s, func() {
			m.mu.Lock()
			if !p.stopped {
				m.metrics.attempts.WithLabelValues(p.labels...).Inc()
			}
			m.mu.Unlock()
		})
		m.mu.Lock()
		defer m.mu.Unlock()
		p.inFlight = false
		m.inFlight--
		m.settle(&p.tgt.scheduled, p.key.model, cost, s, res)
		if ctx.Err() != nil || p.stopped {
			return // cancelled by shutdown or reload: not a verdict on the target
		}
		m.record(p, res)
	}()
}

// record books a finished scheduled probe. m.mu must be held.
func (m *Manager) record(p *pair, res *probe.Result) {
	if res.PromptTokens > 0 {
		p.promptEstimate = res.PromptTokens + probe.PromptSlack
	}
	end := m.now()
	p.hist.add(p.records.note(res, end), res)
	p.state.record(res, end, p.hist.limit)
	p.lastEnd = unixSeconds(end)
	m.metrics.observe(p.labels, res, p.lastEnd)
	if !res.Success {
		level.Debug(m.logger).Log("msg", "Probe failed", "target", p.key.target, "module", p.key.module,
			"reason", res.Reason, "err", res.Err)
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
	red            *redact.Redactor
	promptEstimate int
	tgt            *target
}

// snapshot copies what the next probe of p needs, and moves p on to its next
// question. m.mu must be held.
func (m *Manager) snapshot(p *pair) probeSpec {
	defer func() { p.seq++ }()
	return probeSpec{
		target: p.key.target, module: p.key.module,
		url: p.tgt.cfg.URL, client: p.tgt.client, spec: p.spec, model: pairModel(p), seq: p.seq,
		timeout: p.timeout, stall: p.stall, red: m.red, promptEstimate: p.promptCost(), tgt: p.tgt,
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
		r := m.run(ctx, s.spec, s.client, probe.Call{BaseURL: s.url, Target: s.target, Model: s.model, StallTimeout: s.stall, Seq: s.seq, Redact: s.red})
		res = &r
	}
	end := m.now()
	res.Duration = end.Sub(begin)
	if res.Phase == probe.PhaseModels {
		res.E2E = res.Duration
	}
	res.Scrub(s.red)
	if !res.Success && m.sleeping != nil && m.sleeping(s.target) {
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
	m.warnHeldModels(s.target, ids)
	if res == nil && len(ids) == 0 {
		res = &probe.Result{Start: begin, Reason: probe.ReasonModelNotFound, Err: "/v1/models lists no model"}
	}
	if res != nil {
		res.Phase, res.Request = probe.PhaseModels, http.MethodGet+" /v1/models"
		return res
	}
	s.model = ids[0]
	m.mu.Lock()
	m.setModel(s.tgt, ids[0])
	m.mu.Unlock()
	return nil
}

// setModel records t's resolved model and relabels its series. m.mu must be held.
func (m *Manager) setModel(t *target, model string) {
	if t.cfg.Model != "" || t.model == model {
		return
	}
	t.model = model
	if m.metrics == nil {
		return
	}
	m.relabelTarget(t)
	for _, p := range m.pairs {
		if p.tgt == t {
			m.relabelPair(p)
		}
	}
}
