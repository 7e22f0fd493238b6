package baseline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vllm-prober/vllm_prober/config"
)

// Format identifies an input format the importer reads.
type Format string

// The input formats. docs/baselines.md describes each.
const (
	FormatBaseline               Format = "baseline-yaml"            // this package's own file (bench output)
	FormatVLLMServeJSON          Format = "vllm-serve-json"          // vllm bench serve / benchmark_serving.py --save-result
	FormatVLLMServeJSONL         Format = "vllm-serve-jsonl"         // the same, JSON Lines from --append-result
	FormatVLLMSweepSummary       Format = "vllm-sweep-summary"       // vllm bench sweep serve summary.json
	FormatVLLMServeText          Format = "vllm-serve-text"          // printed "Serving Benchmark Result" blocks
	FormatVLLMCIJSON             Format = "vllm-ci-json"             // CI tables as pandas dict-of-dicts JSON
	FormatVLLMCIRecords          Format = "vllm-ci-records"          // CI benchmark_results.json (list of rows)
	FormatVLLMCIMarkdown         Format = "vllm-ci-markdown"         // CI markdown serving table
	FormatGuideLLM               Format = "guidellm-json"            // guidellm benchmarks.json
	FormatAIPerf                 Format = "aiperf-json"              // aiperf profile_export_aiperf.json
	FormatGenAIPerf              Format = "genai-perf-json"          // genai-perf profile_export_genai_perf.json
	FormatLLMPerf                Format = "llmperf-summary"          // llmperf *_summary.json
	FormatInferencePerf          Format = "inference-perf-json"      // inference-perf *_lifecycle_metrics.json
	FormatPresetHTMLTables       Format = "preset-html-tables"       // the multi-GPU presets report's tables
	FormatThroughputLatencyTable Format = "throughput-latency-table" // the Lambda A100/H100 report's table
)

// Import is what one input file yielded: partial baselines (no names yet) and notes about what
// was read but deliberately not turned into points.
type Import struct {
	File      string
	Format    Format
	Baselines []*Baseline
	Notes     []string
}

// NumPoints counts the points of an import.
func (im *Import) NumPoints() int {
	n := 0
	for _, b := range im.Baselines {
		n += len(b.Points)
	}
	return n
}

// ImportOption changes how ImportFile and ImportBytes import an input.
type ImportOption func(*importOptions)

type importOptions struct {
	goodput *config.Objectives
}

// WithGoodput states the goodput objectives the input's goodput figures were measured against,
// for files that do not store them (vllm bench serve --save-result, inference-perf's lifecycle
// reports): baseline import --goodput. A file that states other objectives is an error.
func WithGoodput(o config.Objectives) ImportOption {
	return func(io *importOptions) { io.goodput = &o }
}

// ImportFile reads path, detects its format and imports it.
func ImportFile(ctx context.Context, path string, opts ...ImportOption) (*Import, error) {
	data, err := readFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return ImportBytes(path, data, opts...)
}

// ImportBytes detects the format of data (named name in messages) and imports it. Errors name the
// file and what is missing.
func ImportBytes(name string, data []byte, opts ...ImportOption) (im *Import, err error) {
	var o importOptions
	for _, opt := range opts {
		opt(&o)
	}
	d, err := detect(name, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	im = &Import{File: name, Format: d.format}
	switch d.format {
	case FormatBaseline:
		err = importBaselineYAML(im, data)
	case FormatVLLMServeJSON, FormatVLLMServeJSONL, FormatVLLMSweepSummary:
		err = importVLLMServeJSON(im, d.values)
	case FormatVLLMServeText:
		err = importVLLMServeText(im, string(data))
	case FormatVLLMCIJSON:
		err = importVLLMCIJSON(im, d.values[0])
	case FormatVLLMCIRecords:
		err = importVLLMCIRecords(im, d.values[0])
	case FormatVLLMCIMarkdown:
		err = importVLLMCIMarkdown(im, string(data))
	case FormatGuideLLM:
		err = importGuideLLM(im, d.values[0])
	case FormatAIPerf, FormatGenAIPerf:
		err = importAIPerf(im, d.values[0])
	case FormatLLMPerf:
		err = importLLMPerf(im, d.values[0])
	case FormatInferencePerf:
		err = importInferencePerf(im, d.values[0])
	case FormatPresetHTMLTables:
		err = importPresetHTML(im, string(data))
	case FormatThroughputLatencyTable:
		err = importThroughputLatencyTable(im, string(data))
	default:
		err = fmt.Errorf("no importer for format %q", d.format)
	}
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, d.format, err)
	}
	if im.NumPoints() == 0 {
		return nil, fmt.Errorf("%s (%s): no benchmark points found", name, d.format)
	}
	if err := im.finishGoodput(o.goodput); err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, d.format, err)
	}
	base := filepath.Base(name)
	for _, b := range im.Baselines {
		if b.Source.Format == "" {
			b.Source.Format = string(d.format)
		}
		if len(b.Source.Files) == 0 {
			b.Source.Files = []string{base}
		}
		if b.Source.Definitions == nil {
			b.Source.Definitions = definitionsFor(b.Source.Tool)
		}
		if b.Source.PercentileMethod == "" {
			b.Source.PercentileMethod = percentileMethodFor(b.Source.Tool)
		}
		b.Framework = normalizeFramework(b.Framework)
		b.Source.Date = normalizeDate(b.Source.Date)
		for i := range b.Points {
			b.Points[i].Date = normalizeDate(b.Points[i].Date)
		}
	}
	return im, nil
}

// Build merges the baselines of several imports into one file. Baselines with the same identity
// (model, hardware, preset, parallelism, max_model_len, tool, framework, server parameters, run
// number, series) become one baseline with
// all their points. A point at a load level the baseline already has is dropped if it is an exact
// duplicate (with a note), else it starts another baseline of the same identity. Names are name
// for a single baseline, else name + "/" + what tells them apart.
func Build(name string, imports []*Import) (*File, []string, error) {
	if len(imports) == 0 {
		return nil, nil, errors.New("no inputs")
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(imports[0].File), filepath.Ext(imports[0].File))
	}
	var notes []string
	var out []*Baseline
	groups := map[string][]*Baseline{} // identity -> baselines (variants) with that identity
	for _, im := range imports {
		for _, b := range im.Baselines {
			key := identity(b)
			for _, p := range b.Points {
				placed := false
				for _, g := range groups[key] {
					j := g.pointAt(&p)
					if j < 0 {
						g.Points = append(g.Points, p)
						mergeSource(&g.Source, &b.Source)
						placed = true
						break
					}
					if samePoint(&g.Points[j], &p) {
						mergePoint(&g.Points[j], &p)
						notes = append(notes, fmt.Sprintf("%s: point %s (%s) duplicates %s; kept once", im.File, p.loadString(), p.Ref, g.Points[j].Ref))
						placed = true
						break
					}
				}
				if !placed {
					nb := *b
					nb.Points = []Point{p}
					nb.Source.Files = append([]string(nil), b.Source.Files...)
					nb.series = b.series
					groups[key] = append(groups[key], &nb)
					out = append(out, &nb)
				}
			}
		}
	}
	for _, b := range out {
		sort.SliceStable(b.Points, func(i, j int) bool { return pointLess(&b.Points[i], &b.Points[j]) })
	}
	nameBaselines(name, out)
	for _, b := range out {
		pruneDefinitions(b)
	}
	f := &File{Version: FormatVersion, Baselines: out}
	if err := f.Validate(); err != nil {
		return nil, notes, err
	}
	f.derive()
	return f, notes, nil
}

func identity(b *Baseline) string {
	var par Parallelism
	if b.Parallelism != nil {
		par = *b.Parallelism
	}
	run := ""
	if b.RunNumber != nil {
		run = strconv.FormatInt(*b.RunNumber, 10)
	}
	return strings.Join([]string{b.Model, b.Hardware, b.Preset, fmt.Sprint(par.TP, "/", par.PP, "/", par.DP),
		strconv.FormatInt(b.MaxModelLen, 10), b.Source.Tool, b.Framework, serverParamsString(b.ServerParams), run, b.series}, "\x00")
}

// serverParamsString writes server parameters as sorted k=v pairs joined by ",".
func serverParamsString(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func (b *Baseline) pointAt(p *Point) int {
	k := p.loadString()
	for i := range b.Points {
		if b.Points[i].loadString() == k {
			return i
		}
	}
	return -1
}

// samePoint reports whether two points at the same load level agree on every value both have
// (source references aside); mergePoint then fills in the values only b has.
func samePoint(a, b *Point) bool {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < va.NumField(); i++ {
		switch va.Type().Field(i).Name {
		case "Ref", "Label", "Date":
			continue
		}
		fa, fb := va.Field(i), vb.Field(i)
		if fa.IsZero() || fb.IsZero() {
			continue
		}
		if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			return false
		}
	}
	return true
}

func mergePoint(dst, src *Point) {
	vd, vs := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := 0; i < vd.NumField(); i++ {
		if vd.Field(i).IsZero() && !vs.Field(i).IsZero() {
			vd.Field(i).Set(vs.Field(i))
		}
	}
}

func pointLess(a, b *Point) bool {
	ka, va := a.LoadKey()
	kb, vb := b.LoadKey()
	if ka != kb {
		return ka < kb
	}
	if va != vb {
		return va < vb
	}
	ra, rb := 0.0, 0.0
	if a.RequestRate != nil {
		ra = float64(*a.RequestRate)
	}
	if b.RequestRate != nil {
		rb = float64(*b.RequestRate)
	}
	return ra < rb
}

func mergeSource(dst, src *Source) {
	for _, f := range src.Files {
		found := false
		for _, g := range dst.Files {
			found = found || f == g
		}
		if !found {
			dst.Files = append(dst.Files, f)
		}
	}
	if dst.Date == "" {
		dst.Date = src.Date
	}
}

// nameBaselines names each baseline after the fields that vary between the baselines.
func nameBaselines(name string, out []*Baseline) {
	if len(out) == 1 {
		out[0].Name = name
		return
	}
	par := func(b *Baseline) Parallelism {
		if b.Parallelism == nil {
			return Parallelism{}
		}
		return *b.Parallelism
	}
	parts := []func(*Baseline) string{
		func(b *Baseline) string { return b.Source.Tool },
		func(b *Baseline) string {
			if b.Preset != "" {
				return b.Preset
			}
			return b.Hardware
		},
		func(b *Baseline) string { return modelBase(b.Model) },
		func(b *Baseline) string {
			var s []string
			p := par(b)
			for _, x := range []struct {
				n string
				v int64
			}{{"tp", p.TP}, {"pp", p.PP}, {"dp", p.DP}} {
				if x.v > 0 {
					s = append(s, x.n+strconv.FormatInt(x.v, 10))
				}
			}
			return strings.Join(s, "-")
		},
		func(b *Baseline) string {
			if b.MaxModelLen > 0 {
				return "ctx" + strconv.FormatInt(b.MaxModelLen, 10)
			}
			return ""
		},
		func(b *Baseline) string { return b.Framework },
		func(b *Baseline) string { return serverParamsString(b.ServerParams) },
		func(b *Baseline) string {
			if b.RunNumber != nil {
				return "run" + strconv.FormatInt(*b.RunNumber, 10)
			}
			return ""
		},
		func(b *Baseline) string { return b.series },
	}
	var used []func(*Baseline) string
	for _, get := range parts {
		first := get(out[0])
		for _, b := range out[1:] {
			if get(b) != first {
				used = append(used, get)
				break
			}
		}
	}
	taken := map[string]int{}
	for _, b := range out {
		var s []string
		for _, get := range used {
			if v := get(b); v != "" {
				s = append(s, v)
			}
		}
		n := name
		if len(s) > 0 {
			n += "/" + strings.Join(s, "/")
		}
		taken[n]++
		if taken[n] > 1 {
			n += "#" + strconv.Itoa(taken[n])
		}
		b.Name = n
	}
}

// modelBase is the last path element of a model id ("Llama-3.1-8B" of "meta-llama/Llama-3.1-8B" or
// of "/data/llm/Llama-3.1-8B/"), and "" for no model (filepath.Base would give ".").
func modelBase(model string) string {
	m := strings.TrimRight(model, `/\`)
	if m == "" {
		return ""
	}
	return filepath.Base(m)
}

// detected is the outcome of format detection.
type detected struct {
	format Format
	values []any // decoded JSON values, for JSON formats
}

// Detect returns the format of data without importing it. name is used in messages and to
// recognise PyTorch companion files.
func Detect(name string, data []byte) (Format, error) {
	d, err := detect(name, data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return d.format, nil
}

var (
	reYAMLBaseline = regexp.MustCompile(`(?m)^version:\s*\S+\s*$`)
	reCIEmbedded   = regexp.MustCompile(`(?m)^\s*\{"latency":`)
	reMDCIHeader   = regexp.MustCompile(`(?m)^\|\s*Test name\s*\|.*Tput \(req/s\)`)
	reTLCell       = regexp.MustCompile(`\|\s*\d+(?:\.\d+)?/\d+(?:\.\d+)?\s*\|`)
)

func detect(name string, data []byte) (detected, error) {
	trimmed := strings.TrimSpace(string(data))
	if trimmed == "" {
		return detected{}, errors.New("empty file")
	}
	if strings.HasSuffix(name, ".pytorch.json") {
		return detected{}, errors.New("a PyTorch OSS benchmark companion file (.pytorch.json), not a vLLM result: import the sibling .json file written by --save-result instead")
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		return detectJSON(data)
	}
	switch {
	case strings.Contains(trimmed, "Serving Benchmark Result"):
		return detected{format: FormatVLLMServeText}, nil
	case reCIEmbedded.MatchString(trimmed):
		loc := reCIEmbedded.FindStringIndex(trimmed)
		rest := trimmed[loc[0]:]
		if end := strings.Index(rest, "\n```"); end >= 0 {
			rest = rest[:end]
		} else if end := strings.IndexByte(rest, '\n'); end >= 0 {
			rest = rest[:end]
		}
		vals, err := decodeJSONValues([]byte(rest))
		if err != nil {
			return detected{}, fmt.Errorf("embedded CI results JSON: %w", err)
		}
		if len(vals) != 1 {
			return detected{}, fmt.Errorf("embedded CI results JSON: want one JSON object, found %d values", len(vals))
		}
		return detected{format: FormatVLLMCIJSON, values: vals}, nil
	case reMDCIHeader.MatchString(trimmed):
		return detected{format: FormatVLLMCIMarkdown}, nil
	case strings.Contains(trimmed, "<table") && strings.Contains(trimmed, "Gen TPS"):
		return detected{format: FormatPresetHTMLTables}, nil
	case reTLCell.MatchString(trimmed):
		return detected{format: FormatThroughputLatencyTable}, nil
	case reYAMLBaseline.MatchString(trimmed) && strings.Contains(trimmed, "baselines:"):
		return detected{format: FormatBaseline}, nil
	}
	return detected{}, errors.New("unrecognized format: not JSON from a known tool, no \"Serving Benchmark Result\" block, no vLLM CI table, no benchmark table and no baseline YAML (see docs/baselines.md for the formats read)")
}

const errAIPerfRequestRecords = "aiperf per-request records (profile_export.jsonl), no summary statistics: import the profile_export_aiperf.json that aiperf writes next to it"

// isAIPerfRequestRecord recognises a line of aiperf's profile_export.jsonl: {"metadata": {...},
// "metrics": {"time_to_first_token": {"value": 10.5, "unit": "ms"}, ...}}.
func isAIPerfRequestRecord(o map[string]any) bool {
	m, ok := o["metrics"].(map[string]any)
	if !ok || o["metadata"] == nil {
		return false
	}
	for _, v := range m {
		if mv, ok := v.(map[string]any); ok && mv["value"] != nil && mv["unit"] != nil {
			return true
		}
	}
	return false
}

func detectJSON(data []byte) (detected, error) {
	vals, err := decodeJSONValues(data)
	if err != nil {
		return detected{}, err
	}
	if o, ok := vals[0].(map[string]any); ok && isAIPerfRequestRecord(o) {
		return detected{}, errors.New(errAIPerfRequestRecords)
	}
	if len(vals) > 1 {
		for i, v := range vals {
			o, ok := v.(map[string]any)
			if !ok || !isVLLMServeRecord(o) {
				return detected{}, fmt.Errorf("JSON Lines record %d is not a vllm bench serve result (missing \"request_throughput\" or \"completed\")", i+1)
			}
		}
		return detected{format: FormatVLLMServeJSONL, values: vals}, nil
	}
	switch v := vals[0].(type) {
	case []any:
		if len(v) == 0 {
			return detected{}, errors.New("empty JSON array")
		}
		first, ok := v[0].(map[string]any)
		if !ok {
			return detected{}, fmt.Errorf("JSON array of %s, not of result objects", jsonKind(v[0]))
		}
		switch {
		case first["benchmark"] != nil && first["metric"] != nil:
			return detected{}, errors.New("a PyTorch OSS benchmark records file (.pytorch.json companion), not a vLLM result: import the sibling .json file written by --save-result instead")
		case isVLLMServeRecord(first):
			return detected{format: FormatVLLMSweepSummary, values: []any{v}}, nil
		case first["Test name"] != nil:
			return detected{format: FormatVLLMCIRecords, values: vals}, nil
		case first["ttft_s"] != nil && first["end_to_end_latency_s"] != nil:
			return detected{}, errors.New("llmperf per-request responses (*_individual_responses.json), no summary statistics: import the *_summary.json that llmperf writes next to it")
		}
		return detected{}, fmt.Errorf("JSON array of objects with keys %s: not a known result format", keyList(first))
	case map[string]any:
		switch {
		case v["benchmarks"] != nil:
			return detected{format: FormatGuideLLM, values: vals}, nil
		case isCIDict(v):
			return detected{format: FormatVLLMCIJSON, values: vals}, nil
		case isInferencePerfReport(v):
			return detected{format: FormatInferencePerf, values: vals}, nil
		case v["num_concurrent_requests"] != nil || hasPrefixKey(v, "results_"):
			return detected{format: FormatLLMPerf, values: vals}, nil
		case isAIPerfRecords(v):
			return detected{format: FormatAIPerf, values: vals}, nil
		case isStatObject(v["time_to_first_token"]) || isStatObject(v["request_throughput"]) || isStatObject(v["request_latency"]):
			if v["aiperf_version"] != nil || v["schema_version"] != nil || v["was_cancelled"] != nil || v["error_summary"] != nil {
				return detected{format: FormatAIPerf, values: vals}, nil
			}
			return detected{format: FormatGenAIPerf, values: vals}, nil
		case isVLLMServeRecord(v):
			return detected{format: FormatVLLMServeJSON, values: vals}, nil
		case v["reason"] != nil && len(v) <= 3:
			return detected{}, fmt.Errorf("a stub without results (reason: %v), the benchmark did not run", v["reason"])
		}
		return detected{}, fmt.Errorf("JSON object with keys %s: not a known result format", keyList(v))
	}
	return detected{}, fmt.Errorf("a JSON %s, not a result object", jsonKind(vals[0]))
}

func isVLLMServeRecord(o map[string]any) bool {
	_, rt := o["request_throughput"]
	_, c := o["completed"]
	_, isStat := o["request_throughput"].(map[string]any)
	return rt && c && !isStat
}

func isCIDict(o map[string]any) bool {
	for _, k := range []string{"serving", "latency", "throughput"} {
		if _, ok := o[k].(map[string]any); !ok {
			if o[k] != nil {
				return false
			}
		}
	}
	s, ok := o["serving"].(map[string]any)
	return ok && (len(s) == 0 || s["Test name"] != nil)
}

// isAIPerfRecords recognises the early aiperf export that nests the metrics under "records", each
// with its "tag" (aiperf's examples/artifacts/run1/profile_export_aiperf.json).
func isAIPerfRecords(o map[string]any) bool {
	recs, ok := o["records"].(map[string]any)
	if !ok || o["input_config"] == nil {
		return false
	}
	for _, r := range recs {
		if ro, ok := r.(map[string]any); ok && ro["tag"] != nil && isStatObject(ro) {
			return true
		}
	}
	return false
}

func isStatObject(v any) bool {
	o, ok := v.(map[string]any)
	return ok && (o["avg"] != nil || o["unit"] != nil)
}

func hasPrefixKey(o map[string]any, prefix string) bool {
	for k := range o {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func keyList(o map[string]any) string {
	keys := slices.Sorted(maps.Keys(o))
	if len(keys) > 8 {
		keys = append(keys[:8], "...")
	}
	return "[" + strings.Join(keys, ", ") + "]"
}

// importBaselineYAML reads this package's own file (what the bench command writes).
func importBaselineYAML(im *Import, data []byte) error {
	f, err := Parse(data)
	if err != nil {
		return err
	}
	for _, b := range f.Baselines {
		nb := *b
		nb.series = b.Name
		im.Baselines = append(im.Baselines, &nb)
	}
	return nil
}

// pruneDefinitions keeps the definitions of the metrics the baseline's points have.
func pruneDefinitions(b *Baseline) {
	present := map[string]bool{}
	for i := range b.Points {
		v := reflect.ValueOf(&b.Points[i]).Elem()
		for j := 0; j < v.NumField(); j++ {
			if !v.Field(j).IsZero() {
				present[strings.Split(v.Type().Field(j).Tag.Get("yaml"), ",")[0]] = true
			}
		}
	}
	for k := range b.Source.Definitions {
		if !present[k] {
			delete(b.Source.Definitions, k)
		}
	}
}
