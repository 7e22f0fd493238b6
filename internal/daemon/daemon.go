// Package daemon wires vllm_prober together: the configuration and its reloads,
// target discovery and sharding, the prober and collector managers, the
// baseline and regression series and the Prometheus registry. Its pages and
// endpoints are internal/web's, which sees the daemon through web.Options
// only; cmd/vllm_prober parses flags, calls New, builds the pages over the
// daemon (internal/daemonweb) and hands them to Run.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/exporter-toolkit/web"
	promdiscovery "github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	slogkit "github.com/tjhop/slog-gokit"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/internal/discovery"
	"github.com/vllm-prober/vllm_prober/internal/exposition"
	"github.com/vllm-prober/vllm_prober/internal/genaiotel"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/safemetric"
	"github.com/vllm-prober/vllm_prober/internal/shard"
	"github.com/vllm-prober/vllm_prober/prober"
)

// Defaults of Options.
const (
	DefaultTelemetryPath   = "/metrics"
	DefaultHistoryLimit    = prober.DefaultHistoryLimit
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultListenAddress is our port: the Prometheus 9100-9999 default port
	// allocation range is full.
	DefaultListenAddress = ":10040"
)

// Options configure a Daemon.
type Options struct {
	// ConfigFile is the configuration file; Reload re-reads it.
	ConfigFile string
	// WebFlags are exporter-toolkit's listener, TLS and basic-auth settings. When
	// nil, Run serves no HTTP (tests serve the pages themselves).
	WebFlags *web.FlagConfig
	// TelemetryPath is where /metrics is served (default DefaultTelemetryPath).
	TelemetryPath string
	// HistoryLimit is how many recent probes per (target, module) the landing page
	// shows, plus up to as many older failures (default DefaultHistoryLimit).
	HistoryLimit int
	// ShutdownTimeout bounds how long Run waits for HTTP requests in flight when
	// its context is cancelled (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Registry receives every metric; a fresh one when nil.
	Registry *prometheus.Registry
	// WebLogger is exporter-toolkit's logger (see NewWebLogger); when nil, one is
	// bridged from the daemon's logger.
	WebLogger *slog.Logger
	// ProbeWindow fixes how far back the probe means of the regression
	// series reach; 0 (the default) takes the larger of the rate window and
	// three probe intervals of each target.
	ProbeWindow time.Duration
	// ShardCount and ShardIndex split the targets, static and discovered, over
	// replicas (shard.Targets): this daemon probes shard ShardIndex of
	// ShardCount. A ShardCount of 0 means 1 (every target).
	ShardCount, ShardIndex int
	// DisableReload turns POST /-/reload off (--no-web.enable-reload); SIGHUP
	// still reloads.
	DisableReload bool
	// Vantage names where this replica probes from (--vantage): every series
	// of the daemon's registry gets a VantageLabel label with this value. Empty
	// (one vantage, the default): no such label; global.vantage of the
	// configuration file then names it (vantage.go).
	Vantage string
	// ProbeOnly leaves every target's /metrics to a scraping vantage
	// (--probe-only; global.probe_only does the same).
	ProbeOnly bool
	// OTLPEndpoint, when set, is the OTLP/HTTP metrics URL Run pushes the
	// probes' GenAI metrics to (--otlp.endpoint), every OTLPInterval
	// (--otlp.interval); unset, global.otlp of the configuration file as the
	// daemon started says (internal/genaiotel).
	OTLPEndpoint string
	OTLPInterval time.Duration
}

// VantageLabel is the label --vantage adds to every series of the daemon.
const VantageLabel = "vantage"

// ValidateVantage checks a --vantage value.
func ValidateVantage(v string) error { return config.ValidateVantage(v) }

// Daemon is one running vllm_prober.
type Daemon struct {
	opts   Options
	logger log.Logger
	reg    *prometheus.Registry
	// registerer is reg, with the vantage label when Options.Vantage is set:
	// every metric of the daemon registers through it.
	registerer prometheus.Registerer
	// cache renders /metrics; own gathers what it does not hold
	// (exposition.Registerer routes every registration).
	cache *exposition.Cache
	own   *prometheus.Registry
	// vantage is the vantage label of every series: Options.Vantage, else
	// global.vantage as the daemon started (vantage.go).
	vantage string
	sc      *config.SafeConfig
	probes  *prober.Manager
	bursts  *prober.Burster // POST /burst (burst.go)
	coll    *collector.Manager
	cmp     *compare.Collector

	// targets is vllm_prober_targets{source}.
	targets *prometheus.GaugeVec

	// applyMu serialises changes of what the managers run: reloads and
	// discovery updates. It guards the fields below.
	applyMu sync.Mutex
	// file is the configuration file the managers run; running is the
	// configuration they run: file's, with this shard's share of the static
	// and discovered targets. Read-only.
	file    *config.Config
	running atomic.Pointer[config.Config]
	// otlp is the OTLP push while Run runs (otlp.go), else nil.
	otlp atomic.Pointer[genaiotel.Exporter]
	// sd is the one discovery manager (Prometheus'), built once; sdCancel
	// stops it. sdSets are the discovery sections of file, applied to sd
	// while Run runs (sdRunning); sdGroups are the target groups it last
	// sent.
	sd        *promdiscovery.Manager
	sdCancel  context.CancelFunc
	sdSets    map[string]promdiscovery.Configs
	sdRunning bool
	sdGroups  map[string][]*targetgroup.Group
	// discoveryCounters count what discovery drops: bad prices, reserved labels.
	discoveryCounters discovery.Counters

	// red is the one redactor: the configuration's secrets (set on every
	// applied configuration) and the tokens the HTTP clients obtained. The
	// logger, the prober and every page go through it.
	red *redact.Redactor
	// clients is the one HTTP client pool of the prober and the collector.
	clients *httpclient.Pool

	ready   atomic.Bool
	started atomic.Bool
}

// encodeAhead is how often the exposition cache encodes the targets whose
// series changed (exposition.Cache.Run). A render encodes what changed since
// the last pass: at 1,000 targets changing 8 times a minute each, about 130
// targets a second, 50 ms of a render's CPU with passes a second apart. A
// pass versions the targets the last render knew: 0.05 ms at 1,000 targets
// of a fake component (exposition's BenchmarkPassNothingChanged; 0.56 ms
// when a pass listed, sorted and snapshotted them as a render does, about
// 2 ms with the daemon's components then, 4 % of its CPU).
const encodeAhead = 250 * time.Millisecond

// New loads the configuration file, builds the registry and the managers and
// returns a Daemon ready to Run. An invalid configuration file is an error.
//
// logger gets the daemon's redaction (every value, every level) and then a
// "caller" key, so it should carry none: a caller bound above the redaction
// would name the redaction's own line (log.go:30), not the line that logged.
func New(opts Options, logger log.Logger) (*Daemon, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if opts.ConfigFile == "" {
		return nil, errors.New("no configuration file given")
	}
	if opts.TelemetryPath == "" {
		opts.TelemetryPath = DefaultTelemetryPath
	}
	if err := checkTelemetryPath(opts.TelemetryPath); err != nil {
		return nil, err
	}
	if opts.HistoryLimit <= 0 {
		opts.HistoryLimit = DefaultHistoryLimit
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.ShardCount == 0 {
		opts.ShardCount = 1
	}
	if err := shard.Validate(opts.ShardCount, opts.ShardIndex); err != nil {
		return nil, err
	}
	if err := ValidateVantage(opts.Vantage); err != nil {
		return nil, err
	}
	registry := opts.Registry
	if registry == nil {
		registry = prometheus.NewRegistry()
	}
	red := redact.New()
	// Every level, every component; the caller is bound below the redaction,
	// at the depth of the line that logs.
	logger = log.With(redact.Logger(logger, red), "caller", log.DefaultCaller)
	// The vantage label is added once, where every metric of the daemon is
	// registered, rather than by each component (as Prometheus' external
	// labels would add it on the server side).
	vantage := startVantage(opts, logger)
	// /metrics is rendered from the exposition cache: the targets' series
	// (the prober's, the collector's, the joins': exposition.Partitioned)
	// are encoded again only when they changed; own holds the rest.
	var labels prometheus.Labels
	var main, rest prometheus.Registerer = registry, prometheus.NewRegistry()
	own := rest.(*prometheus.Registry)
	if vantage != "" {
		labels = prometheus.Labels{VantageLabel: vantage}
		main, rest = prometheus.WrapRegistererWith(labels, registry), prometheus.WrapRegistererWith(labels, own)
	}
	cache := exposition.NewCache(labels)
	reg := exposition.NewRegisterer(cache, main, rest)
	d := &Daemon{opts: opts, logger: logger, reg: registry, registerer: reg, vantage: vantage, red: red, clients: httpclient.New(red),
		cache: cache, own: own}

	if err := reg.Register(versioncollector.NewCollector("vllm_prober")); err != nil {
		return nil, fmt.Errorf("registering the build info collector: %w", err)
	}
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("registering the Go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("registering the process collector: %w", err)
	}

	d.targets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm_prober_targets",
		Help: "Targets this replica probes (its shard), by where they come from: static (targets) or discovered (file_sd_configs, http_sd_configs, kubernetes_sd_configs, dns_sd_configs).",
	}, []string{"source"})
	shardInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm_prober_shard_info",
		Help: "Always 1; this replica's shard index and the shard count (--shard.index, --shard.count).",
	}, []string{"index", "count"})
	shardInfo.WithLabelValues(fmt.Sprint(opts.ShardIndex), fmt.Sprint(opts.ShardCount)).Set(1)
	for _, c := range []prometheus.Collector{d.targets, shardInfo} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the daemon's metrics: %w", err)
		}
	}

	sd, sdCancel, err := newDiscoveryManager(reg, newSlogLogger(logger, "discovery"))
	if err != nil {
		return nil, fmt.Errorf("building the discovery manager: %w", err)
	}
	d.sd, d.sdCancel = sd, sdCancel
	d.discoveryCounters = discovery.Counters{InvalidPrices: discovery.NewInvalidPrices(), DroppedLabels: discovery.NewDroppedLabels()}
	if err := errors.Join(reg.Register(d.discoveryCounters.InvalidPrices), reg.Register(d.discoveryCounters.DroppedLabels)); err != nil {
		return nil, fmt.Errorf("registering the discovery metrics: %w", err)
	}

	// The runtime graph is a DAG but for one edge, each built once from what it reads: the
	// collector reads its targets' /metrics; the prober reads the
	// collector's load (the load a probe met over its lifetime); compare
	// joins both with the baselines.
	collectErrs, err := safemetric.New(reg, log.With(logger, "component", "collect"))
	if err != nil {
		return nil, fmt.Errorf("registering the collection error counter: %w", err)
	}
	droppedValues := collector.NewDroppedValues()
	if err := reg.Register(droppedValues); err != nil {
		return nil, fmt.Errorf("registering the collector's metrics: %w", err)
	}
	// The one edge back: a scrape waits until the target has no probe in
	// flight (collector.Options.Quiet), read from the prober once it runs.
	d.coll = collector.NewManager(collector.Options{Registerer: reg, Logger: log.With(logger, "component", "collector"), Clients: d.clients, Redactor: d.red,
		Errors: collectErrs, DroppedValues: droppedValues,
		Quiet: func(ctx context.Context, target string) { d.probes.WaitIdle(ctx, target) },
		// A scrape's arrival and a probe's completion compute the baseline
		// joins they change; /metrics reads them (compare.Options.Pushed).
		Scraped: func(target string) { d.cmp.Scraped(target) }})
	d.probes = prober.NewManager(prober.Options{Registerer: reg, Logger: log.With(logger, "component", "prober"),
		Clients: d.clients, Redactor: d.red, HistoryLimit: opts.HistoryLimit, Errors: collectErrs, Load: d.coll.LoadDuring,
		RecordPrefix: recordPrefix(opts.ShardIndex, opts.ShardCount),
		Sleeping:     d.coll.SleepState, ScrapeAnswered: d.coll.ScrapeAnswered,
		Finished: func(f prober.Finished) {
			if e := d.otlp.Load(); e != nil {
				e.Record(f)
			}
		},
		Recorded: func(target, module string) { d.cmp.ProbeRecorded(target, module) }})
	d.bursts = prober.NewBurster(reg, d.probes)
	d.cmp = compare.New(compare.Options{Registerer: reg, Logger: log.With(logger, "component", "compare"),
		Probes: compare.FromProber(d.probes), Server: d.coll, Gateways: d.probes, Window: opts.ProbeWindow, Errors: collectErrs, Pushed: true})
	d.sc = config.NewSafeConfig(reg, d.apply)

	if _, err := d.sc.ReloadConfig(opts.ConfigFile); err != nil {
		return nil, err
	}
	cfg := d.sc.Config()
	level.Info(logger).Log("msg", "Loaded config file", "file", opts.ConfigFile, "static_targets", len(cfg.Targets),
		"discovery", cfg.Discovery.Enabled(), "shard_index", opts.ShardIndex, "shard_count", opts.ShardCount)
	return d, nil
}

// CheckConfig is --config.check: the daemon's own load (New) of
// opts.ConfigFile — the file, its baseline files, the files its
// file_sd_configs match, every target's HTTP client — on a private registry,
// without running anything. It fails when New would, with New's error, and
// when a credential file of an HTTP client cannot be read, in the words a
// probe would fail with (config.CheckCredentialFiles), as promtool does.
func CheckConfig(opts Options, logger log.Logger) error {
	opts.Registry = prometheus.NewRegistry()
	d, err := New(opts, logger)
	if err != nil {
		return err
	}
	// The daemon loads a file whose credential files are absent (each probe
	// reports them); a check says so now.
	return d.Config().CheckCredentialFiles(context.Background())
}

func checkTelemetryPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("telemetry path %q must start with /", p)
	}
	switch p {
	case "/", "/probe", "/probe/record", "/target", "/config", "/-/reload", "/-/healthy", "/-/ready", "/gate", "/burst":
		return fmt.Errorf("telemetry path %q collides with another endpoint", p)
	}
	return nil
}

// Config returns the configuration file currently in force (read-only). Its
// Targets are the static targets of every shard; Running has those probed.
func (d *Daemon) Config() *config.Config { return d.sc.Config() }

// Running returns the configuration the managers run (read-only): the file's,
// with Targets this shard's share of the static and discovered targets.
func (d *Daemon) Running() *config.Config { return d.running.Load() }

// Registry returns the registry of every series /metrics serves.
func (d *Daemon) Registry() *prometheus.Registry { return d.reg }

// Exposition returns the cache /metrics is rendered from and the gatherer
// of the series it does not hold (exposition.HandlerOpts.Rest).
func (d *Daemon) Exposition() (*exposition.Cache, prometheus.Gatherer) {
	return d.cache, prometheus.Gatherers{d.own, d.cache.Shared()}
}

// Registerer is Registry, with the vantage label when Options.Vantage is set.
func (d *Daemon) Registerer() prometheus.Registerer { return d.registerer }

// Options returns the daemon's options, defaults filled in.
func (d *Daemon) Options() Options { return d.opts }

// Logger returns the daemon's logger, which scrubs every value it logs.
func (d *Daemon) Logger() log.Logger { return d.logger }

// Redactor returns the one redactor of the configuration's secrets and the
// tokens the HTTP clients obtained.
func (d *Daemon) Redactor() *redact.Redactor { return d.red }

// Clients returns the HTTP client pool of the prober and the collector.
func (d *Daemon) Clients() *httpclient.Pool { return d.clients }

// Prober returns the prober's manager.
func (d *Daemon) Prober() *prober.Manager { return d.probes }

// Bursts returns the runner of POST /burst's extra probes.
func (d *Daemon) Bursts() *prober.Burster { return d.bursts }

// Collector returns the collector's manager.
func (d *Daemon) Collector() *collector.Manager { return d.coll }

// Baselines returns the comparisons of the live probes with the baselines.
func (d *Daemon) Baselines() *compare.Collector { return d.cmp }

// Ready says whether Run runs (/-/ready).
func (d *Daemon) Ready() bool { return d.ready.Load() }

// Reload re-reads the configuration file. On any error the running configuration
// stays in place and the error is returned; an unchanged file is a no-op.
func (d *Daemon) Reload() error {
	changed, err := d.sc.ReloadConfig(d.opts.ConfigFile)
	switch {
	case err != nil:
		err = errors.New(d.scrub(err.Error()))
		level.Error(d.logger).Log("msg", "Error reloading config", "file", d.opts.ConfigFile, "err", err)
		return err
	case !changed:
		level.Debug(d.logger).Log("msg", "Config file unchanged, reload skipped", "file", d.opts.ConfigFile)
	default:
		level.Info(d.logger).Log("msg", "Reloaded config file", "file", d.opts.ConfigFile, "static_targets", len(d.sc.Config().Targets), "running_targets", len(d.Running().Targets))
	}
	return nil
}

// Run runs the probes, the collector and target discovery, reloads on SIGHUP and, when WebFlags is
// set, serves handler (the pages over this daemon, which cmd/vllm_prober builds with
// internal/web). It returns when ctx is cancelled (nil) or the HTTP server
// fails, after cancelling probes in flight and waiting for every goroutine it
// started. A Daemon runs at most once.
func (d *Daemon) Run(ctx context.Context, handler http.Handler) error {
	if d.opts.WebFlags != nil && handler == nil {
		return errors.New("daemon: WebFlags set but no handler to serve")
	}
	if !d.started.CompareAndSwap(false, true) {
		return errors.New("daemon is already running")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stopOTLP, otlpErr := d.startOTLP(ctx)
	if otlpErr != nil {
		return otlpErr
	}
	// Run's wg.Wait comes before: the last push flushes once every probe
	// has ended and been recorded.
	defer stopOTLP()

	var wg sync.WaitGroup
	wg.Go(func() { d.probes.Run(ctx) })
	wg.Go(d.bursts.Run(ctx)) // bursts are accepted from now on
	wg.Go(func() { d.coll.Run(ctx) })
	// The targets whose series changed are encoded ahead of the next
	// scrape of /metrics, which then mostly writes bytes.
	wg.Go(func() { d.cache.Run(ctx, encodeAhead) })
	d.runDiscovery(ctx, &wg)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				level.Info(d.logger).Log("msg", "Received SIGHUP, reloading config")
				_ = d.Reload() // logged by Reload
			}
		}
	})

	var (
		srv     *http.Server
		srvDone = make(chan error, 1)
	)
	if d.opts.WebFlags != nil {
		webLogger := d.opts.WebLogger
		if webLogger == nil {
			webLogger = NewWebLogger(d.logger)
		}
		srv = &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			// Requests in flight (a /probe) see their context cancelled on shutdown.
			BaseContext: func(net.Listener) context.Context { return ctx },
			ErrorLog:    slog.NewLogLogger(webLogger.Handler(), slog.LevelError),
		}
		wg.Go(func() {
			srvDone <- web.ListenAndServe(srv, d.opts.WebFlags, webLogger)
		})
	}
	d.ready.Store(true)
	level.Info(d.logger).Log("msg", "vllm_prober is ready")

	var err error
	select {
	case <-ctx.Done():
	case err = <-srvDone:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("http server: %w", err)
		}
	}
	d.ready.Store(false)
	level.Info(d.logger).Log("msg", "Shutting down")
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), d.opts.ShutdownTimeout)
		defer scancel()
		cancel() // probes and /probe requests in flight stop now
		if serr := srv.Shutdown(sctx); serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			level.Warn(d.logger).Log("msg", "HTTP server did not shut down cleanly", "err", serr)
		}
		if err == nil {
			// ListenAndServe returns once its listeners closed.
			if serr := <-srvDone; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
				err = fmt.Errorf("http server: %w", serr)
			}
		}
	}
	cancel()
	wg.Wait()
	return err
}

// NewWebLogger bridges exporter-toolkit's *slog.Logger to a go-kit logger, which
// does the level filtering. The bridge adds the caller itself and leaves the
// timestamp to logger, so logger should carry a timestamp but no caller.
func NewWebLogger(logger log.Logger) *slog.Logger { return newSlogLogger(logger, "web") }

// newSlogLogger bridges a *slog.Logger of component (exporter-toolkit's,
// Prometheus' discovery's) to logger, as NewWebLogger does.
func newSlogLogger(logger log.Logger, component string) *slog.Logger {
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelDebug)
	return slog.New(noTimeHandler{slogkit.NewGoKitHandler(log.With(logger, "component", component), lvl)})
}

// noTimeHandler drops slog's record time: the go-kit logger stamps its own "ts".
type noTimeHandler struct{ slog.Handler }

func (h noTimeHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{}
	return h.Handler.Handle(ctx, r)
}

func (h noTimeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return noTimeHandler{h.Handler.WithAttrs(attrs)}
}

func (h noTimeHandler) WithGroup(name string) slog.Handler {
	return noTimeHandler{h.Handler.WithGroup(name)}
}

// scrub removes the running configuration's secrets from s.
func (d *Daemon) scrub(s string) string { return d.red.String(s) }

// recordPrefix starts the record ids of a replica: none for one replica,
// "s<index>" for a shard of a sharded fleet, so that a record id names the
// replica that keeps it (prober.Manager.RecordByID).
func recordPrefix(index, count int) string {
	if count <= 1 {
		return ""
	}
	return fmt.Sprintf("s%d", index)
}
