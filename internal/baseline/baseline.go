// Package baseline defines the benchmark-baseline file format of vllm_prober, reads and writes it,
// imports the result files of common LLM serving benchmarks into it, and interpolates expected
// latency and throughput at a given load. docs/baselines.md documents the format and every importer.
package baseline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/internal/decodeerr"
)

// FormatVersion is the only version of the baseline file this package reads and writes.
const FormatVersion = 1

// File is a baseline file: a version and one or more named baselines.
type File struct {
	Version   int         `yaml:"version"`
	Baselines []*Baseline `yaml:"baselines"`
}

// Baseline is one benchmark curve: one deployment (model, hardware, parallelism, context length)
// measured by one tool at one or more load levels.
type Baseline struct {
	Name        string       `yaml:"name"`
	Model       string       `yaml:"model,omitempty"`
	Hardware    string       `yaml:"hardware,omitempty"`
	Preset      string       `yaml:"preset,omitempty"`
	Parallelism *Parallelism `yaml:"parallelism,omitempty"`
	MaxModelLen int64        `yaml:"max_model_len,omitempty"`
	// Framework is the serving framework that was measured ("vllm", "sglang", "tgi", ...), when
	// the source says so (vLLM --metadata framework=..., llmperf metadata).
	Framework string `yaml:"framework,omitempty"`
	// ServerParams are the parameters a sweep varied that are not result fields (vllm bench sweep:
	// the serve parameters such as max_num_seqs).
	ServerParams map[string]string `yaml:"server_params,omitempty"`
	// RunNumber is the repeat index a sweep gave this run (vllm bench sweep run_number).
	RunNumber *int64 `yaml:"run_number,omitempty"`
	// Unusable says why the baseline has no usable point (set by a forced import). The daemon
	// refuses a baseline without a usable point whether or not this is set.
	Unusable string `yaml:"unusable,omitempty"`
	Source   Source `yaml:"source"`
	// SaturationOutput (tokens/s) is derived from the points (the largest output_throughput of a
	// point that is not all_failed). It is written for readers of the file and recomputed on load.
	SaturationOutput float64 `yaml:"saturation_output_throughput"`
	Points           []Point `yaml:"points"`

	// series separates runs an importer knows to be distinct set-ups that would otherwise share
	// the same identity (e.g. two server command lines in one log). Never written.
	series string
}

// Parallelism is the vLLM parallel layout: tensor, pipeline and data parallel sizes.
type Parallelism struct {
	TP int64 `yaml:"tp,omitempty"`
	PP int64 `yaml:"pp,omitempty"`
	DP int64 `yaml:"dp,omitempty"`
}

// Source records where the points came from and how the tool defined each metric.
type Source struct {
	// Tool is the benchmark tool, e.g. "vllm bench serve", "guidellm".
	Tool string `yaml:"tool"`
	// Format is the importer format that read the files (see Format).
	Format string   `yaml:"format"`
	Files  []string `yaml:"files"`
	// Date is the run date as the tool printed it, when known.
	Date string `yaml:"date,omitempty"`
	// PercentileMethod says how the tool computed percentiles.
	PercentileMethod string `yaml:"percentile_method,omitempty"`
	// Definitions maps each baseline metric name to the source tool's definition of it.
	Definitions map[string]string `yaml:"definitions"`
}

// Point is one load level of a baseline. Latencies are in seconds, throughputs per second.
// Absent values are nil and omitted from the file.
type Point struct {
	// Concurrency is the fixed number of requests in flight (e.g. --max-concurrency).
	Concurrency *Load `yaml:"concurrency,omitempty"`
	// RequestRate is the offered request rate in requests/s; +Inf ("inf") sends everything at once.
	RequestRate *Load `yaml:"request_rate,omitempty"`
	// NumPrompts is the number of requests sent at this level, when known.
	NumPrompts *int64 `yaml:"num_prompts,omitempty"`
	// Ref says where in the source this point was read (file, line, record, row).
	Ref string `yaml:"ref,omitempty"`
	// Label is the source's own name for the run (test name, label), when it has one.
	Label string `yaml:"label,omitempty"`
	Date  string `yaml:"date,omitempty"`
	// AllFailed marks a run in which no request succeeded: its zeros are not a measurement, so
	// interpolation and the saturation throughput ignore it.
	AllFailed bool `yaml:"all_failed,omitempty"`
	// Excluded says why a point that has measurements is left out of the expected values and the
	// saturation figure (e.g. its success ratio is below the import's --min-success-ratio). The
	// point stays in the file so that nothing is lost.
	Excluded string `yaml:"excluded,omitempty"`
	// FailedDerived is true when the tool did not write a failed count and Failed was derived as
	// num_prompts - completed.
	FailedDerived bool `yaml:"failed_derived,omitempty"`

	// Dataset and the requested input/output lengths, when the source states them (the
	// Namespace(...) line of a vllm bench serve log).
	Dataset   string `yaml:"dataset,omitempty"`
	InputLen  *int64 `yaml:"input_len,omitempty"`
	OutputLen *int64 `yaml:"output_len,omitempty"`

	DurationSeconds   *float64 `yaml:"duration_seconds,omitempty"`
	Completed         *int64   `yaml:"completed,omitempty"`
	Failed            *int64   `yaml:"failed,omitempty"`
	TotalInputTokens  *int64   `yaml:"total_input_tokens,omitempty"`
	TotalOutputTokens *int64   `yaml:"total_output_tokens,omitempty"`

	RequestThroughput *float64 `yaml:"request_throughput,omitempty"`
	RequestGoodput    *float64 `yaml:"request_goodput,omitempty"`
	// SLOAttainment is the share (0..1) of the requests sent at this level that succeeded and
	// met every goodput objective: good / (completed + failed), failed requests counted against
	// it, as GuideLLM's slo_attainment and the prober's bench define it.
	SLOAttainment *float64 `yaml:"slo_attainment,omitempty"`
	// TokenGoodput is the prompt plus output tokens of the good requests / duration, tokens/s,
	// where the tool gives it (inference-perf's token_goodput).
	TokenGoodput *float64 `yaml:"token_goodput,omitempty"`
	// GoodputObjectives are the objectives request_goodput, slo_attainment and token_goodput
	// were measured against; nil when the source does not say (the point's goodput is then not
	// compared with the live goodput).
	GoodputObjectives    *Objectives `yaml:"goodput_objectives,omitempty"`
	OutputThroughput     *float64    `yaml:"output_throughput,omitempty"`
	InputThroughput      *float64    `yaml:"input_throughput,omitempty"`
	TotalTokenThroughput *float64    `yaml:"total_token_throughput,omitempty"`
	PeakOutputThroughput *float64    `yaml:"peak_output_throughput,omitempty"`
	// SpecDecodeAcceptanceLength is vLLM's bench serve spec_decode_acceptance_length
	// of a run with speculative decoding: 1 + accepted draft tokens / drafts.
	SpecDecodeAcceptanceLength *float64 `yaml:"spec_decode_acceptance_length,omitempty"`
	// PeakConcurrency is the largest number of requests in flight the client observed.
	PeakConcurrency *float64 `yaml:"peak_concurrent_requests,omitempty"`

	OutputThroughputPerRequest *Stats `yaml:"output_throughput_per_request,omitempty"`
	InputThroughputPerRequest  *Stats `yaml:"input_throughput_per_request,omitempty"`

	TTFT         *Stats `yaml:"ttft_seconds,omitempty"`
	TPOT         *Stats `yaml:"tpot_seconds,omitempty"`
	ITL          *Stats `yaml:"itl_seconds,omitempty"`
	E2E          *Stats `yaml:"e2e_seconds,omitempty"`
	TPOTInclTTFT *Stats `yaml:"tpot_incl_ttft_seconds,omitempty"`

	// ToolFigures keeps a tool's own aggregate under the tool's name for it where this file's
	// figure of the same concept is computed with vLLM's definition instead (e.g. guidellm's
	// requests_per_second.successful.mean next to request_throughput = completed / duration).
	ToolFigures map[string]float64 `yaml:"tool_figures,omitempty"`
}

// Usable reports whether the point may feed expected values and the saturation figure: some
// request succeeded and it is not excluded.
func (p *Point) Usable() bool {
	return !p.AllFailed && p.Excluded == ""
}

// UsablePoints counts the usable points of b.
func (b *Baseline) UsablePoints() int {
	n := 0
	for i := range b.Points {
		if b.Points[i].Usable() {
			n++
		}
	}
	return n
}

// Stats summarises a distribution. Percentiles are keyed "p99", "p99.9", ....
type Stats struct {
	Mean        *float64    `yaml:"mean,omitempty"`
	Median      *float64    `yaml:"median,omitempty"`
	Std         *float64    `yaml:"std,omitempty"`
	Min         *float64    `yaml:"min,omitempty"`
	Max         *float64    `yaml:"max,omitempty"`
	Percentiles Percentiles `yaml:"percentiles,omitempty"`
}

// P99 returns the 99th percentile, if present.
func (s *Stats) P99() (float64, bool) {
	if s == nil {
		return 0, false
	}
	v, ok := s.Percentiles["p99"]
	return v, ok
}

// MeanValue returns the mean, if present.
func (s *Stats) MeanValue() (float64, bool) {
	if s == nil || s.Mean == nil {
		return 0, false
	}
	return *s.Mean, true
}

func (s *Stats) empty() bool {
	return s == nil || (s.Mean == nil && s.Median == nil && s.Std == nil && s.Min == nil && s.Max == nil && len(s.Percentiles) == 0)
}

// Load is a load level: a concurrency or a request rate. +Inf is written as "inf".
type Load float64

// MarshalYAML implements yaml.Marshaler.
func (l Load) MarshalYAML() (interface{}, error) {
	if math.IsInf(float64(l), 1) {
		return "inf", nil
	}
	return float64(l), nil
}

// UnmarshalYAML implements yaml.Unmarshaler; it accepts a number or "inf".
func (l *Load) UnmarshalYAML(unmarshal func(interface{}) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	v, err := parseLoad(s)
	if err != nil {
		return err
	}
	*l = Load(v)
	return nil
}

func parseLoad(s string) (float64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "inf", "+inf", ".inf", "infinity":
		return math.Inf(1), nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("load level %q is neither a number nor \"inf\"", s)
	}
	return v, nil
}

func (l Load) String() string {
	if math.IsInf(float64(l), 1) {
		return "inf"
	}
	return strconv.FormatFloat(float64(l), 'g', -1, 64)
}

// Percentiles maps "p<q>" (0 < q <= 100) to a value. It is written in ascending order of q.
type Percentiles map[string]float64

// MarshalYAML implements yaml.Marshaler with numeric key order.
func (p Percentiles) MarshalYAML() (interface{}, error) {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		qi, _ := percentileQ(keys[i])
		qj, _ := percentileQ(keys[j])
		return qi < qj
	})
	out := make(yaml.MapSlice, 0, len(keys))
	for _, k := range keys {
		out = append(out, yaml.MapItem{Key: k, Value: p[k]})
	}
	return out, nil
}

// percentileQ parses "p99.9" into 99.9.
func percentileQ(key string) (float64, error) {
	if !strings.HasPrefix(key, "p") {
		return 0, fmt.Errorf("percentile key %q does not start with \"p\"", key)
	}
	q, err := strconv.ParseFloat(key[1:], 64)
	if err != nil || !(q > 0 && q <= 100) {
		return 0, fmt.Errorf("percentile key %q: want p<q> with 0 < q <= 100", key)
	}
	return q, nil
}

// percentileKey formats q as a key: 99 -> "p99", 99.9 -> "p99.9".
func percentileKey(q float64) string {
	return "p" + strconv.FormatFloat(q, 'f', -1, 64)
}

// LoadKey returns the value a point is keyed by and its kind: "concurrency" when the point has a
// concurrency, else "request_rate".
func (p *Point) LoadKey() (kind string, v float64) {
	if p.Concurrency != nil {
		return "concurrency", float64(*p.Concurrency)
	}
	if p.RequestRate != nil {
		return "request_rate", float64(*p.RequestRate)
	}
	return "", 0
}

func (p *Point) loadString() string {
	var parts []string
	if p.Concurrency != nil {
		parts = append(parts, "concurrency "+p.Concurrency.String())
	}
	if p.RequestRate != nil {
		parts = append(parts, "request_rate "+p.RequestRate.String())
	}
	return strings.Join(parts, ", ")
}

// SaturationOutputThroughput is the largest output throughput of the usable points: the
// throughput at which the benchmarked deployment saturated. 0 when unknown.
func (b *Baseline) SaturationOutputThroughput() float64 {
	m := 0.0
	for i := range b.Points {
		p := &b.Points[i]
		if !p.Usable() || p.OutputThroughput == nil {
			continue
		}
		m = math.Max(m, *p.OutputThroughput)
	}
	return m
}

// SaturationTotalTokenThroughput is the prompt plus output token throughput
// of the point SaturationOutputThroughput comes from: its
// total_token_throughput, else its output_throughput plus input_throughput.
// 0 when that point has neither (a tool that reports output tokens only).
func (b *Baseline) SaturationTotalTokenThroughput() float64 {
	var best *Point
	for i := range b.Points {
		p := &b.Points[i]
		if p.Usable() && p.OutputThroughput != nil && (best == nil || *p.OutputThroughput > *best.OutputThroughput) {
			best = p
		}
	}
	switch {
	case best == nil:
		return 0
	case best.TotalTokenThroughput != nil:
		return *best.TotalTokenThroughput
	case best.InputThroughput != nil:
		return *best.InputThroughput + *best.OutputThroughput
	}
	return 0
}

// Lookup returns the baseline with the given name.
func (f *File) Lookup(name string) (*Baseline, bool) {
	for _, b := range f.Baselines {
		if b.Name == name {
			return b, true
		}
	}
	return nil, false
}

// Parse decodes a baseline file strictly (unknown fields are errors), validates it and recomputes
// the derived fields.
func Parse(data []byte) (*File, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty baseline file")
	}
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("decoding baseline YAML: %w", decodeerr.YAML(err, ""))
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	f.derive()
	return &f, nil
}

// ReadFile reads and parses a baseline file for use: besides Parse's checks it refuses a file
// holding a baseline with no usable point (every point all-failed or excluded), naming the file
// and the baseline, so that such a baseline never becomes silently empty series. The daemon and
// --config.check both load baselines through it.
func ReadFile(ctx context.Context, path string) (*File, error) {
	data, err := readFile(ctx, path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, b := range f.Baselines {
		if err := b.CheckUsable(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return f, nil
}

// CheckUsable returns an error naming b when it has no usable point.
func (b *Baseline) CheckUsable() error {
	if b.UsablePoints() > 0 {
		return nil
	}
	allFailed, excluded := 0, 0
	for i := range b.Points {
		if b.Points[i].AllFailed {
			allFailed++
		} else {
			excluded++
		}
	}
	why := fmt.Sprintf("%d of %d points had no successful request, %d are excluded", allFailed, len(b.Points), excluded)
	if b.Unusable != "" {
		why += "; marked unusable: " + b.Unusable
	}
	return fmt.Errorf("baseline %q has no usable point (%s): it cannot give expected values; re-import it from a run whose requests succeeded", b.Name, why)
}

func readFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading baseline input: %w", err)
	}
	return data, nil
}

// Marshal validates f, recomputes the derived fields and encodes it as YAML.
func (f *File) Marshal() ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	f.derive()
	out, err := yaml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encoding baseline YAML: %w", err)
	}
	return append([]byte("# vllm_prober baseline file, see docs/baselines.md. Latencies in seconds, throughputs per second.\n"), out...), nil
}

// Write encodes f to w.
func (f *File) Write(w io.Writer) error {
	out, err := f.Marshal()
	if err != nil {
		return err
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("writing baseline YAML: %w", err)
	}
	return nil
}

func (f *File) derive() {
	for _, b := range f.Baselines {
		b.SaturationOutput = b.SaturationOutputThroughput()
	}
}

// Validate checks the invariants documented in docs/baselines.md.
func (f *File) Validate() error {
	if f.Version != FormatVersion {
		return fmt.Errorf("unsupported baseline file version %d (this build reads version %d)", f.Version, FormatVersion)
	}
	if len(f.Baselines) == 0 {
		return errors.New("no baselines in file")
	}
	names := map[string]bool{}
	for i, b := range f.Baselines {
		if b == nil {
			return fmt.Errorf("baselines[%d]: empty entry", i)
		}
		if b.Name == "" {
			return fmt.Errorf("baselines[%d]: missing name", i)
		}
		if names[b.Name] {
			return fmt.Errorf("baselines[%d]: duplicate name %q", i, b.Name)
		}
		names[b.Name] = true
		if err := b.validate(); err != nil {
			return fmt.Errorf("baseline %q: %w", b.Name, err)
		}
	}
	return nil
}

func (b *Baseline) validate() error {
	if b.Source.Tool == "" {
		return errors.New("source: missing tool")
	}
	if b.MaxModelLen < 0 {
		return fmt.Errorf("max_model_len %d is negative", b.MaxModelLen)
	}
	for k := range b.ServerParams {
		if k == "" {
			return errors.New("server_params: empty parameter name")
		}
	}
	if p := b.Parallelism; p != nil && (p.TP < 0 || p.PP < 0 || p.DP < 0) {
		return errors.New("parallelism: sizes must not be negative")
	}
	if len(b.Points) == 0 {
		return errors.New("no points")
	}
	seen := map[string]int{}
	for i := range b.Points {
		p := &b.Points[i]
		if err := p.validate(); err != nil {
			return fmt.Errorf("points[%d]: %w", i, err)
		}
		k := p.loadString()
		if j, dup := seen[k]; dup {
			return fmt.Errorf("points[%d]: same load level as points[%d] (%s)", i, j, k)
		}
		seen[k] = i
	}
	return nil
}

func (p *Point) validate() error {
	if p.Concurrency == nil && p.RequestRate == nil {
		return errors.New("neither concurrency nor request_rate is set")
	}
	if p.Concurrency != nil && !(*p.Concurrency > 0) {
		return fmt.Errorf("concurrency %s is not positive", p.Concurrency)
	}
	if p.RequestRate != nil && !(*p.RequestRate > 0) {
		return fmt.Errorf("request_rate %s is not positive", p.RequestRate)
	}
	for k, v := range p.ToolFigures {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("tool_figures.%s %v is not finite", k, v)
		}
	}
	for name, v := range map[string]*int64{"num_prompts": p.NumPrompts, "completed": p.Completed, "failed": p.Failed,
		"input_len": p.InputLen, "output_len": p.OutputLen,
		"total_input_tokens": p.TotalInputTokens, "total_output_tokens": p.TotalOutputTokens} {
		if v != nil && *v < 0 {
			return fmt.Errorf("%s %d is negative", name, *v)
		}
	}
	for name, v := range map[string]*float64{"duration_seconds": p.DurationSeconds, "request_throughput": p.RequestThroughput,
		"request_goodput": p.RequestGoodput, "output_throughput": p.OutputThroughput, "input_throughput": p.InputThroughput,
		"total_token_throughput": p.TotalTokenThroughput, "peak_output_throughput": p.PeakOutputThroughput,
		"peak_concurrent_requests": p.PeakConcurrency, "token_goodput": p.TokenGoodput} {
		if v != nil && !(*v >= 0 && !math.IsInf(*v, 0)) {
			return fmt.Errorf("%s %v is not a finite non-negative number", name, *v)
		}
	}
	if a := p.SLOAttainment; a != nil && !(*a >= 0 && *a <= 1) {
		return fmt.Errorf("slo_attainment %v is not a ratio between 0 and 1 (good requests / all requests)", *a)
	}
	if o := p.GoodputObjectives; o != nil {
		if err := o.validate(); err != nil {
			return fmt.Errorf("goodput_objectives: %w", err)
		}
	}
	for name, s := range map[string]*Stats{"ttft_seconds": p.TTFT, "tpot_seconds": p.TPOT, "itl_seconds": p.ITL,
		"e2e_seconds": p.E2E, "tpot_incl_ttft_seconds": p.TPOTInclTTFT,
		"output_throughput_per_request": p.OutputThroughputPerRequest, "input_throughput_per_request": p.InputThroughputPerRequest} {
		if err := s.validate(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func (s *Stats) validate() error {
	if s == nil {
		return nil
	}
	if s.empty() {
		return errors.New("no statistics")
	}
	for name, v := range map[string]*float64{"mean": s.Mean, "median": s.Median, "std": s.Std, "min": s.Min, "max": s.Max} {
		if v != nil && !(*v >= 0 && !math.IsInf(*v, 0)) {
			return fmt.Errorf("%s %v is not a finite non-negative number", name, *v)
		}
	}
	for k, v := range s.Percentiles {
		if _, err := percentileQ(k); err != nil {
			return err
		}
		if !(v >= 0 && !math.IsInf(v, 0)) {
			return fmt.Errorf("%s %v is not a finite non-negative number", k, v)
		}
	}
	return nil
}

// SpecDecodeAcceptedPerDraft is the draft tokens accepted per draft that the
// baseline's runs with speculative decoding measured (their median
// acceptance length minus the token the target model adds); false when no
// usable point has it.
func (b *Baseline) SpecDecodeAcceptedPerDraft() (float64, bool) {
	var vs []float64
	for _, p := range b.Points {
		if p.AllFailed || p.Excluded != "" || p.SpecDecodeAcceptanceLength == nil || *p.SpecDecodeAcceptanceLength < 1 {
			continue
		}
		vs = append(vs, *p.SpecDecodeAcceptanceLength-1)
	}
	if len(vs) == 0 {
		return 0, false
	}
	sort.Float64s(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2, true
	}
	return vs[len(vs)/2], true
}
