// Package config loads, validates and reloads the vllm_prober configuration file.
//
// Defaults live in each type's UnmarshalYAML, decoding is strict (unknown keys are
// errors) and validation runs once at load time, so the rest of the program can
// trust every value it reads from a *Config.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	yaml "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"

	"github.com/vllm-prober/vllm_prober/internal/decodeerr"
)

// Prober kinds a module may use.
const (
	ProberCompletions = "completions"
	ProberChat        = "chat"
	// ProberResponses probes vLLM's OpenAI-compatible /v1/responses.
	ProberResponses = "responses"
)

// DefaultBuckets resolve probe TTFT and E2E latencies from 25 ms to 30 s,
// where a short streamed probe's first token and last token fall, in ten
// bounds: a (target, module) pair's series budget (docs/metrics.md) has no
// room for more. Latency SLO thresholds in mixin/slo.yml must be members of
// this list.
var DefaultBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30}

// DefaultTokenLatencyBuckets bucket the per-token latencies (ITL, TPOT), which
// sit between a few and a few tens of milliseconds, in eight bounds from 5 to
// 100 ms, at most 1.5 apart up to 30 ms: an interpolated quantile of a narrow
// distribution of gaps reads within about 20 % (with DefaultBuckets a 10.5 ms
// ITL read as 17 ms). Native histograms (global.histograms) read within
// about 5 %; so do the classic buckets of the previous default, listed in
// docs/metrics.md, for the series they cost.
var DefaultTokenLatencyBuckets = []float64{0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1}

// Defaults. They are package variables in the blackbox_exporter manner so that
// tests and documentation can refer to them; nothing mutates them.
var (
	DefaultGlobal = Global{
		ProbeInterval:       model.Duration(30 * time.Second),
		ProbeTimeout:        model.Duration(60 * time.Second),
		ScrapeInterval:      model.Duration(15 * time.Second),
		ScrapeTimeout:       model.Duration(10 * time.Second),
		RateWindow:          model.Duration(time.Minute),
		StallTimeout:        model.Duration(15 * time.Second),
		ModelsRefresh:       model.Duration(5 * time.Minute),
		MaxConcurrentProbes: 16,
		Buckets:             DefaultBuckets,
		TokenLatencyBuckets: DefaultTokenLatencyBuckets,
		Histograms:          HistogramsClassic,
		Burst:               DefaultBurst,
		Gate:                DefaultGate,
	}
	DefaultModule = Module{
		MaxTokens:   64,
		Temperature: 0,
		IgnoreEOS:   true,
		Nonce:       true,
	}
	DefaultTarget = Target{
		Probe:            true,
		MetricsPath:      "/metrics",
		ScrapeMetrics:    true,
		HTTPClientConfig: commoncfg.DefaultHTTPClientConfig,
	}
)

// Engines are the values of a target's engine key: the engines the
// collector has a profile for (collector.Engines, which a test keeps equal).
// Roles are the values of a target's role in a disaggregated (prefill/decode)
// fleet: a prefill pod, a decode pod, or one that does both.
var Roles = []string{RolePrefill, RoleDecode, RoleBoth}

// The values of Target.Role.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
	RoleBoth    = "both"
)

var Engines = []string{"vllm", "ray", "sglang", "trtllm", "triton", "llamacpp", "dynamo", "nim"}

// Config is the whole configuration file.
type Config struct {
	Global    Global            `yaml:"global"`
	Modules   map[string]Module `yaml:"modules"`
	Targets   []Target          `yaml:"targets"`
	Baselines []BaselineRef     `yaml:"baselines,omitempty"`
	// Discovery holds the *_sd_configs, relabel_configs and target_defaults
	// (package discovery runs them). When discovery is enabled, validation
	// leaves TargetDefaults set, with Modules resolved.
	Discovery Discovery `yaml:",inline"`
	// URLProbes lets /probe probe URLs that are not configured targets
	// (Prometheus Operator Probe objects); nil means off.
	URLProbes *URLProbes `yaml:"url_probes,omitempty"`
	// SLOs are the latency objectives of goodput (slos.go) for every module
	// that sets none of its own; nil: no goodput series.
	SLOs *Objectives `yaml:"slos,omitempty"`
}

// Global holds settings that apply to every target unless a target overrides them.
type Global struct {
	ProbeInterval  model.Duration `yaml:"probe_interval"`
	ProbeTimeout   model.Duration `yaml:"probe_timeout"`
	ScrapeInterval model.Duration `yaml:"scrape_interval"`
	ScrapeTimeout  model.Duration `yaml:"scrape_timeout"`
	// RateWindow is the window over which the collector derives rates and
	// server-side latency statistics from successive scrapes.
	RateWindow model.Duration `yaml:"rate_window"`
	// StallTimeout fails a probe as "stalled" when no new event arrives for this
	// long while the stream stays open. Modules may override it.
	StallTimeout model.Duration `yaml:"stall_timeout"`
	// ModelsRefresh is how often a probed target's GET /v1/models is read
	// again; a probe whose model the target refuses (model_not_found) reads
	// it at the target's next check, whatever this says.
	ModelsRefresh model.Duration `yaml:"models_refresh_interval"`
	// MaxConcurrentProbes caps probes in flight across all targets.
	MaxConcurrentProbes int `yaml:"max_concurrent_probes"`
	// Buckets are the classic histogram bucket upper bounds of the probe TTFT
	// and E2E histograms.
	Buckets []float64 `yaml:"buckets"`
	// TokenLatencyBuckets are those of the probe ITL and TPOT histograms.
	TokenLatencyBuckets []float64 `yaml:"token_latency_buckets"`
	// NativeHistogramBucketFactor > 1 is the growth factor of the native
	// (sparse) buckets; set with Histograms classic it means both.
	NativeHistogramBucketFactor float64 `yaml:"native_histogram_bucket_factor,omitempty"`
	// Histograms is how the probe latency histograms are exposed:
	// HistogramsClassic, HistogramsNative or HistogramsBoth.
	Histograms string `yaml:"histograms,omitempty"`
	// Metrics turns off metric families nobody charts.
	Metrics Metrics `yaml:"metrics,omitempty"`
	// Burst limits POST /burst, Gate sets GET /gate's defaults (burst.go).
	Burst Burst `yaml:"burst"`
	Gate  Gate  `yaml:"gate"`
	// Vantage and probe-only (vantage.go).
	Vantages `yaml:",inline"`
	// OTLP is the opt-in push of the probes' metrics under the
	// OpenTelemetry GenAI names (otlp.go).
	OTLP OTLP `yaml:"otlp,omitempty"`
}

// Histogram modes of Global.Histograms.
const (
	// HistogramsClassic exposes classic buckets (_bucket, _sum, _count) only.
	HistogramsClassic = "classic"
	// HistogramsNative exposes native (sparse) buckets only: in the text
	// formats a histogram is then its _sum, _count and one +Inf bucket.
	HistogramsNative = "native"
	// HistogramsBoth exposes both; a Prometheus keeps what its scrape
	// configuration asks for.
	HistogramsBoth = "both"
)

// DefaultNativeHistogramBucketFactor is the growth factor of native buckets
// when Histograms asks for them and NativeHistogramBucketFactor is unset:
// 1.1 gives schema 3 (bucket bounds 2^(1/8), 9 % apart), a quantile within
// about 4.5 %.
const DefaultNativeHistogramBucketFactor = 1.1

// NativeFactor is the native bucket factor the histograms use: 0 when they
// have no native buckets.
func (g *Global) NativeFactor() float64 {
	switch {
	case g.NativeHistogramBucketFactor > 1:
		return g.NativeHistogramBucketFactor
	case g.Histograms == HistogramsNative || g.Histograms == HistogramsBoth:
		return DefaultNativeHistogramBucketFactor
	}
	return 0
}

// ClassicBuckets reports whether the histograms have classic buckets.
func (g *Global) ClassicBuckets() bool { return g.Histograms != HistogramsNative }

// Metrics says which optional metric families the prober exposes.
type Metrics struct {
	// Disable lists families (full names, of OptionalFamilies) not exposed.
	Disable []string `yaml:"disable,omitempty"`
}

// OptionalFamilies are the families global.metrics.disable may turn off:
// none is read by an alert or an SLI rule of the mixin; the panels that chart
// them show "No data".
var OptionalFamilies = []string{
	"vllm_probe_inter_token_latency_seconds",
	"vllm_probe_time_per_output_token_seconds",
	"vllm_probe_output_tokens_per_second",
	"vllm_probe_duration_seconds",
	"vllm_probe_tokens_total",
	"vllm_probe_time_to_first_answer_token_seconds",
}

// Message is one chat message of a chat module.
type Message struct {
	Role    string `yaml:"role"`
	Content string `yaml:"content"`
}

// The bounds of a target's peak_flops_per_gpu: a typo of a few orders of
// magnitude (989e9 for 989e12) would make vllm_server_mfu_ratio absurd.
const (
	MinPeakFLOPSPerGPU = 1e9
	MaxPeakFLOPSPerGPU = 1e18
)

// MaxPrefillTokens bounds a module's prefill_tokens: a prompt this long is
// already more than most models' context.
const MaxPrefillTokens = 1 << 18

// Module describes one kind of probe request.
type Module struct {
	Prober      string    `yaml:"prober"`
	Prompt      string    `yaml:"prompt,omitempty"`
	Messages    []Message `yaml:"messages,omitempty"`
	MaxTokens   int       `yaml:"max_tokens"`
	Temperature float64   `yaml:"temperature"`
	IgnoreEOS   bool      `yaml:"ignore_eos"`
	// Nonce puts a per-probe random token at the front of the prompt so that
	// prefix caching cannot hide a TTFT regression.
	Nonce bool `yaml:"nonce"`
	// PrefillTokens > 0 puts a fresh random prefix of about this many tokens
	// in front of every probe's prompt (after the nonce): a long prompt no
	// prefix cache has seen, so that a disaggregated gateway (llm-d's
	// prefill/decode decider, which disaggregates only above a number of
	// uncached tokens) sends the probe through its prefill pool. 0: off.
	PrefillTokens int `yaml:"prefill_tokens,omitempty"`
	// Timeout and StallTimeout override the global values when set.
	Timeout      model.Duration `yaml:"timeout,omitempty"`
	StallTimeout model.Duration `yaml:"stall_timeout,omitempty"`
	// ExtraBody fields are merged into the JSON request body (they cannot replace
	// model, stream, stream_options, prompt or messages).
	ExtraBody map[string]any `yaml:"extra_body,omitempty"`
	// Headers are extra, non-secret request headers. Put credentials in the
	// target's http_client_config instead, where they are treated as secrets.
	Headers map[string]string `yaml:"headers,omitempty"`

	// Answer checks (expect.go): the generated text must match Expect, or
	// the probes ask Questions in turn, each with its own expect.
	Expect    *Expect    `yaml:"expect,omitempty"`
	Questions []Question `yaml:"questions,omitempty"`
	// Seed is vLLM's sampling seed; modules with checks default to DefaultCheckSeed.
	Seed *int `yaml:"seed,omitempty"`
	// Structured output: the output must be JSON valid against the schema, or
	// a call of one of Tools with arguments valid against its parameters.
	ResponseFormat *ResponseFormat `yaml:"response_format,omitempty"`
	Tools          []Tool          `yaml:"tools,omitempty"`
	ToolChoice     any             `yaml:"tool_choice,omitempty"`
	// ExpectedDimension fails embeddings probes whose vector has another length (0: any).
	ExpectedDimension int `yaml:"expected_dimension,omitempty"`
	// SLOs are this module's goodput objectives, replacing the top-level
	// slos. After validation it holds the effective objectives (nil: none).
	SLOs *Objectives `yaml:"slos,omitempty"`
	// RequireAnswer (chat and responses) fails a probe whose output within
	// max_tokens is reasoning only, with no answer text or tool call: a
	// reasoning model whose thinking used up the budget (reason no_answer).
	RequireAnswer bool `yaml:"require_answer,omitempty"`
}

// Target is one vLLM endpoint.
type Target struct {
	Name   string            `yaml:"name"`
	URL    string            `yaml:"url"`
	Model  string            `yaml:"model,omitempty"`
	Labels map[string]string `yaml:"labels,omitempty"`
	// Modules to probe with; empty means every module of the file. The
	// scalar `modules: none` means none, as Probe false does.
	Modules []string `yaml:"modules,omitempty"`
	// Probe false makes a scrape-only target: no module probes it.
	Probe bool `yaml:"probe"`
	// Models "all" (or a regular expression matching whole ids) probes every
	// model /v1/models lists (that matches), each with its own model label,
	// instead of one model.
	Models string `yaml:"models,omitempty"`
	// MaxNumSeqs is vLLM's --max-num-seqs (not exported by vLLM), for batch-slot headroom.
	MaxNumSeqs int `yaml:"max_num_seqs,omitempty"`
	// PeakFLOPSPerGPU is the peak of the target's GPU in floating-point
	// operations per second (at the model's precision), the denominator of
	// its model FLOPs utilisation (vllm_server_mfu_ratio); 0: not set.
	PeakFLOPSPerGPU float64 `yaml:"peak_flops_per_gpu,omitempty"`
	// Baseline names an entry of the top-level baselines list.
	Baseline string `yaml:"baseline,omitempty"`
	// Per-target overrides of the global intervals.
	ProbeInterval  model.Duration `yaml:"probe_interval,omitempty"`
	ProbeTimeout   model.Duration `yaml:"probe_timeout,omitempty"`
	ScrapeInterval model.Duration `yaml:"scrape_interval,omitempty"`
	// TokenBudgetPerHour caps prompt plus output tokens spent on this target's
	// probes in any rolling hour; 0 means no budget. A probe that would exceed it
	// is skipped and counted, never queued.
	TokenBudgetPerHour int `yaml:"token_budget_per_hour,omitempty"`
	// MetricsPath is where the collector scrapes vLLM's own metrics.
	MetricsPath string `yaml:"metrics_path"`
	// HealthPath is the path of the target's health check ("": /health,
	// vLLM's). An engine without /health names one it serves (Ollama: /).
	HealthPath string `yaml:"health_path,omitempty"`
	// Role is the target's part in a disaggregated fleet (Roles: prefill,
	// decode, both), "" when it has none; exported as the role label of the
	// gateway series that name it (docs/metrics.md, "Gateway joins").
	Role string `yaml:"role,omitempty"`
	// Engine forces the engine profile /metrics is read with (one of
	// Engines); empty detects it from the families present.
	Engine string `yaml:"engine,omitempty"`
	// PricePerHour is what one hour of the target's hardware costs (cost.go);
	// nil: no price, and no cost series.
	PricePerHour *float64 `yaml:"price_per_hour,omitempty"`
	// ScrapeMetrics turns the /metrics collector on or off for this target.
	ScrapeMetrics    bool                       `yaml:"scrape_metrics"`
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:"http_client_config"`
	// Gateway declares the target a gateway in front of other targets
	// (gateway.go); nil for an engine.
	Gateway *Gateway `yaml:"gateway,omitempty"`
}

// BaselineRef names a baseline file (see docs/baselines.md).
type BaselineRef struct {
	Name string `yaml:"name"`
	File string `yaml:"file"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (g *Global) UnmarshalYAML(unmarshal func(any) error) error {
	g.setDefaults()
	type plain Global
	return unmarshal((*plain)(g))
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *Module) UnmarshalYAML(unmarshal func(any) error) error {
	*m = DefaultModule
	type plain Module
	if err := unmarshal((*plain)(m)); err != nil {
		return err
	}
	var set map[string]any
	if err := unmarshal(&set); err != nil {
		return err
	}
	m.applyCheckDefaults(set)
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
// HealthCheckPath is the path the target's health check asks: its
// health_path, else vLLM's /health.
func (t *Target) HealthCheckPath() string {
	if t.HealthPath == "" {
		return "/health"
	}
	return t.HealthPath
}

func (t *Target) UnmarshalYAML(unmarshal func(any) error) error {
	*t = DefaultTarget
	type plain Target
	err := unmarshal((*plain)(t))
	// `modules: none` cannot decode into the list; every other field has
	// been decoded when that is the only error.
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) == 1 {
		var raw map[string]any
		if unmarshal(&raw) == nil && raw["modules"] == "none" {
			t.Modules, t.Probe = nil, false
			return nil
		}
	}
	return err
}

// UnmarshalYAML implements yaml.Unmarshaler.
//
// The sections are decoded one by one so that an error raised while decoding (an
// unknown key, a bad duration, an invalid http_client_config) names the section,
// module or target it comes from.
func (c *Config) UnmarshalYAML(unmarshal func(any) error) error {
	c.setDefaults()
	type plain struct {
		Global    *deferred            `yaml:"global"`
		Modules   map[string]*deferred `yaml:"modules"`
		Targets   []*deferred          `yaml:"targets"`
		Baselines []BaselineRef        `yaml:"baselines,omitempty"`
		// Decoded later, like targets, for errors with context.
		Discovery sdSections  `yaml:",inline"`
		URLProbes *deferred   `yaml:"url_probes,omitempty"`
		SLOs      *Objectives `yaml:"slos,omitempty"`
	}
	var raw plain
	if err := unmarshal(&raw); err != nil {
		return err
	}
	if raw.Global != nil {
		if err := raw.Global.decode(&c.Global); err != nil {
			return fmt.Errorf("global: %w", decodeerr.YAML(err, "in global"))
		}
	}
	if raw.Modules != nil {
		c.Modules = make(map[string]Module, len(raw.Modules))
		for _, name := range slices.Sorted(maps.Keys(raw.Modules)) {
			m := DefaultModule
			if err := raw.Modules[name].decode(&m); err != nil {
				return fmt.Errorf("module %q: %w", name, decodeerr.YAML(err, fmt.Sprintf("in module %q", name)))
			}
			c.Modules[name] = m
		}
	}
	for i, n := range raw.Targets {
		t := DefaultTarget
		if err := n.decode(&t); err != nil {
			if t.Name != "" {
				return fmt.Errorf("target %q: %w", t.Name, decodeerr.YAML(err, fmt.Sprintf("in target %q", t.Name)))
			}
			return fmt.Errorf("targets[%d]: %w", i, decodeerr.YAML(err, fmt.Sprintf("in targets[%d]", i)))
		}
		c.Targets = append(c.Targets, t)
	}
	c.Baselines = raw.Baselines
	c.SLOs = raw.SLOs
	if err := raw.Discovery.decode(&c.Discovery); err != nil {
		return err
	}
	if raw.URLProbes != nil {
		u := DefaultURLProbes
		if err := raw.URLProbes.decode(&u); err != nil {
			return fmt.Errorf("url_probes: %w", decodeerr.YAML(err, "in url_probes"))
		}
		c.URLProbes = &u
	}
	return nil
}

// setDefaults makes c the configuration of an empty file.
func (c *Config) setDefaults() {
	*c = Config{}
	c.Global.setDefaults()
}

// setDefaults makes g DefaultGlobal with probe_timeout and scrape_timeout
// unset: validate resolves them against their intervals (timeoutFor).
func (g *Global) setDefaults() {
	*g = DefaultGlobal
	g.Buckets = append([]float64(nil), DefaultGlobal.Buckets...)
	g.TokenLatencyBuckets = append([]float64(nil), DefaultGlobal.TokenLatencyBuckets...)
	g.ProbeTimeout, g.ScrapeTimeout = 0, 0
}

// deferred captures a YAML node so that it can be decoded later, inside the
// UnmarshalYAML call that received it, with error context added.
type deferred struct {
	unmarshal func(any) error
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *deferred) UnmarshalYAML(unmarshal func(any) error) error {
	d.unmarshal = unmarshal
	return nil
}

// decode decodes the captured node into v; a YAML null leaves v as it is.
func (d *deferred) decode(v any) error {
	if d == nil || d.unmarshal == nil {
		return nil
	}
	return d.unmarshal(v)
}

// Load parses and validates a configuration from YAML bytes. dir is the directory
// relative file paths (baselines, credentials files) are resolved against.
//
// Its error never quotes a secret of the file: a configuration that fails to
// load is scrubbed by a redactor built from the raw file's secret fields
// (rawSecrets), whatever their shape.
func Load(data []byte, dir string) (*Config, error) {
	cfg, err := load(data, dir)
	return cfg, scrubLoadError(err, data, dir)
}

func load(data []byte, dir string) (*Config, error) {
	cfg := &Config{}
	cfg.setDefaults() // an empty document does not call UnmarshalYAML
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, decodeerr.YAML(err, "")
	}
	if err := checkDocuments(data); err != nil {
		return nil, err
	}
	if err := cfg.validate(dir); err != nil {
		return nil, err
	}
	return cfg, nil
}

// checkDocuments refuses what yaml.v2 lets through after decoding the first
// document of data: a second document (after a --- separator), valid or not,
// which it ignores, and a boolean written the YAML 1.1 way (probe: off),
// which it reads as YAML 1.2 and the documentation do not.
func checkDocuments(data []byte) error {
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var first, second yaml3.Node
	if err := dec.Decode(&first); err != nil {
		// Empty: the defaults. Otherwise yaml.v2, which decoded the
		// document first, has reported what is wrong with it.
		return nil //nolint:nilerr // not this check's error to report
	}
	if err := decodeerr.YAML11Bools(&first, reflect.TypeFor[Config]()); err != nil {
		return err
	}
	const one = "a second YAML document: the configuration file must be one document"
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return fmt.Errorf("line %d: %s (and it does not parse: %w)", separatorLine(data, &first), one, err)
	}
	return fmt.Errorf("line %d: %s", second.Line, one)
}

// separatorLine is the line of the first document separator (---, or ...)
// after the start of the document first, where a second document begins.
func separatorLine(data []byte, first *yaml3.Node) int {
	start := first.Line
	if len(first.Content) > 0 {
		start = first.Content[0].Line
	}
	for i, line := range strings.Split(string(data), "\n") {
		if i+1 <= start {
			continue
		}
		for _, m := range []string{"---", "..."} {
			if rest, ok := strings.CutPrefix(line, m); ok && (rest == "" || strings.ContainsRune(" \t\r", rune(rest[0]))) {
				return i + 1
			}
		}
	}
	return start
}

// LoadFile reads, parses and validates the configuration file at path.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading config file: %w", err)
	}
	return loadBytes(data, path)
}

var (
	targetNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	// headerNameRE is RFC 9110's token.
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// ReservedLabels are label names the exporter's series carry themselves
// (vantage is added to every series by --vantage): a target label of one of
// these names, static or discovered, would collide with the series' own, so
// the configuration refuses it and discovery drops it. internal/daemon's
// TestMetricNamesMatchDocs walks every exported series and fails for a label
// name missing here.
var ReservedLabels = []string{
	"target", "module", "model", "reason", "kind", "state", "stat", "resource", "metric",
	"baseline", "load", "load_type", "finished_reason", "le", "job", "instance", "version",
	"max_model_len", "block_size", "kv_cache_size_tokens", "metrics_schema", "ttft_includes_queue", "signal", "base_model", "source", "index", "count", "member",
	"engine", "vantage", "backend", "gateway", "result", "role", "quantile", "objective", "decision",
}

func (c *Config) validate(dir string) error {
	g := &c.Global
	g.ProbeTimeout = model.Duration(timeoutFor(g.ProbeTimeout, DefaultGlobal.ProbeTimeout, time.Duration(g.ProbeInterval)))
	g.ScrapeTimeout = model.Duration(timeoutFor(g.ScrapeTimeout, DefaultGlobal.ScrapeTimeout, time.Duration(g.ScrapeInterval)))
	// A slice, not a map, so that the first bad key is reported deterministically.
	for _, d := range []struct {
		name string
		d    model.Duration
	}{
		{"probe_interval", g.ProbeInterval}, {"probe_timeout", g.ProbeTimeout},
		{"scrape_interval", g.ScrapeInterval}, {"scrape_timeout", g.ScrapeTimeout},
		{"rate_window", g.RateWindow}, {"stall_timeout", g.StallTimeout},
		{"models_refresh_interval", g.ModelsRefresh},
	} {
		if d.d <= 0 {
			return fmt.Errorf("global: %s must be greater than 0", d.name)
		}
	}
	if err := checkTimeout("probe_timeout", g.ProbeTimeout, "probe_interval", time.Duration(g.ProbeInterval)); err != nil {
		return fmt.Errorf("global: %w", err)
	}
	if err := checkTimeout("scrape_timeout", g.ScrapeTimeout, "scrape_interval", time.Duration(g.ScrapeInterval)); err != nil {
		return fmt.Errorf("global: %w", err)
	}
	if g.RateWindow < 2*g.ScrapeInterval {
		return fmt.Errorf("global: rate_window %s must be at least twice scrape_interval %s", g.RateWindow, g.ScrapeInterval)
	}
	if g.MaxConcurrentProbes < 1 {
		return fmt.Errorf("global: max_concurrent_probes must be at least 1, got %d", g.MaxConcurrentProbes)
	}
	if err := g.Burst.validate(); err != nil {
		return fmt.Errorf("global: burst: %w", err)
	}
	if err := g.Gate.validate(); err != nil {
		return fmt.Errorf("global: gate: %w", err)
	}
	if err := (&g.Vantages).validate(); err != nil {
		return fmt.Errorf("global: %w", err)
	}
	if err := g.OTLP.validate(); err != nil {
		return fmt.Errorf("global: %w", err)
	}
	for _, bs := range []struct {
		key string
		b   []float64
	}{{"buckets", g.Buckets}, {"token_latency_buckets", g.TokenLatencyBuckets}} {
		if len(bs.b) == 0 {
			return fmt.Errorf("global: %s must not be empty", bs.key)
		}
		for i, b := range bs.b {
			if !(b > 0) || math.IsInf(b, 1) || (i > 0 && b <= bs.b[i-1]) {
				return fmt.Errorf("global: %s must be positive and strictly increasing", bs.key)
			}
		}
	}
	if f := g.NativeHistogramBucketFactor; f != 0 && f <= 1 {
		return fmt.Errorf("global: native_histogram_bucket_factor must be greater than 1, got %g", f)
	}
	switch g.Histograms {
	case "":
		g.Histograms = HistogramsClassic
	case HistogramsClassic, HistogramsNative, HistogramsBoth:
	default:
		return fmt.Errorf("global: histograms must be %s, %s or %s, got %q", HistogramsClassic, HistogramsNative, HistogramsBoth, g.Histograms)
	}
	if g.Histograms == HistogramsClassic && g.NativeHistogramBucketFactor > 1 {
		g.Histograms = HistogramsBoth // what native_histogram_bucket_factor alone always meant
	}
	for _, f := range g.Metrics.Disable {
		if !slices.Contains(OptionalFamilies, f) {
			return fmt.Errorf("global: metrics: disable: %q is not a family that can be turned off; these can: %s", f, strings.Join(OptionalFamilies, ", "))
		}
	}

	if len(c.Modules) == 0 {
		switch {
		case len(c.Targets) == 0 && !c.Discovery.Enabled() && c.URLProbes == nil:
			return errors.New("no modules and no targets defined")
		case c.probes():
			return errors.New("no modules defined")
		}
		// Only scrape-only targets (modules: none, probe: false): nothing to probe with.
	}
	if c.SLOs != nil {
		if err := c.SLOs.validate(); err != nil {
			return fmt.Errorf("slos: %w", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Modules)) {
		m := c.Modules[name]
		if err := m.validateChecks(name); err != nil {
			return err
		}
		if err := m.validate(); err != nil {
			return fmt.Errorf("module %q: %w", name, err)
		}
		if m.SLOs != nil {
			if err := m.SLOs.validate(); err != nil {
				return fmt.Errorf("module %q: slos: %w", name, err)
			}
		} else if c.SLOs != nil {
			o := *c.SLOs
			m.SLOs = &o
			c.Modules[name] = m
		}
	}

	baselines := map[string]bool{}
	for i := range c.Baselines {
		b := &c.Baselines[i]
		if b.Name == "" {
			return fmt.Errorf("baselines[%d]: name is required", i)
		}
		if baselines[b.Name] {
			return fmt.Errorf("baselines: duplicate name %q", b.Name)
		}
		baselines[b.Name] = true
		if b.File == "" {
			return fmt.Errorf("baseline %q: file is required", b.Name)
		}
		if !filepath.IsAbs(b.File) && dir != "" {
			b.File = filepath.Join(dir, b.File)
		}
	}

	if err := c.Discovery.Validate(); err != nil {
		return err
	}
	for i := range c.Discovery.HTTPSDConfigs {
		if err := checkSecretLengths(&c.Discovery.HTTPSDConfigs[i].HTTPClientConfig); err != nil {
			return fmt.Errorf("http_sd_configs[%d]: %w", i, err)
		}
	}
	c.Discovery.SetDirectory(dir)
	if c.Discovery.Enabled() {
		// Discovered targets start from this template: validate it as a target
		// whose name and url discovery provides.
		if c.Discovery.TargetDefaults == nil {
			t := DefaultTarget
			c.Discovery.TargetDefaults = &t
		}
		t := c.Discovery.TargetDefaults
		switch {
		case t.Name != "":
			return errors.New("target_defaults: name must be empty: discovery names each target (__target_name__)")
		case t.URL != "":
			return errors.New("target_defaults: url must be empty: discovery provides each target's address")
		case t.Gateway != nil:
			return errors.New("target_defaults: gateway must be empty: a gateway is a static target (its members may be discovered: gateway.member_label)")
		}
		if err := t.validateSettings(c, baselines, dir); err != nil {
			return fmt.Errorf("target_defaults: %w", err)
		}
	}

	if c.URLProbes != nil {
		if err := c.URLProbes.validate(c, dir); err != nil {
			return fmt.Errorf("url_probes: %w", err)
		}
	}
	if len(c.Targets) == 0 && !c.Discovery.Enabled() && c.URLProbes == nil {
		return errors.New("no targets defined")
	}
	seen := map[string]bool{}
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Name == "" {
			return fmt.Errorf("targets[%d]: name is required", i)
		}
		if seen[t.Name] {
			return fmt.Errorf("duplicate target name %q", t.Name)
		}
		seen[t.Name] = true
		if err := t.validate(c, baselines, dir); err != nil {
			return fmt.Errorf("target %q: %w", t.Name, err)
		}
	}
	// Gateways last: their members must all be known.
	for i := range c.Targets {
		if t := &c.Targets[i]; t.Gateway != nil {
			if err := c.validateGateway(t); err != nil {
				return fmt.Errorf("target %q: gateway: %w", t.Name, err)
			}
		}
	}
	return nil
}

// probes reports whether a static target, or the template of discovered
// targets, probes (needs modules) rather than only scraping.
func (c *Config) probes() bool {
	for i := range c.Targets {
		if c.Targets[i].Probe {
			return true
		}
	}
	return c.Discovery.Enabled() && (c.Discovery.TargetDefaults == nil || c.Discovery.TargetDefaults.Probe)
}

func (m *Module) validate() error {
	switch m.Prober {
	case ProberCompletions:
		if m.Prompt == "" {
			return errors.New("prober completions needs a prompt")
		}
		if len(m.Messages) > 0 {
			return errors.New("prober completions takes a prompt, not messages")
		}
	case ProberChat:
		if len(m.Messages) == 0 {
			return errors.New("prober chat needs messages")
		}
		if m.Prompt != "" {
			return errors.New("prober chat takes messages, not a prompt")
		}
		for i, msg := range m.Messages {
			switch msg.Role {
			case "system", "user", "assistant", "developer":
			default:
				return fmt.Errorf("messages[%d]: role %q is not one of system, user, assistant, developer", i, msg.Role)
			}
			if msg.Content == "" {
				return fmt.Errorf("messages[%d]: content is required", i)
			}
		}
	case ProberEmbeddings:
		if m.Prompt == "" || len(m.Messages) > 0 {
			return errors.New("prober embeddings needs a prompt (the input), not messages")
		}
	case ProberResponses:
		if m.Prompt == "" || len(m.Messages) > 0 {
			return errors.New("prober responses needs a prompt (the input), not messages")
		}
	case "":
		return errors.New("prober is required (completions, chat, embeddings or responses)")
	default:
		return fmt.Errorf("prober %q is not valid (completions, chat, embeddings or responses)", m.Prober)
	}
	if m.MaxTokens < 1 {
		return fmt.Errorf("max_tokens must be at least 1, got %d", m.MaxTokens)
	}
	if m.PrefillTokens < 0 || m.PrefillTokens > MaxPrefillTokens {
		return fmt.Errorf("prefill_tokens must be between 0 and %d, got %d", MaxPrefillTokens, m.PrefillTokens)
	}
	if m.Temperature < 0 || math.IsNaN(m.Temperature) || math.IsInf(m.Temperature, 0) {
		return fmt.Errorf("temperature must not be negative, got %g", m.Temperature)
	}
	if m.Timeout < 0 || m.StallTimeout < 0 {
		return errors.New("timeout and stall_timeout must not be negative")
	}
	if m.RequireAnswer && m.Prober != ProberChat && m.Prober != ProberResponses {
		return fmt.Errorf("require_answer is for the chat and responses probers, not %s", m.Prober)
	}
	for _, k := range []string{"model", "stream", "stream_options", "prompt", "messages", "input"} {
		if _, ok := m.ExtraBody[k]; ok {
			return fmt.Errorf("extra_body may not set %q", k)
		}
	}
	// These have module keys of their own; two places for one value would be ambiguous.
	for _, k := range []struct{ body, key string }{
		{"max_tokens", "max_tokens"}, {"max_completion_tokens", "max_tokens"}, {"max_output_tokens", "max_tokens"},
		{"temperature", "temperature"}, {"ignore_eos", "ignore_eos"},
		{"response_format", "response_format"}, {"tools", "tools"}, {"tool_choice", "tool_choice"},
	} {
		if _, ok := m.ExtraBody[k.body]; ok {
			return fmt.Errorf("extra_body may not set %q: use the module key %s", k.body, k.key)
		}
	}
	// More than one choice per request would interleave streams and break TTFT and ITL.
	for _, k := range []string{"n", "best_of"} {
		if _, ok := m.ExtraBody[k]; ok {
			return fmt.Errorf("extra_body may not set %q: a probe measures exactly one completion", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
		if !headerNameRE.MatchString(k) {
			return fmt.Errorf("header name %q is not valid", k)
		}
		switch strings.ToLower(k) {
		case "authorization", "proxy-authorization", "x-api-key", "api-key", "cookie":
			return fmt.Errorf("header %q carries a secret: set it in the target's http_client_config", k)
		}
	}
	return nil
}

func (t *Target) validate(c *Config, baselines map[string]bool, dir string) error {
	if !targetNameRE.MatchString(t.Name) {
		return fmt.Errorf("name must match %s", targetNameRE)
	}
	if t.URL == "" {
		return errors.New("url is required")
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return fmt.Errorf("url is not valid: %w", redactURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("url has no host")
	}
	if u.User != nil {
		return errors.New("url must not carry credentials: use http_client_config")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("url must not have a query or fragment")
	}
	t.URL = strings.TrimRight(t.URL, "/")
	if strings.HasSuffix(t.URL, "/v1") {
		return errors.New("url must be the server root, without /v1")
	}
	return t.validateSettings(c, baselines, dir)
}

// validateSettings checks everything of a target but its name and url; it is
// shared with target_defaults, the template of discovered targets.
func (t *Target) validateSettings(c *Config, baselines map[string]bool, dir string) error {

	for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
		if !labelNameRE.MatchString(k) || strings.HasPrefix(k, "__") {
			return fmt.Errorf("label name %q is not valid", k)
		}
		for _, r := range ReservedLabels {
			if k == r {
				return fmt.Errorf("label name %q is reserved", k)
			}
		}
	}
	switch {
	case !t.Probe && len(t.Modules) > 0:
		return errors.New("probe: false (or modules: none) and a modules list exclude each other")
	case !t.Probe && !t.ScrapeMetrics:
		return errors.New("the target neither probes (probe: false or modules: none) nor scrapes metrics (scrape_metrics: false)")
	case t.Probe && len(t.Modules) == 0:
		t.Modules = slices.Sorted(maps.Keys(c.Modules))
	}
	mods := map[string]bool{}
	for _, m := range t.Modules {
		if _, ok := c.Modules[m]; !ok {
			return fmt.Errorf("unknown module %q", m)
		}
		if mods[m] {
			return fmt.Errorf("module %q listed twice", m)
		}
		mods[m] = true
	}
	if t.Models != "" && t.Model != "" {
		return errors.New("set model or models, not both")
	}
	if _, err := compileModels(t.Models); err != nil {
		return err
	}
	if p := t.PeakFLOPSPerGPU; p != 0 && !(p >= MinPeakFLOPSPerGPU && p <= MaxPeakFLOPSPerGPU) {
		return fmt.Errorf("peak_flops_per_gpu must be a GPU's peak in FLOP/s, between %g and %g (989e12 for an H100's dense BF16), got %g", MinPeakFLOPSPerGPU, MaxPeakFLOPSPerGPU, p)
	}
	if t.MaxNumSeqs < 0 {
		return fmt.Errorf("max_num_seqs must not be negative, got %d", t.MaxNumSeqs)
	}
	if t.TokenBudgetPerHour < 0 {
		return fmt.Errorf("token_budget_per_hour must not be negative, got %d", t.TokenBudgetPerHour)
	}
	if t.TokenBudgetPerHour > 0 {
		// A budget below one probe's output would skip every probe forever.
		for _, name := range t.Modules {
			if mt := c.Modules[name].MaxTokens; t.TokenBudgetPerHour < mt {
				return fmt.Errorf("token_budget_per_hour %d is smaller than max_tokens %d of module %q: every probe would be skipped", t.TokenBudgetPerHour, mt, name)
			}
		}
	}
	if t.Baseline != "" && !baselines[t.Baseline] {
		return fmt.Errorf("unknown baseline %q", t.Baseline)
	}
	if err := validatePrice(t.PricePerHour); err != nil {
		return err
	}
	if t.ProbeInterval < 0 || t.ProbeTimeout < 0 || t.ScrapeInterval < 0 {
		return errors.New("probe_interval, probe_timeout and scrape_interval must not be negative")
	}
	interval := c.ProbeInterval(t)
	if err := checkTimeout("probe_timeout", t.ProbeTimeout, "probe_interval", interval); err != nil {
		return err
	}
	// A module's timeout is explicit on every target that uses the module, so
	// each of their probe intervals bounds it.
	for _, name := range t.Modules {
		if err := checkTimeout("timeout", c.Modules[name].Timeout, "probe_interval", interval); err != nil {
			return fmt.Errorf("module %q: %w", name, err)
		}
	}
	if !strings.HasPrefix(t.MetricsPath, "/") {
		return fmt.Errorf("metrics_path %q must start with /", t.MetricsPath)
	}
	if t.HealthPath != "" && !strings.HasPrefix(t.HealthPath, "/") {
		return fmt.Errorf("health_path %q must start with /", t.HealthPath)
	}
	if t.Engine != "" && !slices.Contains(Engines, t.Engine) {
		return fmt.Errorf("unknown engine %q (one of %s)", t.Engine, strings.Join(Engines, ", "))
	}
	if t.Role != "" && !slices.Contains(Roles, t.Role) {
		return fmt.Errorf("unknown role %q (one of %s)", t.Role, strings.Join(Roles, ", "))
	}
	if dir != "" {
		t.HTTPClientConfig.SetDirectory(dir)
	}
	if err := t.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("http_client_config: %w", err)
	}
	return checkSecretLengths(&t.HTTPClientConfig)
}

// redactURLError drops the URL text from a parse error: it may carry credentials.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// ProbeInterval is the effective probe interval of t.
func (c *Config) ProbeInterval(t *Target) time.Duration {
	if t.ProbeInterval > 0 {
		return time.Duration(t.ProbeInterval)
	}
	return time.Duration(c.Global.ProbeInterval)
}

// timeoutFor is Prometheus' rule for a timeout under an interval: an explicit
// timeout stands (checkTimeout refuses one longer than the interval); an unset
// one inherits the enclosing timeout, bounded by the interval. It resolves the
// global probe_timeout and scrape_timeout and every target's and module's.
func timeoutFor(explicit, inherited model.Duration, interval time.Duration) time.Duration {
	if explicit > 0 {
		return time.Duration(explicit)
	}
	return min(time.Duration(inherited), interval)
}

// checkTimeout refuses an explicit timeout longer than its interval; an unset
// (zero) one never is (timeoutFor bounds it).
func checkTimeout(timeoutKey string, timeout model.Duration, intervalKey string, interval time.Duration) error {
	if time.Duration(timeout) > interval {
		return fmt.Errorf("%s %s is greater than %s %s", timeoutKey, timeout, intervalKey, model.Duration(interval))
	}
	return nil
}

// ProbeTimeout is the effective timeout of a probe of module m on target t:
// the module's timeout, else the target's probe_timeout, else the global
// probe_timeout bounded by t's probe_interval (Prometheus' rule for a scrape
// config that sets no timeout).
func (c *Config) ProbeTimeout(t *Target, m *Module) time.Duration {
	explicit := m.Timeout
	if explicit == 0 {
		explicit = t.ProbeTimeout
	}
	return timeoutFor(explicit, c.Global.ProbeTimeout, c.ProbeInterval(t))
}

// StallTimeout is the effective stall timeout of module m.
func (c *Config) StallTimeout(m *Module) time.Duration {
	if m.StallTimeout > 0 {
		return time.Duration(m.StallTimeout)
	}
	return time.Duration(c.Global.StallTimeout)
}

// ScrapeInterval is the effective /metrics scrape interval of t.
func (c *Config) ScrapeInterval(t *Target) time.Duration {
	if t.ScrapeInterval > 0 {
		return time.Duration(t.ScrapeInterval)
	}
	return time.Duration(c.Global.ScrapeInterval)
}

// ScrapeTimeout is the effective /metrics scrape timeout of t: the global
// scrape_timeout, or t's scrape_interval when that is shorter (Prometheus'
// rule for a scrape config that sets no timeout).
func (c *Config) ScrapeTimeout(t *Target) time.Duration {
	return timeoutFor(0, c.Global.ScrapeTimeout, c.ScrapeInterval(t))
}

// StaticLabelNames is the sorted union of every target's static label names. Every
// exported series carries all of them (empty where a target lacks one), because a
// metric family must have one label set.
func (c *Config) StaticLabelNames() []string {
	set := map[string]struct{}{}
	for _, t := range c.Targets {
		for k := range t.Labels {
			set[k] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// StaticLabelValues returns t's values for names, in order.
func (t *Target) StaticLabelValues(names []string) []string {
	vals := make([]string, len(names))
	for i, n := range names {
		vals[i] = t.Labels[n]
	}
	return vals
}

// Target returns the target called name.
func (c *Config) Target(name string) (*Target, bool) {
	for i := range c.Targets {
		if c.Targets[i].Name == name {
			return &c.Targets[i], true
		}
	}
	return nil, false
}
