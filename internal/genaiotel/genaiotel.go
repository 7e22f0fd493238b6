// Package genaiotel pushes the probes' client metrics over OTLP/HTTP under
// the OpenTelemetry GenAI semantic conventions, pinned to one version
// (Semconv), through the OpenTelemetry Go SDK: an opt-in view for pipelines
// that are OpenTelemetry-first (an OTel Collector, Prometheus 3's OTLP
// receiver, Mimir). It is never instead of the vllm_probe_* series.
//
// An Exporter is owned by the daemon: New starts the SDK's periodic reader,
// Shutdown flushes what was recorded since the last push and stops it.
package genaiotel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Semconv is the version of the GenAI semantic conventions whose metric and
// attribute names the push uses (status Development): the names of its
// docs/gen-ai/client-inference.md. docs/metrics.md maps them to the older
// v1.41.0 names.
const Semconv = "open-telemetry/semantic-conventions-genai v0.1.0"

// The metric names of Semconv.
const (
	MetricDuration         = "gen_ai.client.inference.duration"
	MetricTimeToFirstChunk = "gen_ai.client.inference.time_to_first_chunk"
	MetricTimePerChunk     = "gen_ai.client.inference.time_per_output_chunk"
	MetricInputTokens      = "gen_ai.client.inference.usage.input_tokens"
	MetricOutputTokens     = "gen_ai.client.inference.usage.output_tokens"
	MetricReasoningTokens  = "gen_ai.client.inference.usage.reasoning.output_tokens"
	scopeName              = "github.com/vllm-prober/vllm_prober"
)

// pushTimeout bounds a push: the SDK's default.
const pushTimeout = 30 * time.Second

// durationBuckets are the bucket boundaries the conventions advise for
// their durations, in seconds.
var durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

// Options configure an Exporter.
type Options struct {
	// Endpoint is the full OTLP/HTTP metrics URL (config.ValidateOTLPEndpoint).
	Endpoint string
	// Interval is how often the metrics are pushed (default
	// config.DefaultOTLPInterval).
	Interval time.Duration
	// Version is the service.version resource attribute.
	Version string
	// Vantage, when set, is the vllm_prober.vantage attribute of every
	// data point, as the vantage label of the vllm_probe_* series.
	Vantage string
	// Logger logs failed pushes; Registerer, when set, receives
	// vllm_prober_otlp_exports_total.
	Logger     log.Logger
	Registerer prometheus.Registerer
}

// Exporter records finished probes into the GenAI instruments and pushes
// them.
type Exporter struct {
	provider  *sdkmetric.MeterProvider
	transport *http.Transport
	vantage   string

	duration, firstChunk, perChunk metric.Float64Histogram
	inTokens, outTokens, reasoning metric.Int64Counter
}

// New starts an Exporter that pushes to opts.Endpoint every opts.Interval.
// Nothing is sent before the first interval ends; a push that fails is
// logged and counted, and the next one sends the cumulative values again.
func New(ctx context.Context, opts Options) (*Exporter, error) {
	if err := config.ValidateOTLPEndpoint(opts.Endpoint); err != nil {
		return nil, err
	}
	if opts.Endpoint == "" {
		return nil, errors.New("genaiotel: no endpoint")
	}
	if opts.Interval <= 0 {
		opts.Interval = config.DefaultOTLPInterval
	}
	logger := opts.Logger
	if logger == nil {
		logger = log.NewNopLogger()
	}
	exports := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm_prober_otlp_exports_total",
		Help: "Pushes of the probes' GenAI metrics to --otlp.endpoint, by result (success, failure).",
	}, []string{"result"})
	exports.WithLabelValues("success")
	exports.WithLabelValues("failure")
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(exports); err != nil {
			return nil, fmt.Errorf("registering vllm_prober_otlp_exports_total: %w", err)
		}
	}
	// A transport of its own, so that Shutdown can close its idle
	// connections: the OTLP client leaves them to its http.Client.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// A push gives up after the SDK's default timeout, or the interval when
	// shorter.
	timeout := min(opts.Interval, pushTimeout)
	inner, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(opts.Endpoint),
		otlpmetrichttp.WithHTTPClient(&http.Client{Transport: transport, Timeout: timeout}))
	if err != nil {
		return nil, fmt.Errorf("building the OTLP exporter: %w", err)
	}
	exp := &reportingExporter{Exporter: inner, logger: logger, exports: exports,
		endpoint: (&url.URL{Scheme: schemeOf(opts.Endpoint), Host: hostOf(opts.Endpoint)}).String()}
	res := resource.NewSchemaless(
		attribute.String("service.name", "vllm_prober"),
		attribute.String("service.version", opts.Version),
	)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(opts.Interval), sdkmetric.WithTimeout(timeout))))
	e := &Exporter{provider: mp, transport: transport, vantage: opts.Vantage}
	if err := e.instruments(mp.Meter(scopeName, metric.WithInstrumentationVersion(opts.Version))); err != nil {
		_ = mp.Shutdown(ctx)
		transport.CloseIdleConnections()
		return nil, err
	}
	return e, nil
}

func (e *Exporter) instruments(m metric.Meter) error {
	var errs []error
	hist := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit("{token}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	e.duration = hist(MetricDuration, "Duration of a probe's inference request, from sending it to its last chunk (to the failure for a failed probe, with error.type).", durationBuckets)
	e.firstChunk = hist(MetricTimeToFirstChunk, "Time from sending a probe's request to its first chunk of generated text (TTFT).", durationBuckets)
	e.perChunk = hist(MetricTimePerChunk, "Time between consecutive chunks of a probe's stream, after the first.", durationBuckets)
	e.inTokens = counter(MetricInputTokens, "Input (prompt) tokens of the probes, as the server reported them.")
	e.outTokens = counter(MetricOutputTokens, "Output tokens of the probes, reasoning included.")
	e.reasoning = counter(MetricReasoningTokens, "Reasoning tokens of the probes' output (usage.completion_tokens_details.reasoning_tokens).")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("creating the GenAI instruments: %w", err)
	}
	return nil
}

// Record records a finished scheduled probe (prober.Options.Finished). It
// never blocks on the network: the SDK aggregates in memory.
func (e *Exporter) Record(f prober.Finished) {
	ctx := context.Background()
	r := f.Result
	base := e.attributes(f)
	set := attribute.NewSet(base...)
	if r.Success {
		e.duration.Record(ctx, r.E2E.Seconds(), metric.WithAttributeSet(set))
		if r.TTFT > 0 {
			e.firstChunk.Record(ctx, r.TTFT.Seconds(), metric.WithAttributeSet(set))
		}
		for _, gap := range r.ITLs {
			e.perChunk.Record(ctx, gap.Seconds(), metric.WithAttributeSet(set))
		}
	} else {
		d := r.E2E
		if d <= 0 { // failed before the request: model resolution
			d = r.Duration
		}
		failed := attribute.NewSet(append(base, attribute.String("error.type", errorType(r.Reason)))...)
		e.duration.Record(ctx, d.Seconds(), metric.WithAttributeSet(failed))
	}
	for _, c := range []struct {
		c metric.Int64Counter
		n int
	}{{e.inTokens, r.PromptTokens}, {e.outTokens, r.OutputTokens}, {e.reasoning, r.ReasoningTokens}} {
		if c.n > 0 {
			c.c.Add(ctx, int64(c.n), metric.WithAttributeSet(set))
		}
	}
}

// attributes are the attributes of every data point of f: the conventions'
// and the target's labels.
func (e *Exporter) attributes(f prober.Finished) []attribute.KeyValue {
	model := f.Result.Model
	if model == "" {
		model = f.Model
	}
	kv := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", operation(f.Prober)),
		attribute.String("gen_ai.provider.name", provider(f.Target)),
		attribute.String("gen_ai.request.model", model),
		attribute.String("vllm_prober.target", f.Target.Name),
		attribute.String("vllm_prober.module", f.Module),
	}
	if host, port, ok := serverOf(f.Target.URL); ok {
		kv = append(kv, attribute.String("server.address", host), attribute.Int("server.port", port))
	}
	if e.vantage != "" {
		kv = append(kv, attribute.String("vllm_prober.vantage", e.vantage))
	}
	names := make([]string, 0, len(f.Target.Labels))
	for k := range f.Target.Labels {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		kv = append(kv, attribute.String(k, f.Target.Labels[k]))
	}
	return kv
}

// Shutdown pushes what was recorded since the last push and stops the
// reader; ctx bounds the push. The Exporter records nothing afterwards.
func (e *Exporter) Shutdown(ctx context.Context) error {
	err := e.provider.Shutdown(ctx)
	e.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("shutting the OTLP push down: %w", err)
	}
	return nil
}

// operation is gen_ai.operation.name of a module's prober kind.
func operation(kind string) string {
	switch kind {
	case config.ProberCompletions:
		return "text_completion"
	case config.ProberEmbeddings:
		return "embeddings"
	default: // chat, responses
		return "chat"
	}
}

// provider is gen_ai.provider.name of a target: its engine profile when
// set (the conventions allow custom values; they list hosted providers
// only), else vllm, whose OpenAI-compatible API the probes speak.
func provider(t *config.Target) string {
	if t.Engine != "" {
		return t.Engine
	}
	return "vllm"
}

// errorType is error.type of a failed probe: its reason, else _OTHER.
func errorType(r probe.Reason) string {
	if r == "" {
		return "_OTHER"
	}
	return string(r)
}

// serverOf returns server.address and server.port of a target's URL.
func serverOf(raw string) (string, int, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", 0, false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return u.Hostname(), 0, false
	}
	return u.Hostname(), n, true
}

func schemeOf(raw string) string {
	u, _ := url.Parse(raw)
	return u.Scheme
}

func hostOf(raw string) string {
	u, _ := url.Parse(raw)
	if h, p, err := net.SplitHostPort(u.Host); err == nil {
		return net.JoinHostPort(h, p)
	}
	return u.Host
}

// reportingExporter logs and counts each push, and hands the SDK no error:
// the SDK would pass it to OpenTelemetry's global error handler, which logs
// to stderr outside the daemon's logger.
type reportingExporter struct {
	sdkmetric.Exporter
	logger   log.Logger
	exports  *prometheus.CounterVec
	endpoint string // scheme and host only
}

func (r *reportingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if err := r.Exporter.Export(ctx, rm); err != nil {
		r.exports.WithLabelValues("failure").Inc()
		level.Warn(r.logger).Log("msg", "OTLP push failed", "endpoint", r.endpoint, "err", err)
		return nil
	}
	r.exports.WithLabelValues("success").Inc()
	return nil
}
