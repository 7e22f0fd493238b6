package collector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/safemetric"
	"github.com/vllm-prober/vllm_prober/internal/schedule"
	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
)

// infoRetry is how long after a failed /version (/props) or /v1/models read the
// collector tries again; a successful read is repeated only when the server
// looks new or restarted.
const infoRetry = 30 * time.Second

// maxSnapshots bounds each target's ring of snapshots whatever the window.
const maxSnapshots = 4096

// Manager runs one scrape loop per target (where scrape_metrics is on) and
// exports the derived series. It is an unchecked prometheus.Collector: the
// static label names change with the configuration.
type Manager struct {
	logger  log.Logger
	clients ClientPool // shared between targets of equal HTTP client config (and with the prober)
	red     Scrubber
	errs    safemetric.Sender
	dropped *prometheus.CounterVec // values left out by the bounds (bounds.go)
	quiet   func(ctx context.Context, target string)
	scraped func(target string) // Options.Scraped
	labels  *labelCache         // the series' labels every scrape decoded (labelcache.go)

	mu      sync.Mutex
	targets map[string]*scraper // by target name
	// byName is targets as SetTargets last left it, read without mu
	// (target): the scrape hook (Options.Scraped) reads the Manager while
	// SetTargets, holding mu, may wait for that scrape's loop to end.
	byName     atomic.Pointer[map[string]*scraper]
	labelNames []string // static label names
	descs      *descs   // of labelNames
	// epoch moves at every SetTargets: every target's series may render
	// differently (ExpositionVersion).
	epoch  atomic.Uint64
	window time.Duration
	runCtx context.Context // set while Run runs
	wg     sync.WaitGroup  // scrape loops
}

// Options configure a Manager.
type Options struct {
	// Registerer receives the Manager (an unchecked collector); nil: none.
	Registerer prometheus.Registerer
	Logger     log.Logger
	// Clients is the HTTP client pool the scrapes take their clients from,
	// shared with the prober and discovery: one connection pool per
	// distinct http_client_config. Required.
	Clients ClientPool
	// Redactor scrubs the texts and label values the targets send of the
	// configured secrets; nil scrubs nothing.
	Redactor Scrubber
	// Errors counts and logs the series that cannot be built (a target
	// label colliding with a series' own, a label value that is not valid
	// UTF-8); nil leaves them out silently. No series panics the collection.
	Errors interface {
		Report(target string, err error)
	}
	// DroppedValues counts the label values a target sent past the bounds
	// (bounds.go); nil: NewDroppedValues, unregistered.
	DroppedValues *prometheus.CounterVec
	// Quiet, when set, returns once vllm_prober has no probe of the target
	// in flight, or when ctx ends (the prober's Manager.WaitIdle). A scrape
	// waits for it, up to half its interval, so that the running and
	// waiting requests it reads are not vllm_prober's own probe (see
	// scraper.waitQuiet). nil: scrapes never wait.
	Quiet func(ctx context.Context, target string)
	// Scraped, when set, is called after each scrape of a target ended,
	// successful or not (not one cut short by shutdown or a reload), once
	// Load, View and the rates hold it, without the Manager's locks held
	// and before the scrape's goroutine ends; compare.Collector's Scraped
	// fits.
	Scraped func(target string)
}

// ClientPool lends the HTTP client of an http_client_config: targets of
// equal configurations share one client, and the last Release of a client
// closes its idle connections. vllm_prober's pool, shared with the prober,
// is one.
type ClientPool interface {
	Acquire(cfg commoncfg.HTTPClientConfig) (*http.Client, error)
	Release(client *http.Client)
}

// Scrubber removes configured secrets from what a target sends.
// vllm_prober's redactor is one.
type Scrubber interface {
	// String returns s without its secrets.
	String(s string) string
	// Label returns s, or a placeholder when s held a secret (held true).
	Label(s string) (v string, held bool)
	// MaxLen is the length of the longest secret, in bytes; 0 for none.
	MaxLen() int
}

// NewManager returns a Manager of opts, registered with opts.Registerer.
// The collector reads its own source only: vLLM's /metrics, /v1/models and
// /version. The series that join it with the probes and the baselines (the
// TTFT gap, the headroom) are the compare package's.
func NewManager(opts Options) *Manager {
	if opts.Clients == nil {
		panic("collector: Options.Clients is required")
	}
	logger := opts.Logger
	if logger == nil {
		logger = log.NewNopLogger()
	}
	m := &Manager{
		logger:  logger,
		targets: map[string]*scraper{},
		window:  time.Duration(config.DefaultGlobal.RateWindow),
		clients: opts.Clients,
		red:     opts.Redactor,
		errs:    safemetric.NewSender(opts.Errors),
		dropped: opts.DroppedValues,
		quiet:   opts.Quiet,
		scraped: opts.Scraped,
		labels:  newLabelCache(),
	}
	if m.dropped == nil {
		m.dropped = NewDroppedValues()
	}
	if m.red == nil {
		m.red = (*redact.Redactor)(nil) // a nil Redactor scrubs nothing
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(m)
	}
	return m
}

// scraper is one target's loop and state.
type scraper struct {
	// version moves after every scrape (ExpositionVersion).
	version    atomic.Uint64
	name       string
	metricsURL string
	baseURL    string
	engine     string // the target's engine key: the profile forced, "" to detect
	gateway    bool   // a gateway target: its /metrics is read with the gateway profiles (gateway.go)
	clientCfg  commoncfg.HTTPClientConfig
	client     *http.Client
	interval   time.Duration
	timeout    time.Duration
	logger     log.Logger
	red        Scrubber                                 // scrubs the label values the target sends (scrub.go)
	labels     *labelCache                              // shared by the Manager's scrapers
	dropped    *prometheus.CounterVec                   // Options.DroppedValues
	quiet      func(ctx context.Context, target string) // Options.Quiet
	scraped    func(target string)                      // Options.Scraped
	now        func() time.Time                         // when set (tests), overrides snapshot timestamps

	cancel context.CancelFunc // nil while not running
	done   chan struct{}

	mu          sync.Mutex
	labelValues []string
	maxNumSeqs  int
	peakFLOPS   float64 // the target's peak_flops_per_gpu
	window      time.Duration
	attempted   bool
	up          bool
	duration    float64
	last        ScrapeState
	ring        []*Snapshot // oldest first
	derived     map[string]*Derived
	// ttftQueue holds, per model, whether the server's TTFT counts the
	// queue time, once a window told (ttftQueueEvidence); forgotten when
	// the server restarts.
	ttftQueue map[string]bool
	info      ServerInfo
	infoOK    bool
	infoAt    time.Time
	needInfo  bool
	// unknownWarned is set once the warning about a payload no profile
	// reads is logged, until a profile reads one again.
	unknownWarned bool
	// noIsSleeping: the target does not serve GET /is_sleeping.
	noIsSleeping bool
	// gw is a gateway's view from its last scrape, nil when it failed.
	gw *GatewayView
}

// Apply is ApplyConfig followed by SetTargets(cfg).
func (m *Manager) Apply(cfg *config.Config) error {
	if err := m.ApplyConfig(cfg); err != nil {
		return err
	}
	return m.SetTargets(cfg)
}

// ApplyConfig takes what a configuration file sets for every target: the
// rate window. The targets' scrapes take it at the next SetTargets, which a
// caller of ApplyConfig calls next.
func (m *Manager) ApplyConfig(cfg *config.Config) error {
	if cfg == nil {
		return errors.New("collector: nil config")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.window = time.Duration(cfg.Global.RateWindow)
	return nil
}

// SetTargets scrapes the targets of cfg. Targets whose URL, metrics path,
// HTTP client config, scrape interval and timeout did not change keep their
// loop and their history; their labels, max_num_seqs and the window follow
// cfg and ApplyConfig. It is safe before and while Run runs. On error
// nothing changes.
func (m *Manager) SetTargets(cfg *config.Config) error {
	if cfg == nil {
		return errors.New("collector: nil config")
	}

	type want struct {
		t      *config.Target
		client *http.Client // nil when the target's scraper stays
	}
	wants := map[string]want{}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The static label names are those of the targets' labels.
	names, window := cfg.StaticLabelNames(), m.window
	unchanged := func(s *scraper, t *config.Target) bool {
		return s.metricsURL == joinURL(t.URL, t.MetricsPath) && s.engine == t.Engine && s.gateway == (t.Gateway != nil) && s.interval == cfg.ScrapeInterval(t) &&
			s.timeout == cfg.ScrapeTimeout(t) && reflect.DeepEqual(s.clientCfg, t.HTTPClientConfig)
	}
	// Build clients first so that a bad config changes nothing.
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if !t.ScrapeMetrics {
			continue
		}
		if s, ok := m.targets[t.Name]; ok && unchanged(s, t) {
			wants[t.Name] = want{t: t}
			continue
		}
		client, err := m.clients.Acquire(t.HTTPClientConfig)
		if err != nil {
			for _, w := range wants {
				if w.client != nil {
					m.clients.Release(w.client)
				}
			}
			return fmt.Errorf("collector: target %q: %w", t.Name, err)
		}
		wants[t.Name] = want{t: t, client: client}
	}

	if m.descs == nil || !slices.Equal(m.labelNames, names) {
		m.descs = newDescs(names)
	}
	m.labelNames = names
	for name, s := range m.targets {
		if w, ok := wants[name]; ok && w.client == nil {
			continue // unchanged: keep loop and history
		}
		m.stopLocked(s)
		m.clients.Release(s.client) // the last holder closes the idle keep-alive connections
		delete(m.targets, name)
	}
	for name, w := range wants {
		s, ok := m.targets[name]
		if !ok {
			s = &scraper{
				name:       name,
				metricsURL: joinURL(w.t.URL, w.t.MetricsPath),
				baseURL:    w.t.URL,
				engine:     w.t.Engine,
				gateway:    w.t.Gateway != nil,
				clientCfg:  w.t.HTTPClientConfig,
				client:     w.client,
				interval:   cfg.ScrapeInterval(w.t),
				timeout:    cfg.ScrapeTimeout(w.t),
				logger:     log.With(m.logger, "target", name),
				red:        m.red,
				labels:     m.labels,
				dropped:    m.dropped,
				quiet:      m.quiet,
				scraped:    m.scraped,
				needInfo:   true,
			}
			m.targets[name] = s
			if m.runCtx != nil && m.runCtx.Err() == nil {
				m.startLocked(s)
			}
		}
		s.mu.Lock()
		s.labelValues = w.t.StaticLabelValues(names)
		s.maxNumSeqs = w.t.MaxNumSeqs
		s.peakFLOPS = w.t.PeakFLOPSPerGPU
		s.window = window
		s.mu.Unlock()
	}
	byName := maps.Clone(m.targets)
	m.byName.Store(&byName)
	m.epoch.Add(1)
	return nil
}

// startLocked starts s's loop under m.mu.
func (m *Manager) startLocked(s *scraper) {
	ctx, cancel := context.WithCancel(m.runCtx)
	s.cancel = cancel
	s.done = make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(s.done)
		s.loop(ctx)
	}()
}

// stopLocked stops s's loop (if running) and waits for it.
func (m *Manager) stopLocked(s *scraper) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
	s.cancel = nil
}

// Run scrapes every configured target until ctx is done, then returns once
// every goroutine it started has exited.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	m.runCtx = ctx
	for _, s := range m.targets {
		if s.cancel == nil {
			m.startLocked(s)
		}
	}
	m.mu.Unlock()

	<-ctx.Done()

	m.mu.Lock()
	for _, s := range m.targets {
		if s.cancel != nil {
			s.cancel()
			s.cancel = nil
		}
	}
	m.runCtx = nil
	m.mu.Unlock()
	m.wg.Wait()

	// No scrape runs now: close the idle keep-alive connections, whose
	// read and write goroutines would otherwise outlive Run.
	m.mu.Lock()
	for _, s := range m.targets {
		s.client.CloseIdleConnections()
	}
	m.mu.Unlock()
}

// loop scrapes now and then every interval. After the first scrape it moves
// to a stable phase of its own in the interval (the second scrape comes at
// most an interval after the first), so that the scrapes of many targets
// started together do not all fire at once.
func (s *scraper) loop(ctx context.Context) {
	once := s.scrapeOnce
	if s.gateway {
		once = s.scrapeGatewayOnce
	}
	schedule.Run(ctx, s.interval, scrapeOffset(s.name, s.interval), true, func(ctx context.Context) {
		s.waitQuiet(ctx)
		once(ctx)
		s.version.Add(1)
		if s.scraped != nil && ctx.Err() == nil {
			s.scraped(s.name)
		}
	})
}

// waitQuiet waits, up to half the scrape interval, until vllm_prober has no
// probe of the target in flight. The scrape's phase and the probes' phases
// are independent hashes of their names; where the scrape fell inside the
// prober's own probe, every scrape of an idle server read one request
// running (llama-server, one target, 6 scrapes of 6). Waiting keeps the
// server's own running and waiting gauges as they are, where subtracting
// the prober's probes in flight would guess: a probe in flight may be
// queued, running, or already finished at the server. A target probed
// without a pause of half the scrape interval is scraped anyway.
func (s *scraper) waitQuiet(ctx context.Context) {
	if s.quiet == nil || s.interval <= 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, s.interval/2)
	defer cancel()
	s.quiet(wctx, s.name)
}

// scrapeGatewayOnce scrapes a gateway's /metrics and keeps its view. A
// gateway is scraped on its scrape_interval as an engine is, never when
// vllm_prober's own /metrics is: two Prometheus replicas scraping
// vllm_prober scraped every gateway twice as often.
func (s *scraper) scrapeGatewayOnce(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	v, err := scrapeGateway(sctx, s.client, s.metricsURL, s.labels)
	dur := time.Since(start)
	scrubGateway(s.red, s.logger, v)
	if ctx.Err() != nil {
		return // shutting down or reconfigured: not a failure of the gateway
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.duration = dur.Seconds()
	s.noteScrapeLocked(start, dur, err)
	s.up, s.gw = err == nil, v
	if err != nil {
		s.gw = nil
	}
}

// scrapeOnce scrapes /metrics (and, for a new or restarted server, /version
// and /v1/models) and updates the state.
func (s *scraper) scrapeOnce(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	snap, err := scrapeEngine(sctx, s.client, s.metricsURL, s.engine, s.labels)
	dur := time.Since(start)
	scrubSnapshot(s.red, s.logger, snap)
	countDropped(s.dropped, boundSnapshot(snap))
	if snap != nil && s.now != nil {
		snap.Time = s.now()
	}
	if ctx.Err() != nil {
		return // shutting down or reconfigured: not a failure of the server
	}

	s.mu.Lock()
	s.duration = dur.Seconds()
	s.noteScrapeLocked(start, dur, err)
	if err != nil {
		s.up = false
		s.derived = nil
		s.needInfo = true // the server may come back as another version
		s.mu.Unlock()
		return
	}
	if n := len(s.ring); n > 0 && restarted(s.ring[n-1], snap) {
		s.needInfo = true
		s.noIsSleeping = false
		s.ttftQueue = nil
	}
	fetchInfo := s.needInfo && (s.infoAt.IsZero() || s.infoOK || time.Since(s.infoAt) >= infoRetry)
	s.mu.Unlock()

	s.askIsSleeping(ctx, snap)

	var info ServerInfo
	var infoErr error
	if fetchInfo {
		ictx, icancel := context.WithTimeout(ctx, s.timeout)
		info, infoErr = FetchServerInfo(ictx, s.client, s.baseURL, snap.Engine)
		icancel()
		info.scrub(s.red, s.logger)
		if n := info.bound(); n > 0 {
			countDropped(s.dropped, map[string]int{droppedServedModel: n})
		}
		if infoErr != nil {
			level.Debug(s.logger).Log("msg", "reading server info failed", "err", infoErr)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if fetchInfo {
		s.info, s.infoOK, s.infoAt = info, infoErr == nil, time.Now()
		s.needInfo = infoErr != nil
	}
	s.up = true
	s.noteEngineLocked(snap)
	nameUnlabeledModel(snap, s.info)
	s.last.Engine, s.last.SleepLevel = snap.Engine, sleepLevelOf(snap)
	if snap.Engine == EngineUnknown {
		s.last.FamiliesSeen = scrubAll(s.red, snap.FamiliesSeen)
	}
	s.ring = append(s.ring, snap)
	s.trimLocked()
	s.deriveLocked()
}

// askIsSleeping reads vLLM's GET /is_sleeping for an engine of vLLM's
// sleep mode whose /metrics says nothing of it (releases before
// vllm:engine_sleep_state): a sleeping answer sets every model's level to
// 1 (the route does not tell the level). A target that answers anything
// but JSON is not asked again until it restarts.
func (s *scraper) askIsSleeping(ctx context.Context, snap *Snapshot) {
	p, ok := ProfileOf(snap.Engine)
	s.mu.Lock()
	skip := s.noIsSleeping
	s.mu.Unlock()
	if !ok || !p.Sleep || skip || sleepLevelOf(snap) >= 0 || len(snap.Models) == 0 {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sleeping, err := vllmapi.IsSleeping(ictx, s.client, s.baseURL)
	if err != nil {
		var se *vllmapi.StatusError
		var de *vllmapi.DecodeError
		if errors.As(err, &se) || errors.As(err, &de) {
			s.mu.Lock()
			s.noIsSleeping = true
			s.mu.Unlock()
		}
		level.Debug(s.logger).Log("msg", "reading /is_sleeping failed", "err", err)
		return
	}
	level := 0.0
	if sleeping {
		level = 1
	}
	for _, m := range snap.Models {
		m.SleepLevel = level
	}
}

// noteEngineLocked warns once when the target's payload matches no engine
// profile, naming a few of its families (scrubbed like label values).
func (s *scraper) noteEngineLocked(snap *Snapshot) {
	if snap.Engine != EngineUnknown {
		s.unknownWarned = false
		return
	}
	if s.unknownWarned {
		return
	}
	s.unknownWarned = true
	seen := scrubAll(s.red, snap.FamiliesSeen)
	if s.engine != "" {
		level.Warn(s.logger).Log("msg", "the target's /metrics matches no engine profile: the profile its engine key names reads none of its families, so no engine signal is read from it",
			"engine_key", s.engine, "families_seen", strings.Join(seen, ","), "engines", strings.Join(Engines(), ","))
		return
	}
	level.Warn(s.logger).Log("msg", "the target's /metrics matches no engine profile: no engine signal is read from it; set the target's engine key if it is one of the engines",
		"families_seen", strings.Join(seen, ","), "engines", strings.Join(Engines(), ","))
}

// scrubAll is names with each one holding a secret replaced.
func scrubAll(red Scrubber, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		clean, _ := red.Label(n)
		out = append(out, clean)
	}
	return out
}

// sleepLevelOf is the deepest sleep level over snap's models, -1 when none
// reports one.
func sleepLevelOf(snap *Snapshot) int {
	level := -1
	for _, m := range snap.Models {
		if !math.IsNaN(m.SleepLevel) && int(m.SleepLevel) > level {
			level = int(m.SleepLevel)
		}
	}
	return level
}

// SleepState reports whether target's engine said, at its last scrape, that
// it sleeps (vLLM's sleep mode). known is false when the collector cannot
// tell: it does not scrape target (a probe-only vantage, scrape_metrics:
// false), the last scrape failed, or the engine does not say.
func (m *Manager) SleepState(target string) (sleeping, known bool) {
	m.withTarget(target, func(s *scraper) {
		known = s.up && s.last.SleepLevel >= 0
		sleeping = known && s.last.SleepLevel > 0
	})
	return sleeping, known
}

// nameUnlabeledModel gives the model of an engine whose series name none
// (llama.cpp) the id /v1/models lists when it lists exactly one, else
// "default".
func nameUnlabeledModel(snap *Snapshot, info ServerInfo) {
	m := snap.Models[unlabeledModel]
	if m == nil {
		return
	}
	name := "default"
	if len(info.Base) == 1 {
		for id := range info.Base {
			name = id
		}
	}
	delete(snap.Models, unlabeledModel)
	m.Name = name
	snap.Models[name] = m
}

// restarted reports whether cur looks like a new server process compared to
// prev: a counter went backwards, or the engine or metric schema changed.
func restarted(prev, cur *Snapshot) bool {
	if prev.Schema != cur.Schema || prev.Engine != cur.Engine {
		return true
	}
	for name, c := range cur.Models {
		p := prev.Models[name]
		if p == nil && name == unlabeledModel && len(prev.Models) == 1 {
			// An engine whose series name no model (llama.cpp): cur is
			// compared before it is named after /v1/models, as prev was.
			for _, only := range prev.Models {
				p = only
			}
		}
		if p == nil {
			continue
		}
		if c.GenerationTokens < p.GenerationTokens || c.PromptTokens < p.PromptTokens {
			return true
		}
	}
	return false
}

// trimLocked keeps the snapshots inside the window plus the one just before
// it, bounded by maxSnapshots.
func (s *scraper) trimLocked() {
	newest := s.ring[len(s.ring)-1].Time
	cut := 0
	for cut < len(s.ring)-1 && s.ring[cut].Time.Before(newest.Add(-s.window)) {
		cut++
	}
	if over := len(s.ring) - cut - maxSnapshots; over > 0 {
		cut += over
	}
	if cut > 0 {
		s.ring = append([]*Snapshot(nil), s.ring[cut:]...)
	}
}

func (s *scraper) deriveLocked() {
	latest := s.ring[len(s.ring)-1]
	s.derived = make(map[string]*Derived, len(latest.Models))
	for name := range latest.Models {
		d := derive(s.ring, name)
		s.derived[name] = d
		if includes, ok := ttftQueueEvidence(d); ok {
			if s.ttftQueue == nil {
				s.ttftQueue = map[string]bool{}
			}
			if prev, known := s.ttftQueue[name]; !known || prev != includes {
				level.Info(s.logger).Log("msg", "server TTFT queue accounting decided", "model", name, "ttft_includes_queue", includes)
			}
			s.ttftQueue[name] = includes
		}
	}
}

// ttftIncludesQueueLocked is what the collector assumes of model's server
// TTFT: what a window showed, else vLLM's own accounting (from arrival).
func (s *scraper) ttftIncludesQueueLocked(model string) bool {
	if v, ok := s.ttftQueue[model]; ok {
		return v
	}
	return true
}

// Load returns the latest running and waiting requests of target, summed over
// its models; ok is false when the last scrape failed or exposed neither.
func (m *Manager) Load(target string) (running, waiting float64, ok bool) {
	if snap := m.Latest(target); snap != nil {
		return loadOf(snap)
	}
	return 0, 0, false
}

// loadOf is the running and waiting requests of snap, summed over models.
func loadOf(snap *Snapshot) (running, waiting float64, ok bool) {
	running, waiting = snap.Running(), snap.Waiting()
	if math.IsNaN(running) || math.IsNaN(waiting) {
		return 0, 0, false
	}
	return running, waiting, true
}

// LoadDuring is the load a probe met over its lifetime [from, to]: the mean
// of running + waiting + 1 (the probe itself) over the target's last
// successful scrape at or before from, which is what the probe started into,
// and every successful scrape during its lifetime. A probe that starts just
// before the scrape that first sees a burst, and then queues behind it, is
// thus judged at the burst's load, not at the idle load it started at. A
// scrape that failed in between is skipped: a busy server's scrapes time out
// first, and the probes started then are the ones whose load matters most.
// ok is false when no scrape covers the probe: none during it, and the last
// before it more than three scrape intervals before from.
func (m *Manager) LoadDuring(target string, from, to time.Time) (load float64, ok bool) {
	m.withTarget(target, func(s *scraper) { load, ok = s.loadDuring(from, to) })
	return load, ok
}

// loadDuring is LoadDuring of s. s.mu must be held.
func (s *scraper) loadDuring(from, to time.Time) (float64, bool) {
	sum, n := 0.0, 0
	for i := len(s.ring) - 1; i >= 0; i-- {
		snap := s.ring[i]
		if snap.Time.After(to) {
			continue
		}
		before := !snap.Time.After(from)
		if before && from.Sub(snap.Time) > 3*s.interval {
			break
		}
		if running, waiting, ok := loadOf(snap); ok {
			sum += running + waiting + 1
			n++
		}
		if before {
			break // the state the probe started into; older ones are not its
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// GenerationTokensPerSecond returns target's generation tokens/s over the
// rate window, summed over its models; ok is false without a rate.
func (m *Manager) GenerationTokensPerSecond(target string) (total float64, ok bool) {
	m.withDerived(target, func(d *Derived) {
		if !math.IsNaN(d.GenerationTokensPerSecond) {
			total += d.GenerationTokensPerSecond
			ok = true
		}
	})
	return total, ok
}

// StreamOutputTokensPerSecond is target's output tokens per second of request
// lifetime over the rate window (see Derived.StreamOutputTokensPerSecond).
// When the server serves several models, the value of the model generating
// the most tokens is returned.
func (m *Manager) StreamOutputTokensPerSecond(target string) (best float64, ok bool) {
	bestGen := -1.0
	m.withDerived(target, func(d *Derived) {
		if math.IsNaN(d.StreamOutputTokensPerSecond) {
			return
		}
		gen := d.GenerationTokensPerSecond
		if math.IsNaN(gen) {
			gen = 0
		}
		if gen > bestGen {
			best, bestGen, ok = d.StreamOutputTokensPerSecond, gen, true
		}
	})
	return best, ok
}

// Latest returns the newest snapshot of target (nil when the last scrape
// failed or none happened), for debug pages and bench.
func (m *Manager) Latest(target string) (latest *Snapshot) {
	m.withTarget(target, func(s *scraper) {
		if s.up && len(s.ring) > 0 {
			latest = s.ring[len(s.ring)-1]
		}
	})
	return latest
}

func (m *Manager) target(name string) *scraper {
	if byName := m.byName.Load(); byName != nil {
		return (*byName)[name]
	}
	return nil
}

// withTarget calls f with target's scraper, its lock held; it does nothing
// for a target the collector does not scrape.
func (m *Manager) withTarget(target string, f func(s *scraper)) {
	s := m.target(target)
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// withDerived calls f with each model's derived rates of target while its
// last scrape succeeded.
func (m *Manager) withDerived(target string, f func(d *Derived)) {
	m.withTarget(target, func(s *scraper) {
		if !s.up {
			return
		}
		for _, d := range s.derived {
			f(d)
		}
	})
}

func (m *Manager) sortedTargets() []*scraper {
	out := make([]*scraper, 0, len(m.targets))
	for _, s := range m.targets {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// scrapeOffset is a stable phase in (0, interval] for the target's scrapes.
func scrapeOffset(name string, interval time.Duration) time.Duration {
	if interval <= 0 {
		return interval
	}
	return schedule.Phase(interval, name) + 1
}
