// Package web is vllm_prober's HTTP side: the landing page, the target
// pages, /metrics, /probe (targets and URL probes), /probe/record, /config,
// /gate, /burst, /-/reload, /-/healthy and /-/ready. It sees the running
// daemon only through Options: functions and small interfaces, never the
// daemon or a manager, so that what a page may read or do is written down in
// one place.
package web

import (
	"context"
	"net/http"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/internal/exposition"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Options are what the pages read and may do. Every field is required.
type Options struct {
	Logger log.Logger
	// Gatherer is what the telemetry path serves; Registerer counts its
	// requests (promhttp.InstrumentMetricHandler).
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	// Exposition, when set, renders the telemetry path from its cache
	// (series it does not hold from Own); Gatherer then serves only the
	// formats the cache does not encode.
	Exposition    *exposition.Cache
	Own           prometheus.Gatherer
	TelemetryPath string
	// HistoryLimit is --history.limit, which the pages name when a record
	// has aged out.
	HistoryLimit int
	// DisableReload turns POST /-/reload off (--no-web.enable-reload).
	DisableReload bool
	// RegressionThreshold is the latency regression alert's threshold
	// (alerts.latency_regression in mixin/slo.yml): a pair whose TTFT or TPOT
	// ratio exceeds it is "regressed" and its ratio is coloured.
	RegressionThreshold float64

	// Config is the configuration file in force (/config); Running is the
	// configuration the managers run, with this shard's targets. Both
	// read-only.
	Config, Running func() *config.Config
	// Reload re-reads the configuration file (POST /-/reload).
	Reload func() error
	// Ready says whether the daemon runs (/-/ready).
	Ready func() bool

	Scrubber  Scrubber
	Probes    Probes
	Bursts    Bursts
	Baselines Baselines
	Scrapes   Scrapes
	Clients   Clients
	// Vantage is the vantage this replica probes from ("" for none): GET
	// /gate names its own verdict after it among global.gate.vantages'.
	Vantage string
}

// Scrubber removes the configured secrets from a text and the sensitive
// headers' values from a header (the daemon's redactor).
type Scrubber interface {
	String(s string) string
	Header(h http.Header)
}

// Probes are the prober's answers and its on-demand probes.
type Probes interface {
	ProbeModelNow(ctx context.Context, target, module, model string) (*probe.Result, *prometheus.Registry, error)
	ProbeURLNow(ctx context.Context, u prober.URLProbe) (*probe.Result, *prometheus.Registry, error)
	Record(target, module, model string, id uint64) (prober.Record, bool)
	RecordByID(rid string) (rec prober.Record, target, module string, err error)
	TargetStatus(name string) (prober.TargetStatus, bool)
	Stats(target, module string) (prober.PairStats, bool)
	AllStats() []prober.PairStats
	Model(target string) string
}

// Bursts starts the extra probes of POST /burst.
type Bursts interface {
	Start(target, module string, probes int, within time.Duration) (prober.BurstPlan, error)
}

// Baselines are the live probes' comparisons with their baselines.
type Baselines interface {
	Compare(target, module string) (compare.Comparison, bool)
	CompareWindow(target, module string, window time.Duration) (cmp compare.WindowComparison, hasBaseline, ok bool)
	// GatewayJoins are a gateway target's joins with its members, per
	// module (the gateway table of its page).
	GatewayJoins(target string) []compare.GatewayModuleJoin
}

// Scrapes are the collector's last scrapes.
type Scrapes interface {
	LastScrape(target string) (collector.ScrapeState, bool)
}

// Clients lends the HTTP client of a client configuration (URL probes').
type Clients interface {
	Acquire(cfg commoncfg.HTTPClientConfig) (*http.Client, error)
	Release(client *http.Client)
}

// handler serves the pages from its options.
type handler struct {
	opts      Options
	logger    log.Logger
	probes    Probes
	bursts    Bursts
	cmp       Baselines
	scrapes   Scrapes
	clients   Clients
	scrubber  *scrubber
	threshold float64
}

// New returns the handler of every page and endpoint.
func New(o Options) http.Handler { return newHandler(o).routes() }

func newHandler(o Options) *handler {
	h := &handler{opts: o, logger: o.Logger, probes: o.Probes, bursts: o.Bursts, cmp: o.Baselines,
		scrapes: o.Scrapes, clients: o.Clients, scrubber: &scrubber{red: o.Scrubber}, threshold: o.RegressionThreshold}
	if h.logger == nil {
		h.logger = log.NewNopLogger()
	}
	return h
}

// scrub removes the configured secrets from s.
func (h *handler) scrub(s string) string { return h.scrubber.scrub(s) }
