// Package bench is the load generator behind `vllm_prober bench`: the multi-GPU presets report's
// method (wait for /v1/models, N requests at fixed concurrency with a fixed
// prompt, poll /metrics every second) and vLLM's serving benchmark (Poisson
// request rates with a seed, per-request TTFT/TPOT/ITL/E2E aggregated like
// calculate_metrics) in one. Every request is measured by probe.Stream and
// every /metrics poll is read by collector.Scrape, so the numbers use the same
// definitions as the daemon's probes and collector.
//
// Run produces a Report; the writers turn it into a CSV with the multi-GPU presets report's
// columns, one `vllm bench serve --save-result` JSON per level, a baseline
// file, SVG charts and the printed "Serving Benchmark Result" blocks.
package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// DefaultPrompt is the multi-GPU presets report's fixed prompt.
const DefaultPrompt = "Let's explore some architecture patterns for microservices"

// Load types of a Level, as in the baseline series' load_type label.
const (
	LoadConcurrency = "concurrency"
	LoadRequestRate = "request_rate"
)

// Defaults of Options.
const (
	DefaultRequests       = 100
	DefaultMaxTokens      = 512
	DefaultTemperature    = 0.7
	DefaultReadyTimeout   = 10 * time.Minute
	DefaultRequestTimeout = 30 * time.Minute
	DefaultPollInterval   = time.Second
	DefaultName           = "bench"
	// DefaultGoodputMaxConcurrency bounds the goodput search.
	DefaultGoodputMaxConcurrency = 256
	// DefaultMinSuccessRatio is the success ratio (completed / sent) below
	// which a level is not a measurement of the server (issue: a failing run
	// must never become a silent baseline).
	DefaultMinSuccessRatio = 0.99
)

// DefaultPercentiles are the percentiles reported besides mean and median.
var DefaultPercentiles = []float64{90, 99}

// Level is one load level: a fixed concurrency, or a Poisson request rate in
// requests/s (+Inf sends every request at once).
type Level struct {
	Type  string  // LoadConcurrency or LoadRequestRate
	Value float64 // concurrency, or requests/s
}

// String names the level for people: "concurrency 4", "request rate 16", "request rate inf".
func (l Level) String() string {
	if l.Type == LoadConcurrency {
		return "concurrency " + formatLoad(l.Value)
	}
	return "request rate " + formatLoad(l.Value)
}

// Slug names the level in file names: "c4", "qps16", "qpsinf".
func (l Level) Slug() string {
	if l.Type == LoadConcurrency {
		return "c" + formatLoad(l.Value)
	}
	return "qps" + formatLoad(l.Value)
}

func formatLoad(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Options configure a benchmark run.
type Options struct {
	// URL is the server root, e.g. http://127.0.0.1:8000.
	URL string
	// Model to request; empty uses the first id of /v1/models.
	Model string
	// Endpoint is the probe kind of the requests, one whose answer is
	// streamed (probe.StreamedKinds): config.ProberCompletions
	// (/v1/completions, the default), config.ProberChat, ...
	Endpoint string
	// Requests is the number of requests per level.
	Requests int
	// Concurrencies and RequestRates are the levels, run in this order
	// (concurrencies first). A rate of +Inf sends all requests at once.
	Concurrencies []int
	RequestRates  []float64
	// Seed seeds the Poisson arrivals and random prompts.
	Seed uint64
	// MaxTokens, Temperature and IgnoreEOS go into every request body.
	MaxTokens   int
	Temperature float64
	IgnoreEOS   bool
	// Prompt is the fixed prompt (DefaultPrompt when empty and RandomInputLen is 0).
	Prompt string
	// RandomInputLen > 0 sends a different random prompt of about that many
	// tokens (one word each) per request instead of Prompt.
	RandomInputLen int
	// MetricsPath is where the server's Prometheus metrics are (default /metrics).
	MetricsPath string
	// Name names the run: the baseline name and the output file prefix.
	Name string
	// Percentiles reported besides mean and median (default DefaultPercentiles).
	Percentiles []float64
	// Header is added to every request (e.g. Authorization); its values never
	// reach an output file or a log line.
	Header http.Header
	// ReadyTimeout bounds the wait for /v1/models; RequestTimeout bounds each
	// request; StallTimeout (0: off) fails a stream that stops sending bytes.
	ReadyTimeout   time.Duration
	RequestTimeout time.Duration
	StallTimeout   time.Duration
	// PollInterval is the /metrics polling period (default 1s).
	PollInterval time.Duration
	// MinSuccessRatio in (0, 1] (default DefaultMinSuccessRatio): a level whose
	// completed / sent is below it fails the run (Report.FailingLevels), and
	// WriteAll writes no baseline file for the run unless ForceBaseline.
	MinSuccessRatio float64
	// ForceBaseline writes the baseline file even when levels fail; their
	// points keep their failed count and are marked (see Point).
	ForceBaseline bool
	// SaveDetailed adds the per-request arrays of `vllm bench serve
	// --save-detailed` to each level's JSON (see ServeJSON).
	SaveDetailed bool
	// SkipWarmup sends each level's first wave on new connections from a cold
	// process. By default (false) every level starts with a warm-up: one
	// untimed request (max_tokens 1) per concurrency slot (every request of
	// an "inf" rate level, one for a finite rate) and one for the /metrics
	// poller, all sent at once so that each opens its own connection, which
	// the timed requests then reuse.
	// The warm-up requests are not part of the results.
	SkipWarmup bool
	// GCMemoryLimit > 0 turns Go's garbage collector off (GOGC=off) for each
	// level's timed window, with this soft memory limit (bytes) as the only
	// trigger, after collecting once before the window; the settings in force
	// before are restored when the window ends. A collection that stops the
	// client in the middle of a stream adds its pause to the TTFT or ITL it
	// measures. 0 leaves the collector alone. It changes process-wide
	// settings: one Run at a time.
	GCMemoryLimit int64
	// Goodput, when set, judges every request against these objectives
	// (vLLM's --goodput): each level reports its request goodput and its
	// attainment (LevelResult.Goodput).
	Goodput *config.Objectives
	// GoodputTarget in (0, 1], with Goodput, replaces the levels by a search
	// for the highest concurrency whose attainment is at least this
	// (Report.GoodputSearch), up to GoodputMaxConcurrency
	// (DefaultGoodputMaxConcurrency when 0).
	GoodputTarget         float64
	GoodputMaxConcurrency int
	// Client sends every request; nil builds one sized for the largest level.
	Client *http.Client
	// Progress receives each level's progress: a progress bar redrawn in place
	// when ProgressBar is set (give it a terminal), otherwise one line per
	// level when it ends; nil: nothing.
	Progress    io.Writer
	ProgressBar bool
	// Summary receives each level's "Serving Benchmark Result" block as soon as
	// the level finishes; nil: none.
	Summary io.Writer
	Logger  log.Logger
	// now is the clock for the report date (tests).
	now func() time.Time
	// red scrubs Header's values from every text a server sends back (Run).
	red *redact.Redactor
}

// Levels returns the load levels of o in run order.
func (o *Options) Levels() []Level {
	var out []Level
	for _, c := range o.Concurrencies {
		out = append(out, Level{LoadConcurrency, float64(c)})
	}
	for _, r := range o.RequestRates {
		out = append(out, Level{LoadRequestRate, r})
	}
	return out
}

// setDefaults fills in defaults and validates o.
func (o *Options) setDefaults() error {
	var errs []error
	o.URL = strings.TrimRight(o.URL, "/")
	if o.URL == "" {
		errs = append(errs, errors.New("no server URL"))
	}
	if o.GoodputTarget != 0 {
		if o.Goodput == nil {
			errs = append(errs, errors.New("a goodput target needs goodput objectives"))
		}
		if !(o.GoodputTarget > 0 && o.GoodputTarget <= 1) {
			errs = append(errs, fmt.Errorf("goodput target %v is not in (0, 1]", o.GoodputTarget))
		}
		if o.GoodputMaxConcurrency == 0 {
			o.GoodputMaxConcurrency = DefaultGoodputMaxConcurrency
		}
		if o.GoodputMaxConcurrency < 1 {
			errs = append(errs, fmt.Errorf("goodput max concurrency %d is below 1", o.GoodputMaxConcurrency))
		}
	}
	switch o.Endpoint {
	case "":
		o.Endpoint = config.ProberCompletions
	default:
		if !slices.Contains(probe.StreamedKinds(), o.Endpoint) {
			errs = append(errs, fmt.Errorf("endpoint %q is not a streamed probe kind (%s)", o.Endpoint, strings.Join(probe.StreamedKinds(), ", ")))
		}
	}
	if o.Requests == 0 {
		o.Requests = DefaultRequests
	}
	if o.Requests < 1 {
		errs = append(errs, fmt.Errorf("requests must be at least 1, got %d", o.Requests))
	}
	if len(o.Concurrencies) == 0 && len(o.RequestRates) == 0 && o.GoodputTarget == 0 {
		errs = append(errs, errors.New("no load level: give at least one concurrency or request rate (or a goodput target to search)"))
	}
	for _, c := range o.Concurrencies {
		if c < 1 {
			errs = append(errs, fmt.Errorf("concurrency must be at least 1, got %d", c))
		}
	}
	for _, r := range o.RequestRates {
		if !(r > 0) {
			errs = append(errs, fmt.Errorf("request rate must be positive or inf, got %v", r))
		}
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.MaxTokens < 1 {
		errs = append(errs, fmt.Errorf("max tokens must be at least 1, got %d", o.MaxTokens))
	}
	if o.Temperature < 0 {
		errs = append(errs, fmt.Errorf("temperature must not be negative, got %v", o.Temperature))
	}
	if o.RandomInputLen < 0 {
		errs = append(errs, fmt.Errorf("random input length must not be negative, got %d", o.RandomInputLen))
	}
	if o.RandomInputLen > 0 && o.Prompt != "" {
		errs = append(errs, errors.New("give either a prompt or a random input length, not both"))
	}
	if o.Prompt == "" && o.RandomInputLen == 0 {
		o.Prompt = DefaultPrompt
	}
	if o.MetricsPath == "" {
		o.MetricsPath = "/metrics"
	}
	if !strings.HasPrefix(o.MetricsPath, "/") {
		errs = append(errs, fmt.Errorf("metrics path %q must start with /", o.MetricsPath))
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if strings.ContainsAny(o.Name, `/\`) || strings.TrimSpace(o.Name) != o.Name {
		errs = append(errs, fmt.Errorf("name %q must not contain slashes or surrounding spaces (it prefixes file names)", o.Name))
	}
	if o.Percentiles == nil {
		o.Percentiles = DefaultPercentiles
	}
	for _, p := range o.Percentiles {
		if !(p > 0 && p < 100) {
			errs = append(errs, fmt.Errorf("percentile %v is not in (0, 100)", p))
		}
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.StallTimeout < 0 {
		errs = append(errs, errors.New("stall timeout must not be negative"))
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MinSuccessRatio == 0 {
		o.MinSuccessRatio = DefaultMinSuccessRatio
	}
	if !(o.MinSuccessRatio > 0 && o.MinSuccessRatio <= 1) {
		errs = append(errs, fmt.Errorf("min success ratio must be in (0, 1], got %v", o.MinSuccessRatio))
	}
	if o.Logger == nil {
		o.Logger = log.NewNopLogger()
	}
	if o.now == nil {
		o.now = time.Now
	}
	return errors.Join(errs...)
}

// Report is the outcome of a run.
type Report struct {
	Name        string
	Model       string
	Endpoint    string
	MaxModelLen int // from /v1/models, 0 when not reported
	Date        time.Time
	Requests    int
	MaxTokens   int
	Temperature float64
	IgnoreEOS   bool
	Prompt      string // "" for random prompts
	InputLen    int    // RandomInputLen
	Seed        uint64
	Percentiles []float64
	Levels      []*LevelResult
	// MinSuccessRatio, ForceBaseline and SaveDetailed are the Options'.
	MinSuccessRatio float64
	ForceBaseline   bool
	SaveDetailed    bool
	// Goodput is the run's objectives (nil: none); GoodputSearch the result
	// of the search for the highest concurrency meeting GoodputTarget.
	Goodput       *config.Objectives
	GoodputSearch *GoodputSearch
}

// FailingLevels returns the levels whose success ratio is below the run's
// minimum, in run order.
func (r *Report) FailingLevels() []*LevelResult {
	var out []*LevelResult
	for _, lr := range r.Levels {
		if r.failing(lr) {
			out = append(out, lr)
		}
	}
	return out
}

func (r *Report) failing(lr *LevelResult) bool {
	return lr.Metrics.SuccessRatio() < r.minSuccessRatio()
}

// minSuccessRatio is the run's minimum success ratio, DefaultMinSuccessRatio when unset.
func (r *Report) minSuccessRatio() float64 {
	if r.MinSuccessRatio == 0 {
		return DefaultMinSuccessRatio
	}
	return r.MinSuccessRatio
}

// LevelResult is one finished load level.
type LevelResult struct {
	Level   Level
	Start   time.Time
	Results []probe.Result // one per request, in request order; timelines and headers dropped
	// Texts is each request's whole generated text (probe.Result.GeneratedText),
	// in request order, when SaveDetailed asked for vLLM's generated_texts; nil otherwise.
	Texts   []string
	Metrics Metrics
	Server  ServerStats
	// Goodput is the level's goodput against Options.Goodput; nil without.
	Goodput *Goodput
}

// ServerSample is one /metrics poll, summed over the server's models. Gauges
// the server does not expose are NaN; rates are NaN on the first sample.
type ServerSample struct {
	Offset                         time.Duration // since the level started
	PromptTokens, GenerationTokens float64       // counters
	PromptTPS, GenerationTPS       float64       // since the previous sample
	Running, Waiting, Swapped      float64
	KVUsage, CPUKVUsage            float64 // 0-1
}

// ServerStats are the polled series of one level and their averages (the multi-GPU presets report).
type ServerStats struct {
	Samples []ServerSample
	// ScrapeErrors counts polls that failed.
	ScrapeErrors int
	// PromptTPS and GenerationTPS are the counters' increase (resets handled)
	// between the first and the last poll, per second: the multi-GPU presets report's "Prompt TPS"
	// and "Gen TPS". NaN with fewer than two polls.
	PromptTPS, GenerationTPS float64
	// Means over the polls, and the largest KV cache usage (NaN when not exposed).
	MeanRunning, MeanWaiting, MeanSwapped  float64
	MeanKVUsage, MaxKVUsage, MaxCPUKVUsage float64
}
