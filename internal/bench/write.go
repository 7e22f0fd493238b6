package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/atomicfile"
	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Tool is the source.tool of the baseline files bench writes.
const Tool = "vllm_prober bench"

// CSVHeader returns the CSV columns: the multi-GPU presets report's six (Prompt TPS, Gen TPS, Avg
// Latency, Request Generation Level TPS, Request Prompt Level TPS, Errors)
// after the level, then vLLM's throughputs and latency statistics.
func CSVHeader(percentiles []float64) []string {
	h := []string{"Load Type", "Load", "Requests", "Prompt TPS", "Gen TPS", "Avg Latency (s)",
		"Request Generation Level TPS", "Request Prompt Level TPS", "Errors",
		"Successful Requests", "Duration (s)", "Request Throughput (req/s)", "Output Throughput (tok/s)",
		"Total Token Throughput (tok/s)", "Peak Output Throughput (tok/s)", "Peak Concurrent Requests"}
	for _, name := range []string{"TTFT", "TPOT", "ITL", "E2EL"} {
		h = append(h, "Mean "+name+" (ms)", "Median "+name+" (ms)", "Std "+name+" (ms)")
		for _, p := range percentiles {
			h = append(h, "P"+PercentileLabel(p)+" "+name+" (ms)")
		}
	}
	return append(h, "Mean Running", "Mean Waiting", "Mean Swapped", "Mean KV Cache Usage", "Max KV Cache Usage", "Max CPU KV Cache Usage")
}

// WriteCSV writes one row per level. The multi-GPU presets report's Prompt TPS and Gen TPS are the
// server's token counters polled from /metrics; an empty cell is a value the
// server did not expose.
func WriteCSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader(rep.Percentiles)); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	for _, lr := range rep.Levels {
		m, s := &lr.Metrics, &lr.Server
		row := []string{lr.Level.Type, formatLoad(lr.Level.Value), strconv.Itoa(m.Completed + m.Failed),
			f2(s.PromptTPS), f2(s.GenerationTPS), f2(m.E2E.Mean), f2(m.OutputTPSPerRequest.Mean),
			f2(m.InputTPSPerRequest.Mean), strconv.Itoa(m.Failed), strconv.Itoa(m.Completed),
			f2(m.Duration.Seconds()), f2(m.RequestThroughput), f2(m.OutputThroughput),
			f2(m.TotalTokenThroughput), f2(m.MaxOutputTokensPerS), strconv.Itoa(m.MaxConcurrentRequests)}
		for _, d := range []*Dist{&m.TTFT, &m.TPOT, &m.ITL, &m.E2E} {
			row = append(row, f2(d.Mean*1000), f2(d.Median*1000), f2(d.Std*1000))
			for _, v := range d.Percentiles {
				row = append(row, f2(v*1000))
			}
		}
		row = append(row, f2(s.MeanRunning), f2(s.MeanWaiting), f2(s.MeanSwapped), f4(s.MeanKVUsage), f4(s.MaxKVUsage), f4(s.MaxCPUKVUsage))
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("writing CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	return nil
}

func f2(v float64) string { return fnum(v, 2) }
func f4(v float64) string { return fnum(v, 4) }

func fnum(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// WriteServerCSV writes the polled /metrics series of one level.
func WriteServerCSV(w io.Writer, lr *LevelResult) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"Offset (s)", "Prompt Tokens", "Generation Tokens", "Prompt TPS", "Gen TPS",
		"Running", "Waiting", "Swapped", "KV Cache Usage", "CPU KV Cache Usage"})
	for _, s := range lr.Server.Samples {
		_ = cw.Write([]string{fnum(s.Offset.Seconds(), 3), fnum(s.PromptTokens, 0), fnum(s.GenerationTokens, 0),
			f2(s.PromptTPS), f2(s.GenerationTPS), fnum(s.Running, 0), fnum(s.Waiting, 0), fnum(s.Swapped, 0),
			f4(s.KVUsage), f4(s.CPUKVUsage)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing server CSV: %w", err)
	}
	return nil
}

// rawJSON is JSON text that orderedJSON.add writes as it is.
type rawJSON []byte

// orderedJSON writes a JSON object with keys in insertion order, formatted like
// Python's json.dump (", " and ": " separators, floats keep a ".0").
type orderedJSON struct {
	buf bytes.Buffer
	n   int
}

func (o *orderedJSON) add(key string, v any) {
	if o.n == 0 {
		o.buf.WriteByte('{')
	} else {
		o.buf.WriteString(", ")
	}
	o.n++
	k, _ := json.Marshal(key)
	o.buf.Write(k)
	o.buf.WriteString(": ")
	switch x := v.(type) {
	case float64:
		o.buf.WriteString(pyFloat(x))
	case []float64:
		pyList(&o.buf, x, writePyFloat)
	case [][]float64:
		pyList(&o.buf, x, func(b *bytes.Buffer, fs []float64) { pyList(b, fs, writePyFloat) })
	case []int:
		pyList(&o.buf, x, func(b *bytes.Buffer, n int) { b.WriteString(strconv.Itoa(n)) })
	case rawJSON:
		o.buf.Write(x)
	case string:
		pyString(&o.buf, x)
	case []string:
		pyList(&o.buf, x, pyString)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			b = []byte("null")
		}
		o.buf.Write(b)
	}
}

func (o *orderedJSON) bytes() []byte {
	if o.n == 0 {
		return []byte("{}")
	}
	return append(o.buf.Bytes(), '}')
}

// pyList writes xs as a JSON list with Python's ", " separator.
func pyList[T any](b *bytes.Buffer, xs []T, write func(*bytes.Buffer, T)) {
	b.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		write(b, x)
	}
	b.WriteByte(']')
}

func writePyFloat(b *bytes.Buffer, f float64) { b.WriteString(pyFloat(f)) }

// pyString writes s as Python's json.dump does by default (ensure_ascii):
// non-ASCII as \uXXXX escapes (surrogate pairs above U+FFFF), control
// characters as \n, \t, ... or \u00XX, and "<", ">", "&" unescaped (unlike
// encoding/json). Invalid UTF-8 is written as U+FFFD.
func pyString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r >= 0x7f && r <= 0xffff):
			fmt.Fprintf(b, `\u%04x`, r)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pyFloat formats v like Python's float repr (shortest round trip, "1.0").
func pyFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	abs := math.Abs(v)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		s := strconv.FormatFloat(v, 'e', -1, 64)
		// Python writes 1e-05 where Go writes 1e-05 too; mantissas agree.
		return s
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// ServeJSON encodes one level as a `vllm bench serve --save-result` result
// (vLLM's vllm/benchmarks/serve.py, benchmark() and main_async): the same keys
// in the same order, times in ms for the statistics, request_rate "inf" for
// concurrency levels.
//
// With rep.SaveDetailed the per-request arrays of --save-detailed follow
// total_token_throughput, one entry per request sent (failed ones included),
// in request order: input_lens (prompt tokens from the server's usage, 0 when
// the request failed), output_lens (0 for a failed request), ttfts (seconds),
// itls (seconds, a list per request), start_times (seconds since the level
// started; vLLM's are time.perf_counter() readings, whose origin is arbitrary
// too), generated_texts (LevelResult.Texts: the whole text of each request, as
// far as it came for a failed one) and errors ("" for a successful
// request), in the order of vLLM's serve.py.
//
// When a request failed, errors is written even without SaveDetailed, each
// entry "<reason>: <message>" with the prober's failure reason, and
// failure_reasons (not a vLLM key) holds the breakdown of FailureBreakdown:
// [{"reason", "status" (when the server answered an error status), "count",
// "example"}].
func ServeJSON(rep *Report, lr *LevelResult) []byte {
	m := &lr.Metrics
	backend := "vllm"
	if rep.Endpoint == config.ProberChat {
		backend = "openai-chat"
	}
	o := &orderedJSON{}
	o.add("date", rep.Date.Format("20060102-150405"))
	o.add("endpoint_type", backend)
	o.add("backend", backend)
	o.add("label", rep.Name)
	o.add("model_id", rep.Model)
	o.add("tokenizer_id", rep.Model)
	o.add("num_prompts", m.Completed+m.Failed)
	if lr.Level.Type == LoadRequestRate && !math.IsInf(lr.Level.Value, 1) {
		o.add("request_rate", lr.Level.Value)
	} else {
		o.add("request_rate", "inf")
	}
	o.add("burstiness", 1.0)
	if lr.Level.Type == LoadConcurrency {
		o.add("max_concurrency", int(lr.Level.Value))
	} else {
		o.add("max_concurrency", nil)
	}
	o.add("duration", m.Duration.Seconds())
	o.add("completed", m.Completed)
	o.add("failed", m.Failed)
	o.add("total_input_tokens", m.TotalInput)
	o.add("total_output_tokens", m.TotalOutput)
	o.add("request_throughput", m.RequestThroughput)
	if lr.Goodput != nil {
		o.add("request_goodput", lr.Goodput.RequestGoodput)
		// Not vLLM keys: the attainment and the objectives it was measured
		// against (--goodput's syntax), which vLLM's file does not keep.
		o.add("slo_attainment", lr.Goodput.Attainment)
		if rep.Goodput != nil {
			o.add("goodput_objectives", rep.Goodput.String())
		}
	} else {
		o.add("request_goodput", nil)
	}
	o.add("output_throughput", m.OutputThroughput)
	o.add("total_token_throughput", m.TotalTokenThroughput)
	if rep.SaveDetailed {
		addDetail(o, lr)
	}
	if m.Failed > 0 {
		if !rep.SaveDetailed {
			o.add("errors", requestErrors(lr.Results))
		}
		o.add("failure_reasons", failureReasons(m.Failures))
	}
	o.add("max_output_tokens_per_s", m.MaxOutputTokensPerS)
	o.add("max_concurrent_requests", m.MaxConcurrentRequests)
	for _, s := range []struct {
		name string
		d    *Dist
	}{{"ttft", &m.TTFT}, {"tpot", &m.TPOT}, {"itl", &m.ITL}, {"e2el", &m.E2E}} {
		o.add("mean_"+s.name+"_ms", s.d.Mean*1000)
		o.add("median_"+s.name+"_ms", s.d.Median*1000)
		o.add("std_"+s.name+"_ms", s.d.Std*1000)
		for i, p := range rep.Percentiles {
			o.add("p"+PercentileLabel(p)+"_"+s.name+"_ms", s.d.Percentiles[i]*1000)
		}
	}
	return append(o.bytes(), '\n')
}

// addDetail adds the per-request arrays of --save-detailed (see ServeJSON).
func addDetail(o *orderedJSON, lr *LevelResult) {
	n := len(lr.Results)
	inputs, outputs := make([]int, n), make([]int, n)
	ttfts, starts := make([]float64, n), make([]float64, n)
	itls := make([][]float64, n)
	texts := make([]string, n)
	copy(texts, lr.Texts)
	for i := range lr.Results {
		r := &lr.Results[i]
		itls[i] = make([]float64, len(r.ITLs))
		for j, g := range r.ITLs {
			itls[i][j] = g.Seconds()
		}
		ttfts[i] = r.TTFT.Seconds()
		if !r.Start.IsZero() {
			starts[i] = r.Start.Sub(lr.Start).Seconds()
		}
		if r.Success {
			inputs[i] = r.PromptTokens
			outputs[i] = max(r.OutputTokens, 1) // as Calculate counts it
		}
	}
	o.add("input_lens", inputs)
	o.add("output_lens", outputs)
	o.add("ttfts", ttfts)
	o.add("itls", itls)
	o.add("start_times", starts)
	o.add("generated_texts", texts)
	o.add("errors", requestErrors(lr.Results))
}

// requestErrors is vLLM's per-request errors array: "" for a success, else
// the prober's reason and message.
func requestErrors(results []probe.Result) []string {
	out := make([]string, len(results))
	for i := range results {
		if r := &results[i]; !r.Success {
			out[i] = string(r.Reason) + ": " + r.Err
		}
	}
	return out
}

// failureReasons encodes the breakdown as failure_reasons: a list of
// {"reason", "status" (only for an error status), "count", "example"}.
func failureReasons(fs []Failure) rawJSON {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, f := range fs {
		if i > 0 {
			b.WriteString(", ")
		}
		o := &orderedJSON{}
		o.add("reason", string(f.Reason))
		if f.Status != 0 {
			o.add("status", f.Status)
		}
		o.add("count", f.Count)
		o.add("example", f.Example)
		b.Write(o.bytes())
	}
	b.WriteByte(']')
	return b.Bytes()
}

// definitions documents what bench's baseline metrics mean (source.definitions).
var definitions = map[string]string{
	"ttft_seconds":                  "client (probe.Stream): first SSE event carrying generated text minus the time just before the POST; chat's role-only first event does not count",
	"tpot_seconds":                  "client, per request (E2E - TTFT)/(output_tokens - 1) for requests with more than one output token, then averaged over requests (vLLM's TPOT)",
	"itl_seconds":                   "client: gaps between successive content events, pooled over all requests, chunk-weighted (vLLM's ITL)",
	"e2e_seconds":                   "client: last content event minus the time just before the POST (vLLM's E2EL)",
	"output_throughput":             "sum of output tokens (server usage) / level duration, tokens/s (vLLM's output_throughput)",
	"input_throughput":              "sum of prompt tokens (server usage) / level duration, tokens/s",
	"total_token_throughput":        "(prompt + output tokens) / level duration, tokens/s",
	"request_throughput":            "completed requests / level duration, requests/s",
	"peak_output_throughput":        "largest 1-second bucket of streamed content events (vLLM's max_output_tokens_per_s)",
	"peak_concurrent_requests":      "sweep-line peak of requests in flight (vLLM's max_concurrent_requests)",
	"output_throughput_per_request": "the multi-GPU presets report's \"Request Generation Level TPS\": per request output tokens / E2E",
	"input_throughput_per_request":  "the multi-GPU presets report's \"Request Prompt Level TPS\": per request prompt tokens / E2E",
	"completed":                     "successful requests",
	"failed":                        "failed requests (any prober failure reason)",
	"request_goodput":               "requests that succeeded and met every --goodput objective / level duration, requests/s (vLLM's request_goodput)",
	"slo_attainment":                "requests that succeeded and met every --goodput objective / every request of the level, failed ones included (GuideLLM's slo_attainment)",
	"goodput_objectives":            "the run's --goodput objectives, judged per request as the daemon judges its probes",
}

// Baseline converts the report into a baseline file (the baseline package's
// format) with one point per level. files are the result files to record as
// the source.
func Baseline(rep *Report, files []string) (*baseline.File, error) {
	b := &baseline.Baseline{
		Name:        rep.Name,
		Model:       rep.Model,
		MaxModelLen: int64(rep.MaxModelLen),
		Source: baseline.Source{
			Tool: Tool, Format: string(baseline.FormatBaseline), Files: files,
			Date:             rep.Date.Format("2006-01-02T15:04:05Z07:00"),
			PercentileMethod: "numpy.percentile linear (Hyndman-Fan type 7)",
			Definitions:      map[string]string{},
		},
	}
	for k, v := range definitions {
		b.Source.Definitions[k] = v
	}
	for _, lr := range rep.Levels {
		b.Points = append(b.Points, Point(rep, lr))
	}
	f := &baseline.File{Version: baseline.FormatVersion, Baselines: []*baseline.Baseline{b}}
	// Levels below the run's minimum success ratio are marked excluded, and a
	// baseline left without a usable point unusable, as `baseline import`
	// marks them; WriteAll writes such a file only with ForceBaseline.
	if _, err := baseline.Assess(f, baseline.AssessOptions{MinSuccessRatio: rep.minSuccessRatio(), Force: true}); err != nil {
		return nil, fmt.Errorf("assessing the baseline: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("building the baseline: %w", err)
	}
	return f, nil
}

// Point is the baseline point of one level.
func Point(rep *Report, lr *LevelResult) baseline.Point {
	m := &lr.Metrics
	fp := func(v float64) *float64 { return &v }
	ip := func(v int) *int64 { x := int64(v); return &x }
	lv := baseline.Load(lr.Level.Value)
	p := baseline.Point{
		NumPrompts:           ip(m.Completed + m.Failed),
		Label:                lr.Level.String(),
		Date:                 lr.Start.Format("2006-01-02T15:04:05Z07:00"),
		AllFailed:            m.Completed == 0,
		DurationSeconds:      fp(m.Duration.Seconds()),
		Completed:            ip(m.Completed),
		Failed:               ip(m.Failed),
		TotalInputTokens:     ip(m.TotalInput),
		TotalOutputTokens:    ip(m.TotalOutput),
		RequestThroughput:    fp(m.RequestThroughput),
		OutputThroughput:     fp(m.OutputThroughput),
		InputThroughput:      fp(m.InputThroughput),
		TotalTokenThroughput: fp(m.TotalTokenThroughput),
		PeakOutputThroughput: fp(m.MaxOutputTokensPerS),
		PeakConcurrency:      fp(float64(m.MaxConcurrentRequests)),
		TTFT:                 stats(&m.TTFT, rep.Percentiles),
		TPOT:                 stats(&m.TPOT, rep.Percentiles),
		ITL:                  stats(&m.ITL, rep.Percentiles),
		E2E:                  stats(&m.E2E, rep.Percentiles),
	}
	if lr.Goodput != nil {
		p.RequestGoodput = fp(lr.Goodput.RequestGoodput)
		p.SLOAttainment = fp(lr.Goodput.Attainment)
		if rep.Goodput != nil {
			p.GoodputObjectives = &baseline.Objectives{Objectives: *rep.Goodput}
		}
	}
	if m.Completed > 0 {
		p.OutputThroughputPerRequest = stats(&m.OutputTPSPerRequest, rep.Percentiles)
		p.InputThroughputPerRequest = stats(&m.InputTPSPerRequest, rep.Percentiles)
	}
	if lr.Level.Type == LoadConcurrency {
		p.Concurrency = &lv
	} else {
		p.RequestRate = &lv
	}
	return p
}

func stats(d *Dist, percentiles []float64) *baseline.Stats {
	fp := func(v float64) *float64 { return &v }
	s := &baseline.Stats{Mean: fp(d.Mean), Median: fp(d.Median), Std: fp(d.Std), Percentiles: baseline.Percentiles{}}
	if d.N > 0 {
		s.Min, s.Max = fp(d.Min), fp(d.Max)
	}
	for i, p := range percentiles {
		s.Percentiles["p"+PercentileLabel(p)] = d.Percentiles[i]
	}
	return s
}

// Files lists what WriteAll writes for rep, relative to the output directory.
type Files struct {
	CSV      string
	JSON     []string // one per level
	Server   []string // polled /metrics series, one per level
	Baseline string
	Charts   []string
}

// Paths returns every file of f joined to dir, in writing order.
func (f *Files) Paths(dir string) []string {
	var out []string
	for _, group := range [][]string{{f.CSV}, f.JSON, f.Server, {f.Baseline}, f.Charts} {
		for _, n := range group {
			if n != "" {
				out = append(out, filepath.Join(dir, n))
			}
		}
	}
	return out
}

// WriteAll writes every output of rep into dir (created if missing): the CSV,
// a vllm-serve JSON and a server-series CSV per level, the baseline file and
// the SVG charts. Each file is written to a temporary name and renamed. When a
// level's success ratio is below rep.MinSuccessRatio the baseline file is
// not written (Files.Baseline stays empty) unless rep.ForceBaseline.
func WriteAll(dir string, rep *Report) (*Files, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	out := &Files{}
	write := func(name string, data []byte) error {
		return atomicfile.Write(filepath.Join(dir, name), data)
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, rep); err != nil {
		return nil, err
	}
	out.CSV = rep.Name + ".csv"
	if err := write(out.CSV, buf.Bytes()); err != nil {
		return nil, err
	}
	for _, lr := range rep.Levels {
		name := rep.Name + "-" + lr.Level.Slug() + ".json"
		if err := write(name, ServeJSON(rep, lr)); err != nil {
			return nil, err
		}
		out.JSON = append(out.JSON, name)
		buf.Reset()
		if err := WriteServerCSV(&buf, lr); err != nil {
			return nil, err
		}
		name = rep.Name + "-" + lr.Level.Slug() + "-server.csv"
		if err := write(name, buf.Bytes()); err != nil {
			return nil, err
		}
		out.Server = append(out.Server, name)
	}
	if len(rep.Levels) > 0 && (len(rep.FailingLevels()) == 0 || rep.ForceBaseline) {
		f, err := Baseline(rep, out.JSON)
		if err != nil {
			return nil, err
		}
		data, err := f.Marshal()
		if err != nil {
			return nil, fmt.Errorf("encoding the baseline: %w", err)
		}
		out.Baseline = rep.Name + ".baseline.yaml"
		if err := write(out.Baseline, data); err != nil {
			return nil, err
		}
	}
	charts := Charts(rep)
	names := make([]string, 0, len(charts))
	for n := range charts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := write(n, charts[n]); err != nil {
			return nil, err
		}
		out.Charts = append(out.Charts, n)
	}
	return out, nil
}
