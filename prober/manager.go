package prober

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/answer"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/schedule"
)

// ErrBudgetExceeded is returned by ProbeNow when the probe could exceed the
// target's token budget per hour.
var ErrBudgetExceeded = errors.New("token budget per hour would be exceeded")

// ModuleStatus is the state of one (target, module) pair for the landing page.
type ModuleStatus struct {
	Module  string
	Model   string   // with the target's models key: the model probed; else ""
	Last    *Result  // nil before the first probe finished
	History []Result // newest first, bounded; treat as read-only
}

// TargetStatus is the state of one target for the landing page.
type TargetStatus struct {
	Name     string
	URL      string // without credentials
	Model    string // resolved model, "" if unknown yet
	HealthUp bool
	ModelsUp bool
	Checked  bool // false until /health and /v1/models were checked once
	// ScrapeOnly: probe: false (modules: none); the prober never checks or
	// probes it, so Checked stays false.
	ScrapeOnly bool
	Modules    []ModuleStatus
}

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
	// stream sends the probes; tests wrap it to pin timings for golden output.
	registered bool
	stream     func(context.Context, *http.Client, StreamRequest) Result
	// clients shares one HTTP client between targets of equal configuration
	// (with the collector and discovery when the daemon hands the same Pool).
	clients *httpclient.Pool
	// red scrubs every text the prober keeps (results' errors and headers).
	red *redact.Redactor
	// offset places a pair in its interval; tests pin it.
	offset func(pairKey, time.Duration) time.Duration
	// load tells a probe the load it met over its lifetime (SetLoadSource).
	load func(target string, from, to time.Time) (load float64, ok bool)
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

	// Scheduled is the token budget of the scheduled probes, keyed by pair
	// model key; OnDemand that of /probe (budget.go).
	scheduled, onDemand TokenPool

	cancel context.CancelFunc // of the check loop; nil when not running
}

// pair is one (target, module). It survives Apply while both names stay, and so
// do its schedule (when the interval is unchanged) and history.
type pair struct {
	key      pairKey
	tgt      *target
	mod      config.Module
	interval time.Duration
	timeout  time.Duration
	stall    time.Duration

	inFlight       bool
	stopped        bool
	promptEstimate int     // observed usage.prompt_tokens + slack, else a heuristic
	lastEnd        float64 // Unix time the last recorded probe finished
	hist           history
	checks         *checks     // output checks of mod (expect.go); nil when none
	state          pairState   // statistics that outlive the history (stats.go)
	records        recordState // record ids and the last hour's counts (pairstate.go)
	gen            *metrics
	labels         []string

	cancel context.CancelFunc // of the schedule loop; nil when not running
}

// NewManager returns a Manager that registers its metrics with reg (nil: none).
func NewManager(reg prometheus.Registerer, logger log.Logger) *Manager {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	red := redact.New()
	return &Manager{
		reg:          reg,
		logger:       logger,
		targets:      map[string]*target{},
		pairs:        map[pairKey]*pair{},
		historyLimit: DefaultHistoryLimit,
		now:          time.Now,
		stream:       Stream,
		offset:       scheduleOffset,
		red:          red,
		clients:      httpclient.New(red),
	}
}

// SetShared makes the Manager use pool for its HTTP clients and red to scrub
// the texts it keeps, shared with the rest of the daemon. Call it before the
// first Apply.
func (m *Manager) SetShared(pool *httpclient.Pool, red *redact.Redactor) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clients, m.red = pool, red
}

// SetHistoryLimit sets how many recent results (and, on top, recent failures)
// each pair keeps. It applies to results recorded from now on.
func (m *Manager) SetHistoryLimit(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < 1 {
		n = 1
	}
	m.historyLimit = n
	for _, p := range m.pairs {
		p.hist.limit = n
	}
}

// Apply (re)configures the manager. It is safe before and while Run runs:
// unchanged pairs keep their schedule and history, removed pairs stop and lose
// their series, new pairs start. On error nothing changes.
func (m *Manager) Apply(cfg *config.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()

	// Build everything that can fail first. A target's credentials are read
	// (credential files included) when its client is built, not at every
	// discovery refresh that re-applies it unchanged.
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
	hist := histOpts{buckets: slices.Clone(cfg.Global.Buckets), tokenBuckets: slices.Clone(cfg.Global.TokenLatencyBuckets),
		nativeFactor: cfg.Global.NativeHistogramBucketFactor}
	static := cfg.StaticLabelNames()
	if !m.registered && m.reg != nil {
		if err := m.reg.Register(generations{current: m.currentMetrics}); err != nil {
			return fmt.Errorf("registering probe metrics: %w", err)
		}
	}
	m.registered = true
	if m.metrics == nil || !slices.Equal(m.metrics.static, static) || !m.metrics.hist.equal(hist) {
		m.metrics = newMetrics(static, hist) // the old generation's series go with it
	}
	m.cfg = cfg
	m.maxInFlight = cfg.Global.MaxConcurrentProbes

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
	for _, t := range m.targets {
		m.relabelTarget(t)
	}
	for _, p := range m.pairs {
		m.relabelPair(p)
	}
	return nil
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
	if p.checks.answers() {
		m.metrics.answers.init(lv)
	}
	// The "last probe" gauges describe state, not history: carry them over.
	if last, ok := p.hist.last(); ok {
		if last.Answer != AnswerNotChecked {
			m.metrics.answers.correct.WithLabelValues(lv...).Set(b2f(last.Answer == AnswerCorrect))
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

// settle releases a probe's reservation in pool and books what it spent.
// m.mu must be held.
func (m *Manager) settle(pool *TokenPool, model string, cost int, s probeSpec, res *Result) {
	prompt := res.PromptTokens
	if prompt == 0 && res.StatusCode == http.StatusOK {
		prompt = s.promptEstimate // the server processed it but sent no usage
	}
	pool.Settle(m.now(), model, cost, prompt+res.OutputTokens)
}

// record books a finished scheduled probe. m.mu must be held.
func (m *Manager) record(p *pair, res *Result) {
	if res.PromptTokens > 0 {
		p.promptEstimate = res.PromptTokens + promptSlack
	}
	end := m.now()
	p.records.note(res, end) // gives res its record id
	p.hist.add(res)
	p.state.record(res, end, p.hist.limit)
	p.lastEnd = unixSeconds(end)
	m.metrics.observe(p.labels, res, p.lastEnd)
	if !res.Success {
		level.Debug(m.logger).Log("msg", "Probe failed", "target", p.key.target, "module", p.key.module,
			"reason", res.Reason, "err", res.Err)
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// promptSlack covers the variation of the nonce's tokenisation between probes.
const promptSlack = 8

func (p *pair) worstCost() int {
	est := p.promptEstimate
	if est == 0 {
		est = estimatePromptTokens(&p.mod)
	}
	return est + p.mod.MaxTokens
}

// estimatePromptTokens is a deliberately pessimistic token count for a module's
// prompt before the server told us the real one: a third of its bytes (English
// BPE averages about four bytes per token), plus the nonce and chat-template
// overhead.
func estimatePromptTokens(mod *config.Module) int {
	n := len(mod.Prompt)
	for _, msg := range mod.Messages {
		n += len(msg.Content) + 3*8 // role markers and separators
	}
	longest := 0 // a rotating question replaces the prompt (expect.go)
	for _, q := range mod.Questions {
		longest = max(longest, len(q.Prompt))
	}
	n += longest
	return n/3 + 1 + promptSlack
}

// probeSpec is everything one probe needs, copied under the lock.
type probeSpec struct {
	target, module string
	url            string
	client         *http.Client
	mod            config.Module
	model          string
	timeout, stall time.Duration
	red            *redact.Redactor
	promptEstimate int
	tgt            *target
	checks         *checks
	load           func(target string, from, to time.Time) (load float64, ok bool)
}

func (m *Manager) snapshot(p *pair) probeSpec {
	est := p.promptEstimate
	if est == 0 {
		est = estimatePromptTokens(&p.mod)
	}
	return probeSpec{
		target: p.key.target, module: p.key.module,
		url: p.tgt.cfg.URL, client: p.tgt.client, mod: p.mod, model: pairModel(p),
		timeout: p.timeout, stall: p.stall, red: m.red, promptEstimate: est, tgt: p.tgt,
		checks: p.checks,
		load:   m.load,
	}
}

// probe runs one probe: resolves the model if needed, builds the request and
// streams it. started is called once the probe counts as an attempt (after model
// resolution, so that the attempt carries the resolved model label).
func (m *Manager) probe(ctx context.Context, s probeSpec, started func()) *Result {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	begin := m.now() // the manager's clock, which tests pin
	loadUntil := func(end time.Time) float64 {
		if s.load != nil {
			if l, ok := s.load(s.target, begin, end); ok {
				return l
			}
		}
		return math.NaN()
	}
	if s.model == "" {
		ids, res := m.fetchModels(ctx, s.client, s.url, s.target)
		if res == nil && len(ids) == 0 {
			res = &Result{Start: begin, Reason: ReasonModelNotFound, Err: "/v1/models lists no model"}
		}
		if res != nil {
			started()
			res.Phase, res.Request = PhaseModels, http.MethodGet+" /v1/models"
			end := m.now()
			res.Duration = end.Sub(begin)
			res.E2E = res.Duration
			res.Scrub(s.red)
			res.Load = loadUntil(end)
			return res
		}
		s.model = ids[0]
		m.mu.Lock()
		m.setModel(s.tgt, ids[0])
		m.mu.Unlock()
	}
	started()
	nonce := newNonce()
	mod, answerCheck := s.checks.pick(s.mod)
	req := StreamRequest{
		BaseURL:      s.url,
		Kind:         mod.Prober,
		Header:       requestHeader(&mod, s.target, s.module, nonce),
		StallTimeout: s.stall,
		Capture:      s.checks.capture(),
		Redact:       s.red,
	}
	var res Result
	if mod.Prober == config.ProberEmbeddings {
		req.Body = embeddingsBody(&mod, s.model, nonce)
		res = Embed(ctx, s.client, req, mod.ExpectedDimension)
	} else {
		req.Body = requestBody(&mod, s.model, nonce)
		res = m.stream(ctx, s.client, req)
		s.checks.apply(&res, res.gen, answerCheck, s.red)
		res.gen = nil
	}
	end := m.now()
	res.Duration = end.Sub(begin)
	res.Model = s.model
	res.Scrub(s.red)
	res.Text = truncateText(s.red, res.Text) // scrubs first: no secret cut in half survives
	quoteOutput(&res, s.red)
	res.Load = loadUntil(end)
	return &res
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

func newNonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestBody builds the JSON body of a module's probe. With mod.Nonce the
// nonce goes at the very front of the prompt (chat: of the first user message) so
// that prefix caching cannot serve the prompt from cache.
func requestBody(mod *config.Module, model, nonce string) map[string]any {
	body := map[string]any{
		"model":       model,
		"temperature": mod.Temperature,
	}
	if mod.IgnoreEOS {
		body["ignore_eos"] = true
	}
	prefix := ""
	if mod.Nonce {
		prefix = nonce + " "
	}
	switch mod.Prober {
	case config.ProberChat:
		msgs := make([]map[string]any, len(mod.Messages))
		first := slices.IndexFunc(mod.Messages, func(m config.Message) bool { return m.Role == "user" })
		if first < 0 {
			first = 0
		}
		for i, msg := range mod.Messages {
			content := msg.Content
			if i == first {
				content = prefix + content
			}
			msgs[i] = map[string]any{"role": msg.Role, "content": content}
		}
		body["messages"] = msgs
		body["max_completion_tokens"] = mod.MaxTokens
		body["max_tokens"] = mod.MaxTokens // servers older than max_completion_tokens
	default:
		body["prompt"] = prefix + mod.Prompt
		body["max_tokens"] = mod.MaxTokens
	}
	addStructureFields(body, mod)
	for k, v := range mod.ExtraBody {
		body[k] = answer.JSONable(v)
	}
	return body
}

func requestHeader(mod *config.Module, target, module, nonce string) http.Header {
	h := http.Header{}
	for k, v := range mod.Headers {
		h.Set(k, v)
	}
	h.Set("X-Request-Id", "vllm-prober-"+target+"-"+module+"-"+nonce)
	return h
}

// Scrub removes red's secrets (the credentials of the configuration, and the
// tokens its clients obtained) from the result's texts and headers. Stream
// never puts one there itself, but a server may echo a key or a request header
// in its error body. The manager scrubs every result it keeps or returns;
// bench scrubs its own.
func (r *Result) Scrub(red *redact.Redactor) {
	for _, s := range []*string{&r.Err, &r.RequestBody, &r.ErrorBody, &r.Text} {
		*s = red.String(*s)
	}
	red.Header(r.RequestHeader)
	red.Header(r.ResponseHeader)
}

// ProbeNow runs one probe of module on target now, outside the schedule, and
// returns its result and its metrics in a fresh registry (without target,
// module and model labels: the scraper of /probe sets them). It respects the
// target's token budget (ErrBudgetExceeded) and books the tokens it spends there,
// but it is not counted in the long-lived metrics or the history.
func (m *Manager) ProbeNow(ctx context.Context, targetName, module string) (*Result, *prometheus.Registry, error) {
	return m.ProbeModelNow(ctx, targetName, module, "")
}

// ProbeModelNow is ProbeNow of one model of a target with models (models.go):
// model must be one the target lists; "" is its first. On other targets model
// must be "".
func (m *Manager) ProbeModelNow(ctx context.Context, targetName, module, model string) (*Result, *prometheus.Registry, error) {
	m.mu.Lock()
	if m.cfg == nil {
		m.mu.Unlock()
		return nil, nil, errors.New("no configuration applied")
	}
	t, ok := m.targets[targetName]
	if !ok {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("unknown target %q", targetName)
	}
	mod, ok := m.cfg.Modules[module]
	if !ok {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("unknown module %q", module)
	}
	p := &pair{key: pairKey{targetName, module, ""}, tgt: t, mod: mod,
		timeout: m.cfg.ProbeTimeout(&t.cfg, &mod), stall: m.cfg.StallTimeout(&mod)}
	var err error
	if p.key.model, err = probeNowModel(t, model); err != nil {
		m.mu.Unlock()
		return nil, nil, err
	}
	if known, ok := m.pairs[p.key]; ok {
		p.promptEstimate, p.checks = known.promptEstimate, known.checks
	} else {
		if p.checks, err = compileChecks(&mod); err != nil {
			m.mu.Unlock()
			return nil, nil, err
		}
	}
	cost := p.worstCost()
	// On-demand probes draw on a pool of their own (budget.go): however
	// many calls /probe gets, the scheduled probes keep their budget.
	if budget := onDemandBudget(t, cost); !t.onDemand.Allows(m.now(), budget, budget, "", cost) {
		m.mu.Unlock()
		return nil, nil, ErrOnDemandBudgetExceeded
	}
	t.onDemand.Reserve("", cost)
	s := m.snapshot(p)
	hist := m.metrics.hist
	m.mu.Unlock()

	res := m.probe(ctx, s, func() {})

	m.mu.Lock()
	m.settle(&t.onDemand, "", cost, s, res)
	end := float64(m.now().UnixNano()) / 1e9
	m.mu.Unlock()

	reg := prometheus.NewRegistry()
	mt := newMetricsLabels(nil, nil, nil, hist)
	for _, c := range mt.probeCollectors() {
		reg.MustRegister(c)
	}
	mt.attempts.WithLabelValues().Inc()
	for _, r := range Reasons() {
		mt.failures.WithLabelValues(string(r))
	}
	mt.observe(nil, res, end)
	return res, reg, nil
}

// Status returns the state of every target, in configuration order.
func (m *Manager) Status() []TargetStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg == nil {
		return nil
	}
	out := make([]TargetStatus, 0, len(m.cfg.Targets))
	for i := range m.cfg.Targets {
		out = append(out, m.targetStatus(&m.cfg.Targets[i]))
	}
	return out
}

// targetStatus is the state of a configured target. m.mu must be held.
func (m *Manager) targetStatus(tc *config.Target) TargetStatus {
	t := m.targets[tc.Name]
	ts := TargetStatus{Name: tc.Name, URL: redactURL(tc.URL), Model: t.model,
		HealthUp: t.healthUp, ModelsUp: t.modelsUp, Checked: t.checked, ScrapeOnly: !tc.Probe}
	for _, mod := range tc.Modules {
		for _, model := range pairModels(t) {
			p := m.pairs[pairKey{tc.Name, mod, model}]
			ms := ModuleStatus{Module: mod, Model: model, History: p.hist.list()}
			if l, ok := p.hist.last(); ok {
				ms.Last = &l
			}
			ts.Modules = append(ts.Modules, ms)
		}
	}
	return ts
}

// Model returns the resolved model of target, "" if unknown.
func (m *Manager) Model(targetName string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.targets[targetName]; ok {
		return t.model
	}
	return ""
}

// MeanTTFT returns the mean TTFT in seconds of the successful scheduled probes of
// target (all modules) that started at or after since, and how many there were.
// O(modules of the target); it copies no history.
func (m *Manager) MeanTTFT(targetName string, since time.Time) (seconds float64, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.targets[targetName]
	if !ok {
		return 0, 0
	}
	var sum float64
	for _, p := range t.pairs {
		s := p.state.window.since(since.UnixNano())
		sum += s.ttft
		n += s.n
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}
