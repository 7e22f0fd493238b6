// Package compare joins what the prober measures, what the collector scrapes
// and the benchmark baselines of the configuration: every series that needs
// more than one of them. It exports each baseline's points (vllm_baseline_*);
// per target the values the baseline expects, interpolated on the baseline
// curve at concurrency running + waiting (from the collector) + 1 (the probe
// itself), and regression ratios oriented so that above 1 is worse than the
// baseline (probe latencies compared at the load each probe met over its
// lifetime, probe.Result.Load; server-side figures at the latest scraped
// load); and the TTFT gap between the probes and the server and the
// server's headroom (join.go).
//
// Every value is computed from a ProbeSource (the prober) and a
// ServerSource (the collector), which never read this package: the
// expected values and regression ratios when their inputs change, at a
// probe's completion and a scrape's arrival, where the caller says so
// (Options.Pushed, joins.go), else at every collection; the other joins at
// every collection. The series' labels are built once per target (and
// resolved model) after SetTargets, and the baseline point series once per
// SetTargets (series.go).
package compare

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/internal/safemetric"
	"github.com/vllm-prober/vllm_prober/prober"
)

// The daemon's managers fit the interfaces.
var (
	_ ServerSource = (*collector.Manager)(nil)
	_ StatsSource  = (*prober.Manager)(nil)
)

// ProbeSource is what the regression series need from the prober.
type ProbeSource interface {
	// Window returns the probe statistics of (target, module) as they are
	// now, one snapshot: the means since several times are then those of
	// one set of probes, never of a probe recorded in between.
	Window(target, module string) ProbeWindow
	// Model is the resolved model of target, "" if unknown.
	Model(target string) string
	// MeanTTFT is the mean TTFT in seconds of the successful probes of
	// target (all modules) that started at or after since, and how many
	// there were.
	MeanTTFT(target string, since time.Time) (seconds float64, n int)
}

// ProbeWindow is one snapshot of a (target, module)'s probe statistics.
type ProbeWindow interface {
	// Means returns the means of the successful probes that started at
	// or after since.
	Means(since time.Time) prober.Means
}

// ServerSource is what the regression series need from the collector;
// *collector.Manager implements it.
type ServerSource interface {
	// Load is the latest running and waiting requests of target.
	Load(target string) (running, waiting float64, ok bool)
	// StreamOutputTokensPerSecond is target's output tokens per second of
	// request lifetime over the rate window: what one request receives,
	// however busy the server is.
	StreamOutputTokensPerSecond(target string) (float64, bool)
	// View is what the last scrapes of target tell (join.go); false when
	// its last scrape failed.
	View(target string) (collector.View, bool)
}

// Collector exports the baseline and regression series. It is an unchecked
// prometheus.Collector: its static label names follow the configuration.
type Collector struct {
	logger log.Logger
	probes ProbeSource
	server ServerSource
	// gateways feeds the gateway joins (gateway_collect.go); nil: none.
	gateways GatewaySource
	errs     *safemetric.Errors
	now      func() time.Time

	mu     sync.RWMutex
	state  *state
	loaded *loadedConfig // the baselines of the configuration, read once by ApplyConfig
	window time.Duration // fixed probe window (Options.Window); 0 derives it per target

	// pushed: the joins are computed at ProbeRecorded and Scraped and read
	// by the collection (joins.go); else every collection computes them.
	pushed bool
	// epoch counts ServersChanged: a target's scrape-side joins computed
	// before the collector's targets last changed are computed again.
	epoch        atomic.Uint64
	computations atomic.Uint64 // joins computed (Computations)
	states       atomic.Uint64 // states built (state.gen)
}

type state struct {
	gen          uint64             // Collector.states when built: unique (ExpositionVersion)
	scrapedIndex map[string]int     // a scraped target's name -> its index in scraped
	static       []string           // static label names, sorted
	baselines    []*loaded          // configuration order
	byName       map[string]*loaded // by configuration name
	targets      []target           // configuration order, the targets with a baseline
	scraped      []scraped          // the targets the collector scrapes, sorted by name (join.go)
	gateways     []gatewayTarget    // configuration order (gateway_collect.go)
	byTarget     map[string]*loaded // target name -> its baseline
	// targetIndex: a baselined target's name -> its index in targets.
	targetIndex map[string]int
	descs       map[string]*prometheus.Desc
	// points are the baselines' vllm_baseline_* series, constant until
	// the next SetTargets: built once, sent as they are at every scrape.
	points []prometheus.Metric
}

type loaded struct {
	name, file string
	b          *baseline.Baseline
	curve      *baseline.Curve // b on the concurrency axis, built once per configuration
}

type target struct {
	name, model, baseline string
	modules               []string
	// goodput says, per module, why the baseline's attainment is not
	// comparable with the module's ("": it is; goodputWhy), decided once
	// per configuration.
	goodput []string
	static  []string // values in state.static order
	window  time.Duration
	series  *seriesCache // the target's series, built at its first scrape
	joins   *targetJoins // its expected values and ratios (joins.go)
}

// Options configure a Collector.
type Options struct {
	// Registerer receives the Collector (unchecked); nil: none.
	Registerer prometheus.Registerer
	Logger     log.Logger
	// Probes and Server are read at every scrape (for the expected values
	// and ratios, when their inputs change: Pushed); without either the
	// per-target series are not exported (the baselines' points are).
	Probes ProbeSource
	Server ServerSource
	// Gateways feeds the gateway joins; nil: none are exported.
	Gateways GatewaySource
	// Pushed says that the caller calls ProbeRecorded after every probe
	// recorded and Scraped after every scrape (and ServersChanged after
	// the scraped targets change), as the daemon does: the collection then
	// reads the joins those computed, computing only the ones whose probes
	// moved between the window's slices since. False: every collection
	// computes every join.
	Pushed bool
	// Window fixes how far back the probes' means reach; 0 (the default)
	// takes the larger of the rate window and three probe intervals of the
	// target.
	Window time.Duration
	// Errors counts and logs the series that cannot be built; nil leaves
	// them out silently. No series panics the collection.
	Errors *safemetric.Errors
}

// New returns a Collector of opts.
func New(opts Options) *Collector {
	logger := opts.Logger
	if logger == nil {
		logger = log.NewNopLogger()
	}
	c := &Collector{logger: logger, probes: opts.Probes, server: opts.Server, gateways: opts.Gateways, window: opts.Window, pushed: opts.Pushed, errs: opts.Errors, now: time.Now, state: &state{}}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(c)
	}
	return c
}

// loadedConfig is the baselines of one configuration, by name.
type loadedConfig struct {
	baselines []*loaded // configuration order
	byName    map[string]*loaded
}

// Apply is ApplyConfig followed by SetTargets(cfg).
func (c *Collector) Apply(cfg *config.Config) error {
	if err := c.ApplyConfig(cfg); err != nil {
		return err
	}
	return c.SetTargets(cfg)
}

// ApplyConfig loads every baseline file of cfg.Baselines, once per
// configuration: discovery refreshes only call SetTargets. A configuration
// entry picks the baseline of its name from its file, or the file's only
// baseline. On any error the previous baselines stay in force. The targets
// exported change only with SetTargets.
func (c *Collector) ApplyConfig(cfg *config.Config) error {
	lc := &loadedConfig{byName: map[string]*loaded{}}
	for _, ref := range cfg.Baselines {
		f, err := baseline.ReadFile(context.Background(), ref.File)
		if err != nil {
			return fmt.Errorf("baseline %q: %w", ref.Name, err)
		}
		b, ok := f.Lookup(ref.Name)
		if !ok {
			if len(f.Baselines) != 1 {
				names := make([]string, len(f.Baselines))
				for i, fb := range f.Baselines {
					names[i] = fb.Name
				}
				return fmt.Errorf("baseline %q: %s holds %d baselines (%v) and none is named %q", ref.Name, ref.File, len(f.Baselines), names, ref.Name)
			}
			b = f.Baselines[0]
		}
		if why := b.PlacementProblem(); why != "" {
			level.Warn(c.logger).Log("msg", "baseline gives no expected values", "baseline", ref.Name, "file", ref.File, "reason", why)
		}
		l := &loaded{name: ref.Name, file: ref.File, b: b, curve: b.Curve()}
		lc.baselines = append(lc.baselines, l)
		lc.byName[ref.Name] = l
	}
	c.mu.Lock()
	c.loaded = lc
	c.mu.Unlock()
	return nil
}

// SetTargets exports the regression series of cfg's targets against the
// baselines ApplyConfig loaded; it reads no file. On error (a target names a
// baseline not loaded) the previous targets stay in force.
func (c *Collector) SetTargets(cfg *config.Config) error {
	c.mu.RLock()
	lc := c.loaded
	c.mu.RUnlock()
	if lc == nil {
		lc = &loadedConfig{}
	}
	st := &state{baselines: lc.baselines, byName: lc.byName, byTarget: map[string]*loaded{}, targetIndex: map[string]int{}}
	st.static = cfg.StaticLabelNames()
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if t.ScrapeMetrics {
			st.scraped = append(st.scraped, scraped{name: t.Name, static: t.StaticLabelValues(st.static), price: t.PricePerHour})
		}
		if t.Baseline == "" {
			continue
		}
		l, ok := st.byName[t.Baseline]
		if !ok {
			return fmt.Errorf("target %q: unknown baseline %q", t.Name, t.Baseline)
		}
		st.byTarget[t.Name] = l
		goodput := make([]string, len(t.Modules))
		for i, m := range t.Modules {
			goodput[i] = goodputWhy(l.curve, cfg.Modules[m].SLOs)
		}
		st.targetIndex[t.Name] = len(st.targets)
		st.targets = append(st.targets, target{name: t.Name, model: t.Model, baseline: t.Baseline,
			modules: slices.Clone(t.Modules), goodput: goodput, static: t.StaticLabelValues(st.static),
			window: max(time.Duration(cfg.Global.RateWindow), 3*cfg.ProbeInterval(t)), series: &seriesCache{},
			joins: &targetJoins{pairs: make([]pairJoins, len(t.Modules))}})
	}
	slices.SortFunc(st.scraped, func(a, b scraped) int { return strings.Compare(a.name, b.name) })
	st.gen, st.scrapedIndex = c.states.Add(1), make(map[string]int, len(st.scraped))
	for i, t := range st.scraped {
		st.scrapedIndex[t.name] = i
	}
	st.gateways = gatewayTargets(cfg, st.static)
	st.descs = newDescs(st.static)
	for _, l := range st.baselines {
		st.points = appendBaseline(st.points, c.logger, st.descs, l)
	}
	c.mu.Lock()
	c.state = st
	c.mu.Unlock()
	return nil
}

// saturation is the saturation output throughput (tokens/s) of target's
// baseline.
func (st *state) saturation(target string) (float64, bool) {
	l, ok := st.byTarget[target]
	if !ok {
		return 0, false
	}
	v := l.b.SaturationOutputThroughput()
	return v, v > 0
}

// Metric names (docs/metrics.md).
const (
	mOutput      = "vllm_baseline_output_throughput_tokens_per_second"
	mRequests    = "vllm_baseline_request_throughput_requests_per_second"
	mLatency     = "vllm_baseline_latency_seconds"
	mSaturation  = "vllm_baseline_saturation_output_tokens_per_second"
	mExpTPOT     = "vllm_probe_expected_time_per_output_token_seconds"
	mExpTTFT     = "vllm_probe_expected_time_to_first_token_seconds"
	mExpGen      = "vllm_server_expected_generation_tokens_per_second"
	mExpGoodput  = "vllm_probe_expected_goodput_ratio"
	mRatio       = "vllm_probe_regression_ratio"
	mTTFTGap     = "vllm_probe_server_ttft_gap_seconds"
	mHeadroom    = "vllm_server_headroom_ratio"
	mSpecRatio   = "vllm_server_spec_decode_regression_ratio"
	labelTarget  = "target"
	labelModule  = "module"
	labelModel   = "model"
	labelBase    = "baseline"
	labelMetric  = "metric"
	labelLoad    = "load"
	labelLoadTyp = "load_type"
	labelStat    = "stat"
)

func newDescs(static []string) map[string]*prometheus.Desc {
	pair := append(append([]string{labelTarget, labelModule, labelModel}, static...), labelBase)
	tgt := append(append([]string{labelTarget, labelModel}, static...), labelBase)
	point := []string{labelBase, labelLoadTyp, labelLoad}
	d := map[string]*prometheus.Desc{
		mOutput:     prometheus.NewDesc(mOutput, "Output token throughput of the baseline at one load point.", point, nil),
		mRequests:   prometheus.NewDesc(mRequests, "Request throughput of the baseline at one load point.", point, nil),
		mLatency:    prometheus.NewDesc(mLatency, "Latency statistic of the baseline at one load point.", append(slices.Clone(point), labelMetric, labelStat), nil),
		mSaturation: prometheus.NewDesc(mSaturation, "Output token throughput at which the baseline saturates (its largest).", []string{labelBase}, nil),
		mExpTPOT:    prometheus.NewDesc(mExpTPOT, "Mean time per output token the baseline predicts at the live load (running + waiting + 1).", pair, nil),
		mExpTTFT:    prometheus.NewDesc(mExpTTFT, "Mean time to first token the baseline predicts at the live load (running + waiting + 1).", pair, nil),
		mExpGen:     prometheus.NewDesc(mExpGen, "Output token throughput the baseline predicts at the live load (running + waiting + 1).", tgt, nil),
		mExpGoodput: prometheus.NewDesc(mExpGoodput, "Goodput attainment (good / all requests, failed ones counted against it) the baseline predicts at the live load (running + waiting + 1). Only where the baseline's goodput objectives equal the module's.", pair, nil),
		mTTFTGap: prometheus.NewDesc(mTTFTGap, "Mean TTFT of the probes minus the server's mean TTFT (plus its mean queue time when its TTFT excludes queueing) over the same window.",
			append([]string{labelTarget, labelModel}, static...), nil),
		mHeadroom: prometheus.NewDesc(mHeadroom, "Remaining capacity (0-1) by resource: kv_cache, batch_slots, throughput and overall (their minimum).",
			append(append([]string{labelTarget, labelModel}, static...), "resource"), nil),
		mSpecRatio: prometheus.NewDesc(mSpecRatio, "The baseline's draft tokens accepted per speculative draft / the server's over the rate window (vllm_server_spec_decode_accepted_tokens_per_draft); above 1 is worse than the baseline. Absent unless both have speculative decoding.", tgt, nil),
		mRatio:     prometheus.NewDesc(mRatio, "Live probe latency / the baseline's expectation at the live load (E2E scaled to the probes' output length), or for output_throughput the expected / live output tokens per second of one request; above 1 is worse than the baseline.", append(slices.Clone(pair), labelMetric), nil),
	}
	gatewayDescs(static, d)
	costDescs(d, static)
	return d
}

// Describe sends nothing: the Collector is unchecked.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect computes every series now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.CollectShared(ch)
	c.mu.RLock()
	st := c.state
	c.mu.RUnlock()
	if st == nil {
		return
	}
	for _, name := range c.ExpositionTargets() {
		c.CollectTarget(name, ch)
	}
}

// appendBaseline appends the series of l's usable points to ms.
func appendBaseline(ms []prometheus.Metric, logger log.Logger, d map[string]*prometheus.Desc, l *loaded) []prometheus.Metric {
	gauge := func(desc *prometheus.Desc, v float64, lv ...string) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		m, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, v, lv...)
		if err != nil {
			level.Warn(logger).Log("msg", "baseline series not exported", "baseline", l.name, "err", err)
			return
		}
		ms = append(ms, m)
	}
	if v := l.b.SaturationOutputThroughput(); v > 0 {
		gauge(d[mSaturation], v, l.name)
	}
	seen := map[string]bool{}
	for i := range l.b.Points {
		p := &l.b.Points[i]
		if !p.Usable() {
			// The zeros of a run where nothing succeeded, or a run the import
			// excluded (too few successes), are not a measurement: the
			// expected values leave them out, and so does the export.
			continue
		}
		kind, v := p.LoadKey()
		load := baseline.Load(v).String()
		if seen[kind+"\x00"+load] {
			continue // e.g. the same concurrency at several request rates: the first one wins
		}
		seen[kind+"\x00"+load] = true
		if p.OutputThroughput != nil {
			gauge(d[mOutput], *p.OutputThroughput, l.name, kind, load)
		}
		if p.RequestThroughput != nil {
			gauge(d[mRequests], *p.RequestThroughput, l.name, kind, load)
		}
		for _, s := range []struct {
			metric baseline.Metric
			stats  *baseline.Stats
		}{{baseline.MetricTTFT, p.TTFT}, {baseline.MetricTPOT, p.TPOT}, {baseline.MetricITL, p.ITL}, {baseline.MetricE2E, p.E2E}} {
			if s.stats == nil {
				continue
			}
			if s.stats.Mean != nil {
				gauge(d[mLatency], *s.stats.Mean, l.name, kind, load, string(s.metric), "mean")
			}
			median := s.stats.Median
			if median == nil {
				if v, ok := s.stats.Percentiles["p50"]; ok {
					median = &v
				}
			}
			if median != nil {
				gauge(d[mLatency], *median, l.name, kind, load, string(s.metric), "median")
			}
			if v, ok := s.stats.P99(); ok {
				gauge(d[mLatency], v, l.name, kind, load, string(s.metric), "p99")
			}
		}
	}
	return ms
}

func (c *Collector) collectTarget(ch chan<- prometheus.Metric, st *state, server ServerSource, t *target, now time.Time) {
	sj := c.serverJoinOf(st, server, t)
	if !sj.ok {
		return
	}
	model := c.probes.Model(t.name)
	if model == "" {
		model = t.model
	}
	ts := t.series.get(c.logger, st.descs, t, model)
	send(ch, ts.expGen, sj.exp.OutputThroughput)
	for _, r := range sj.spec {
		c.errs.Send(ch, t.name, st.descs[mSpecRatio], prometheus.GaugeValue, r.ratio,
			append(append([]string{t.name, r.model}, t.static...), t.baseline)...)
	}
	for i := range t.modules {
		ms := &ts.modules[i]
		// Each probe is compared with the baseline at the load it saw when
		// it started; the scrape-time expectation only stands in while no
		// probe of the window succeeded.
		pj := c.pairJoinOf(st, t, i, sj, now)
		pexp := pj.exp
		if !pj.ok {
			pexp = sj.exp
		}
		send(ch, ms.expTPOT, pexp.TPOTMean)
		send(ch, ms.expTTFT, pexp.TTFTMean)
		if t.goodput[i] == "" {
			send(ch, ms.expGoodput, pexp.SLOAttainment) // NaN (not sent) without an expectation
		}
		for j, m := range baseline.Metrics {
			r := sj.throughput
			if m != baseline.MetricOutputThroughput {
				r = latencyRatio(m, pj.ratios, pj.live, pj.ok)
			}
			send(ch, ms.ratio[j], r)
		}
	}
}

// goodputWhy says why the baseline's attainment (curve) is not comparable
// with the live attainment of a module with objectives module; "" when it
// is: the baseline's goodput objectives equal the module's. An attainment
// against other objectives counts other requests as good.
func goodputWhy(c *baseline.Curve, module *config.Objectives) string {
	base, ok := c.GoodputObjectives()
	switch {
	case !ok:
		return "the baseline has no slo_attainment measured against stated objectives (baseline import --goodput states them)"
	case module == nil:
		return fmt.Sprintf("the module sets no goodput objectives (slos); the baseline's are %s", base.String())
	case *module != base:
		return fmt.Sprintf("the baseline's goodput objectives (%s) differ from the module's (%s): attainments against different objectives are not comparable", base.String(), module.String())
	}
	return ""
}

// specDecodeRatios are vllm_server_spec_decode_regression_ratio of target:
// the baseline's accepted tokens per draft over the live one, for each
// model of the target whose server counts drafts, when the baseline's runs
// had speculative decoding.
func specDecodeRatios(server ServerSource, target string, l *loaded) []specRatio {
	want, ok := l.b.SpecDecodeAcceptedPerDraft()
	if !ok {
		return nil
	}
	v, ok := server.View(target)
	if !ok {
		return nil
	}
	var out []specRatio
	for _, mv := range v.Models {
		if mv.Derived == nil {
			continue
		}
		// Higher is better, as for throughput: the ratio is expected / live.
		r := baseline.RegressionRatio(baseline.MetricOutputThroughput, mv.Derived.SpecAcceptedPerDraft, want)
		if math.IsNaN(r) {
			continue
		}
		out = append(out, specRatio{model: mv.Name, ratio: r})
	}
	return out
}
