package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log/level"
	commoncfg "github.com/prometheus/common/config"
	"github.com/schollz/progressbar/v3"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Run benchmarks the server at every level of opts. It returns the levels that
// finished; when ctx is cancelled (Ctrl-C) the level in flight is abandoned,
// every request and poll it started has returned, and the error wraps ctx's.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, fmt.Errorf("invalid benchmark options: %w", err)
	}
	// A server (or a gateway in front of it) may echo the request's headers in
	// its error bodies and events: the credentials bench sends must not reach
	// the summary, the result files or a log line (internal/redact, the one
	// owner of scrubbing, as in the daemon).
	opts.red = redact.New()
	for _, vs := range opts.Header {
		opts.red.Learn(vs...)
	}
	opts.Logger = redact.Logger(opts.Logger, opts.red)
	client := opts.Client
	if client == nil {
		maxc := 1
		for _, c := range opts.Concurrencies {
			maxc = max(maxc, c)
		}
		if len(opts.RequestRates) > 0 {
			maxc = max(maxc, opts.Requests)
		}
		if opts.GoodputTarget > 0 {
			maxc = max(maxc, opts.GoodputMaxConcurrency)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = maxc + 2
		tr.MaxIdleConns = maxc + 2
		defer tr.CloseIdleConnections()
		// The one User-Agent of vllm_prober (internal/httpclient).
		// Its headers (--api-key-file's Authorization, --header) never
		// follow a redirect to another origin (httpclient.CheckRedirect).
		client = &http.Client{Transport: commoncfg.NewUserAgentRoundTripper(httpclient.UserAgent(), tr), CheckRedirect: httpclient.CheckRedirect}
	}
	spec, err := probe.Compile(opts.Name, opts.module())
	if err != nil {
		return nil, err
	}
	models, err := waitReady(ctx, client, &opts)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Name: opts.Name, Model: opts.Model, Endpoint: opts.Endpoint, Date: opts.now(),
		Requests: opts.Requests, MaxTokens: opts.MaxTokens, Temperature: opts.Temperature,
		IgnoreEOS: opts.IgnoreEOS, Prompt: opts.Prompt, InputLen: opts.RandomInputLen,
		Seed: opts.Seed, Percentiles: opts.Percentiles,
		MinSuccessRatio: opts.MinSuccessRatio, ForceBaseline: opts.ForceBaseline, SaveDetailed: opts.SaveDetailed,
	}
	if rep.Model == "" {
		if len(models) == 0 {
			return nil, errors.New("no --model given and /v1/models lists no model")
		}
		// The id is the server's text: scrubbed before any output keeps it.
		id, held := opts.red.Label(models[0].ID)
		if held {
			level.Warn(opts.Logger).Log("msg", "The model id the server lists holds the credential sent: it is shown as "+redact.Placeholder, "field", "/v1/models id")
		}
		rep.Model = id
	}
	found := false
	for _, m := range models {
		if id, _ := opts.red.Label(m.ID); id == rep.Model {
			found = true
			rep.MaxModelLen = m.MaxModelLen
		}
	}
	if !found {
		level.Warn(opts.Logger).Log("msg", "model not listed by /v1/models; sending it anyway", "model", rep.Model)
	}
	rep.Goodput = opts.Goodput
	level := func(lv Level) (*LevelResult, error) {
		lr, err := runLevel(ctx, client, &opts, spec, rep.Model, lv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lv, err)
		}
		rep.Levels = append(rep.Levels, lr)
		if opts.Summary != nil {
			if err := WriteSummary(opts.Summary, lr, opts.Percentiles); err != nil {
				return lr, err
			}
		}
		return lr, nil
	}
	if opts.Goodput != nil && opts.GoodputTarget > 0 {
		var err error
		rep.GoodputSearch, err = searchGoodput(ctx, opts.GoodputTarget, opts.GoodputMaxConcurrency, func(c int) (float64, error) {
			lr, err := level(Level{Type: LoadConcurrency, Value: float64(c)})
			if err != nil {
				return 0, err
			}
			return lr.Goodput.Attainment, nil
		})
		return rep, err
	}
	for _, lv := range opts.Levels() {
		if _, err := level(lv); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

type modelCard = vllmapi.Model

// waitReady polls /v1/models until it answers 200 with a model list, or
// ReadyTimeout passes (the multi-GPU presets report's step 2).
func waitReady(ctx context.Context, client *http.Client, o *Options) ([]modelCard, error) {
	ctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(min(time.Second, o.ReadyTimeout))
	defer tick.Stop()
	var lastErr error
	for {
		models, err := fetchModels(ctx, client, o)
		if err == nil {
			return models, nil
		}
		lastErr = err
		level.Debug(o.Logger).Log("msg", "server not ready", "err", err)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("server not ready: /v1/models did not answer within %s: %w", o.ReadyTimeout, lastErr)
			}
			return nil, fmt.Errorf("waiting for /v1/models: %w", context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func fetchModels(ctx context.Context, client *http.Client, o *Options) ([]modelCard, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return vllmapi.Models(rctx, client, o.URL, o.Header)
}

// module is the probe module bench sends, compiled once per run like a
// configured module: vLLM's benchmark client's request
// (benchmarks/backend_request_func.py) of the endpoint's kind. Each request
// asks its own prompt (probe.Call.Prompt); bench sends no nonce.
func (o *Options) module() config.Module {
	mod := config.Module{Prober: o.Endpoint, MaxTokens: o.MaxTokens, Temperature: o.Temperature, IgnoreEOS: o.IgnoreEOS}
	switch o.Endpoint {
	case config.ProberChat:
		mod.Messages = []config.Message{{Role: "user", Content: o.Prompt}}
	case config.ProberCompletions:
		mod.Prompt = o.Prompt
		mod.ExtraBody = map[string]any{"repetition_penalty": 1.0}
	default:
		mod.Prompt = o.Prompt
	}
	return mod
}

// prompts returns the prompt of every request of a level.
func prompts(o *Options, lv Level, n int) []string {
	out := make([]string, n)
	if o.RandomInputLen == 0 {
		for i := range out {
			out[i] = o.Prompt
		}
		return out
	}
	rng := rand.New(rand.NewPCG(o.Seed, levelSeed(lv)))
	for i := range out {
		out[i] = probe.RandomWords(rng, o.RandomInputLen)
	}
	return out
}

func levelSeed(lv Level) uint64 {
	v := math.Float64bits(lv.Value)
	if lv.Type == LoadRequestRate {
		v ^= 0x9e3779b97f4a7c15
	}
	return v
}

// arrivals returns the send offsets of n requests at a Poisson rate (vLLM's
// burstiness 1: exponential gaps of mean 1/rate, the first at 0); +Inf sends
// everything at 0.
func arrivals(rate float64, n int, seed uint64) []time.Duration {
	out := make([]time.Duration, n)
	if math.IsInf(rate, 1) {
		return out
	}
	rng := rand.New(rand.NewPCG(seed, math.Float64bits(rate)))
	t := 0.0
	for i := 1; i < n; i++ {
		t += rng.ExpFloat64() / rate
		out[i] = time.Duration(t * float64(time.Second))
	}
	return out
}

// runLevel runs one level: the requests, the /metrics poller and the progress bar.
func runLevel(ctx context.Context, client *http.Client, o *Options, spec *probe.Spec, model string, lv Level) (*LevelResult, error) {
	lr := &LevelResult{Level: lv}
	n := o.Requests
	ps := prompts(o, lv, n)
	results := make([]probe.Result, n)
	var texts []string // vLLM's generated_texts, for --save-detailed
	if o.SaveDetailed {
		texts = make([]string, n)
	}
	bar := newProgress(o.Progress, o.ProgressBar, lv.String(), n)
	var finished atomic.Int64

	if !o.SkipWarmup {
		warmUp(ctx, client, o, model, lv, ps[0])
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("interrupted: %w", context.Cause(ctx))
		}
	}
	restoreGC := timedWindowGC(o.GCMemoryLimit)
	defer restoreGC() // once the window ended, or on an early return

	lctx, stopPoll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	poller := &poller{client: client, url: o.URL + o.MetricsPath, interval: o.PollInterval, header: o.Header}

	one := func(i int, gate func()) {
		rctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
		defer cancel()
		call := probe.Call{BaseURL: o.URL, Model: model, Prompt: ps[i], Header: o.Header,
			RequestID: fmt.Sprintf("%s-%s-%d", o.Name, lv.Slug(), i), StallTimeout: o.StallTimeout, Redact: o.red, Gate: gate}
		var text string
		if texts != nil {
			// --save-detailed writes vLLM's generated_texts: the whole text of each request.
			call.Output = &text
		}
		res := spec.Run(rctx, client, call)
		if texts != nil {
			texts[i] = o.red.String(text)
		}
		res.Events, res.RequestHeader, res.ResponseHeader = nil, nil, nil
		res.Scrub(o.red)
		results[i] = res
		finished.Add(1)
		bar.add(!res.Success)
	}

	// The first wave is built, then waits on release: each of its requests
	// blocks in its gate (probe.Call.Gate) with its body, headers and
	// request made and only the send left, and the window starts once all
	// of them are there, so that their send times are as close together as
	// the machine allows. A request that fails before its gate counts as
	// there; its goroutine still waits for the release before it goes on.
	release := make(chan struct{})
	var ready sync.WaitGroup
	firstOf := func(i int) {
		var once sync.Once
		there := func() { once.Do(ready.Done) }
		one(i, func() {
			there()
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
		there()
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	var start time.Time
	var reqs sync.WaitGroup
	switch lv.Type {
	case LoadConcurrency:
		var next atomic.Int64
		for w := 0; w < int(lv.Value) && w < n; w++ {
			ready.Add(1)
			reqs.Go(func() {
				firstOf(int(next.Add(1)) - 1)
				for ctx.Err() == nil {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					one(i, nil)
				}
			})
		}
		start = releaseWave(lctx, lr, poller, &wg, &ready, release)
	default:
		offs := arrivals(lv.Value, n, o.Seed)
		first := 0 // the requests sent at offset 0: the first wave
		for first < n && offs[first] == 0 {
			i := first
			ready.Add(1)
			reqs.Go(func() { firstOf(i) })
			first++
		}
		start = releaseWave(lctx, lr, poller, &wg, &ready, release)
		timer := time.NewTimer(0)
		<-timer.C
	dispatch:
		for i := first; i < n; i++ {
			if d := time.Until(start.Add(offs[i])); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					timer.Stop()
					break dispatch
				case <-timer.C:
				}
			}
			reqs.Go(func() { one(i, nil) })
		}
	}
	reqs.Wait()
	duration := time.Since(start)
	restoreGC()
	bar.finish(int(finished.Load()))
	stopPoll()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	// The multi-GPU presets report's script keeps polling until nothing is running,
	// waiting or swapped: the server may finish its bookkeeping just after the client saw [DONE].
	drainCtx, cancel := context.WithTimeout(ctx, drainTimeout)
	poller.drain(drainCtx, 50*time.Millisecond)
	cancel()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	lr.Results, lr.Texts = results, texts
	lr.Metrics = Calculate(results, duration, o.Percentiles)
	if o.Goodput != nil {
		lr.Goodput = judgeGoodput(results, duration, o.Goodput)
	}
	lr.Server = poller.stats()
	return lr, nil
}

// releaseWave starts the timed window. The /metrics poller takes its first
// sample just before it (that sample's offset is a small negative time): a
// scrape is the costliest request the server answers and the costliest
// response the client reads, and taken with the first wave it delayed the
// wave's arrivals at the server by milliseconds. Then the level's start,
// the poller's later samples (stopped by cancelling ctx, waited for with
// wg) and, last, the first wave, once all of it is ready to send.
func releaseWave(ctx context.Context, lr *LevelResult, p *poller, wg *sync.WaitGroup, ready *sync.WaitGroup, release chan struct{}) time.Time {
	ready.Wait()
	lr.Start = p.first(ctx)
	wg.Go(func() { p.run(ctx) })
	close(release)
	return lr.Start
}

// warmSlots is how many connections the warm-up of a level opens: one per
// concurrency slot, every request of an "inf" rate level (all sent at once),
// one for a finite rate (its connections open as its arrivals need them),
// plus one for the /metrics poller, which shares the client's pool.
func warmSlots(lv Level, n int) int {
	switch {
	case lv.Type == LoadConcurrency:
		return min(int(lv.Value), n) + 1
	case math.IsInf(lv.Value, 1):
		return n + 1
	}
	return 2
}

// warmUp sends warmSlots untimed requests (max_tokens 1) at once and waits
// for them: each opens a connection, which returns to the client's idle pool
// for the timed requests, and the process has run every code path of a
// request before the first timed one. Their results are dropped; a failed
// warm-up is logged (the timed requests then report the server's state).
func warmUp(ctx context.Context, client *http.Client, o *Options, model string, lv Level, prompt string) {
	k := warmSlots(lv, o.Requests)
	mod := o.module()
	mod.MaxTokens = 1
	spec, err := probe.Compile(o.Name+"-warmup", mod)
	if err != nil {
		level.Warn(o.Logger).Log("msg", "no warm-up: its request does not compile", "err", err)
		return
	}
	var failed atomic.Int64
	var wg sync.WaitGroup
	release := make(chan struct{})
	for w := 0; w < k; w++ {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
			defer cancel()
			<-release
			res := spec.Run(rctx, client, probe.Call{BaseURL: o.URL, Model: model, Prompt: prompt, Header: o.Header,
				RequestID: fmt.Sprintf("%s-%s-warmup-%d", o.Name, lv.Slug(), w), StallTimeout: o.StallTimeout, Redact: o.red})
			if !res.Success {
				failed.Add(1)
			}
		})
	}
	close(release)
	wg.Wait()
	if f := failed.Load(); f > 0 && ctx.Err() == nil {
		level.Warn(o.Logger).Log("msg", "warm-up requests failed; the timed requests follow anyway", "level", lv, "failed", f, "sent", k)
	}
}

// timedWindowGC applies GCMemoryLimit (see Options) and returns the function
// that restores the previous settings; calling it again does nothing.
func timedWindowGC(limit int64) (restore func()) {
	if limit <= 0 {
		return func() {}
	}
	runtime.GC() // start the window with the warm-up's garbage collected
	pct := debug.SetGCPercent(-1)
	prev := debug.SetMemoryLimit(limit)
	var once sync.Once
	return func() {
		once.Do(func() {
			debug.SetGCPercent(pct)
			debug.SetMemoryLimit(prev)
		})
	}
}

// poller scrapes /metrics every interval with collector.Scrape.
type poller struct {
	client   *http.Client
	url      string
	header   http.Header
	interval time.Duration
	start    time.Time

	mu      sync.Mutex
	samples []ServerSample
	errors  int
}

// pollTimeout bounds one scrape: at least two seconds, so that a slow
// /metrics on a busy server is late rather than lost.
func (p *poller) pollTimeout() time.Duration { return max(p.interval, 2*time.Second) }

// first takes the sample before the window and returns the window's start,
// the moment after it, from which every sample's offset is measured.
func (p *poller) first(ctx context.Context) (start time.Time) {
	p.start = time.Now()
	p.pollCounted(ctx)
	start = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.samples {
		p.samples[i].Offset -= start.Sub(p.start)
	}
	p.start = start
	return start
}

// run polls every interval, from one interval after the start, until ctx
// ends.
func (p *poller) run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.pollCounted(ctx)
	}
}

// pollCounted polls once and counts a failure (or a timeout) that happened
// while ctx was live.
func (p *poller) pollCounted(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, p.pollTimeout())
	defer cancel()
	if !p.poll(sctx) && ctx.Err() == nil {
		p.mu.Lock()
		p.errors++
		p.mu.Unlock()
	}
}

// drainTimeout bounds the polls after the last request of a level.
const drainTimeout = 5 * time.Second

// drain polls until the server reports no running, waiting or swapped request,
// a poll fails, or ctx ends.
func (p *poller) drain(ctx context.Context, every time.Duration) {
	for {
		pctx, cancel := context.WithTimeout(ctx, p.pollTimeout())
		ok := p.poll(pctx)
		cancel()
		if !ok {
			if ctx.Err() == nil {
				p.mu.Lock()
				p.errors++
				p.mu.Unlock()
			}
			return
		}
		p.mu.Lock()
		s := p.samples[len(p.samples)-1]
		p.mu.Unlock()
		if !(s.Running > 0 || s.Waiting > 0 || s.Swapped > 0) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// poll scrapes once and records a sample; false when the scrape failed.
func (p *poller) poll(ctx context.Context) bool {
	client := p.client
	if len(p.header) > 0 {
		client = &http.Client{Transport: headerTransport{base: transportOf(p.client), header: p.header}}
	}
	snap, err := collector.Scrape(ctx, client, p.url)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		return false
	}
	s := ServerSample{
		Offset:           snap.Time.Sub(p.start),
		PromptTokens:     snap.Sum(func(m *collector.Model) float64 { return m.PromptTokens }),
		GenerationTokens: snap.Sum(func(m *collector.Model) float64 { return m.GenerationTokens }),
		Running:          snap.Running(),
		Waiting:          snap.Waiting(),
		Swapped:          snap.Sum(func(m *collector.Model) float64 { return m.Swapped }),
		KVUsage:          maxModels(snap, func(m *collector.Model) float64 { return m.KVUsage }),
		CPUKVUsage:       maxModels(snap, func(m *collector.Model) float64 { return m.CPUKVUsage }),
		PromptTPS:        math.NaN(),
		GenerationTPS:    math.NaN(),
	}
	if k := len(p.samples); k > 0 {
		prev := p.samples[k-1]
		if dt := (s.Offset - prev.Offset).Seconds(); dt > 0 {
			s.PromptTPS = counterIncrease(prev.PromptTokens, s.PromptTokens) / dt
			s.GenerationTPS = counterIncrease(prev.GenerationTokens, s.GenerationTokens) / dt
		}
	}
	p.samples = append(p.samples, s)
	return true
}

// counterIncrease is cur-prev, or cur when the counter was reset.
func counterIncrease(prev, cur float64) float64 {
	switch {
	case math.IsNaN(prev) || math.IsNaN(cur):
		return math.NaN()
	case cur < prev:
		return cur
	}
	return cur - prev
}

func (p *poller) stats() ServerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := ServerStats{Samples: p.samples, ScrapeErrors: p.errors, PromptTPS: math.NaN(), GenerationTPS: math.NaN()}
	if n := len(p.samples); n >= 2 {
		var pt, gt float64
		for i := 1; i < n; i++ {
			pt += counterIncrease(p.samples[i-1].PromptTokens, p.samples[i].PromptTokens)
			gt += counterIncrease(p.samples[i-1].GenerationTokens, p.samples[i].GenerationTokens)
		}
		if span := (p.samples[n-1].Offset - p.samples[0].Offset).Seconds(); span > 0 {
			st.PromptTPS, st.GenerationTPS = pt/span, gt/span
		}
	}
	mean := func(get func(ServerSample) float64) float64 {
		sum, k := 0.0, 0
		for _, s := range p.samples {
			if v := get(s); !math.IsNaN(v) {
				sum += v
				k++
			}
		}
		if k == 0 {
			return math.NaN()
		}
		return sum / float64(k)
	}
	maxOf := func(get func(ServerSample) float64) float64 {
		m := math.NaN()
		for _, s := range p.samples {
			if v := get(s); !math.IsNaN(v) && (math.IsNaN(m) || v > m) {
				m = v
			}
		}
		return m
	}
	st.MeanRunning = mean(func(s ServerSample) float64 { return s.Running })
	st.MeanWaiting = mean(func(s ServerSample) float64 { return s.Waiting })
	st.MeanSwapped = mean(func(s ServerSample) float64 { return s.Swapped })
	st.MeanKVUsage = mean(func(s ServerSample) float64 { return s.KVUsage })
	st.MaxKVUsage = maxOf(func(s ServerSample) float64 { return s.KVUsage })
	st.MaxCPUKVUsage = maxOf(func(s ServerSample) float64 { return s.CPUKVUsage })
	return st
}

func maxModels(s *collector.Snapshot, f func(*collector.Model) float64) float64 {
	out := math.NaN()
	for _, m := range s.Models {
		if v := f(m); !math.IsNaN(v) && (math.IsNaN(out) || v > out) {
			out = v
		}
	}
	return out
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// headerTransport adds headers (credentials) to the /metrics polls.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.header {
		if r.Header.Get(k) == "" {
			r.Header[k] = vs
		}
	}
	return t.base.RoundTrip(r)
}

// progress reports a level's progress on Options.Progress: a progress bar
// (github.com/schollz/progressbar) redrawn in place when ProgressBar is set
// (a terminal), otherwise one quiet line when the level ends.
type progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	label string
	total int
	start time.Time
	fail  atomic.Int64
}

func newProgress(w io.Writer, drawBar bool, label string, total int) *progress {
	p := &progress{w: w, label: label, total: total, start: time.Now()}
	if w != nil && drawBar {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("req"),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(w, "\n") }),
		)
	}
	return p
}

// add counts one finished request.
func (p *progress) add(failed bool) {
	if failed {
		if n := p.fail.Add(1); p.bar != nil {
			p.bar.Describe(fmt.Sprintf("%s (%d failed)", p.label, n))
		}
	}
	if p.bar != nil {
		_ = p.bar.Add(1)
	}
}

// finish ends the bar, or writes the quiet line: "concurrency 4: 20 requests in 1.2s, 3 failed".
func (p *progress) finish(done int) {
	switch {
	case p.bar != nil:
		_ = p.bar.Finish()
	case p.w != nil:
		line := fmt.Sprintf("%s: %d/%d requests in %s", p.label, done, p.total, time.Since(p.start).Round(time.Millisecond))
		if f := p.fail.Load(); f > 0 {
			line += ", " + strconv.FormatInt(f, 10) + " failed"
		}
		_, _ = io.WriteString(p.w, line+"\n")
	}
}
