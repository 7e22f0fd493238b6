package baseline

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vllm-prober/vllm_prober/config"
)

// vllmResultKeys are the keys of a vllm bench serve result that are not user metadata or swept
// parameters (vLLM's vllm/benchmarks/serve.py --save-result).
var vllmResultKeys = map[string]bool{
	"date": true, "endpoint_type": true, "backend": true, "label": true, "model_id": true, "tokenizer_id": true,
	"num_prompts": true, "request_rate": true, "burstiness": true, "max_concurrency": true,
	"ramp_up_strategy": true, "ramp_up_start_rps": true, "ramp_up_end_rps": true, "duration": true,
	"completed": true, "failed": true, "total_input_tokens": true, "total_output_tokens": true,
	"request_throughput": true, "request_goodput": true, "request_goodput:": true, "output_throughput": true,
	"slo_attainment": true, "goodput_objectives": true, // written by vllm_prober's bench next to vLLM's keys
	"total_token_throughput": true, "input_throughput": true, "max_output_tokens_per_s": true,
	"max_concurrent_requests": true, "rtfx": true, "input_lens": true, "output_lens": true, "ttfts": true,
	"itls": true, "generated_texts": true, "errors": true, "start_times": true, "latencies": true,
	"queue_times": true, "best_of": true, "use_beam_search": true, "run_number": true, "rps_change_events": true,
	// metadata we read into baseline fields
	"gpu": true, "gpu_type": true, "hardware": true, "model": true, "tensor_parallel_size": true,
	"pipeline_parallel_size": true, "data_parallel_size": true, "max_model_len": true, "framework": true,
}

// reVLLMStatKey matches vLLM's statistic keys (mean_ttft_ms, p99_e2el_ms) and SGLang
// bench_serving's name for E2E (mean_e2e_latency_ms).
var reVLLMStatKey = regexp.MustCompile(`^(mean|median|std|min|max|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|e2e_latency)_ms$`)

func importVLLMServeJSON(im *Import, values []any) error {
	var records []map[string]any
	var refs []string
	switch im.Format {
	case FormatVLLMSweepSummary:
		arr := values[0].([]any)
		for i, v := range arr {
			o, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("summary entry %d: a %s, not a result object", i+1, jsonKind(v))
			}
			records = append(records, o)
			refs = append(refs, fmt.Sprintf("entry %d", i+1))
		}
	default:
		for i, v := range values {
			records = append(records, v.(map[string]any))
			if len(values) > 1 {
				refs = append(refs, fmt.Sprintf("record %d", i+1))
			} else {
				refs = append(refs, "")
			}
		}
	}
	for i, rec := range records {
		b, err := vllmServeBaseline(rec)
		if err != nil {
			if refs[i] != "" {
				return fmt.Errorf("%s: %w", refs[i], err)
			}
			return err
		}
		// A sweep's records (summary.json, or one run=N.json) carry the swept server parameters
		// and the repeat index: both are part of the identity, so that two server
		// configurations never look like repeats of one.
		if _, isRun := rec["run_number"]; im.Format == FormatVLLMSweepSummary || isRun {
			b.ServerParams = sweepParams(rec)
		}
		ref := refs[i]
		if ref == "" {
			ref = filepathBase(im.File)
		} else {
			ref = filepathBase(im.File) + " " + ref
		}
		b.Points[0].Ref = ref
		im.Baselines = append(im.Baselines, b)
	}
	return nil
}

// sweepParams returns the swept server parameters of a sweep run: its scalar keys that are not
// result keys (bench parameters such as max_concurrency are result keys).
func sweepParams(rec map[string]any) map[string]string {
	var params map[string]string
	for _, k := range slices.Sorted(maps.Keys(rec)) {
		if vllmResultKeys[k] || reVLLMStatKey.MatchString(k) || strings.HasPrefix(k, "spec_decode_") ||
			strings.HasPrefix(k, "diffusion_") || strings.HasPrefix(k, "probe_") {
			continue
		}
		var val string
		switch v := rec[k].(type) {
		case string:
			val = v
		case fmt.Stringer:
			val = v.String()
		case bool:
			val = strconv.FormatBool(v)
		default:
			continue
		}
		if params == nil {
			params = map[string]string{}
		}
		params[k] = val
	}
	return params
}

// vllmServeBaseline turns one vllm bench serve result object into a one-point baseline.
func vllmServeBaseline(rec map[string]any) (*Baseline, error) {
	r := &jreader{obj: rec}
	for _, k := range []string{"completed", "request_throughput"} {
		if _, ok := rec[k]; !ok {
			return nil, fmt.Errorf("missing %q: not a vllm bench serve result", k)
		}
	}
	p := Point{
		Concurrency:          r.load("max_concurrency"),
		RequestRate:          r.load("request_rate"),
		NumPrompts:           r.i("num_prompts"),
		Label:                r.s("label"),
		Date:                 r.s("date"),
		DurationSeconds:      r.f("duration"),
		Completed:            r.i("completed"),
		Failed:               r.i("failed"),
		TotalInputTokens:     r.i("total_input_tokens"),
		TotalOutputTokens:    r.i("total_output_tokens"),
		RequestThroughput:    r.f("request_throughput"),
		RequestGoodput:       r.f("request_goodput"),
		OutputThroughput:     r.f("output_throughput"),
		InputThroughput:      r.f("input_throughput"),
		TotalTokenThroughput: r.f("total_token_throughput"),
		PeakOutputThroughput: r.f("max_output_tokens_per_s"),
		PeakConcurrency:      r.f("max_concurrent_requests"),

		SpecDecodeAcceptanceLength: r.f("spec_decode_acceptance_length"),
	}
	if p.RequestGoodput == nil {
		p.RequestGoodput = r.f("request_goodput:") // benchmark_serving.py's typo (v0.8 --save-result)
	}
	// vllm_prober's bench writes the attainment and its objectives next to vLLM's keys.
	if p.RequestGoodput != nil {
		p.SLOAttainment = r.f("slo_attainment")
		if g := r.s("goodput_objectives"); g != "" {
			o, err := config.ParseGoodput(g)
			if err != nil {
				return nil, fmt.Errorf("goodput_objectives %q: %w", g, err)
			}
			p.GoodputObjectives = &Objectives{o}
		}
	}
	stats := map[string]*Stats{}
	for _, k := range slices.Sorted(maps.Keys(rec)) {
		m := reVLLMStatKey.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		v := r.f(k)
		if v == nil {
			continue
		}
		metric := m[2]
		if metric == "e2e_latency" {
			metric = "e2el"
		}
		s := stats[metric]
		if s == nil {
			s = &Stats{}
			stats[metric] = s
		}
		sec := scale10(*v, 1e-3) // ms -> s
		switch m[1] {
		case "mean":
			s.Mean = &sec
		case "median":
			s.Median = &sec
		case "std":
			s.Std = &sec
		case "min":
			s.Min = &sec
		case "max":
			s.Max = &sec
		default:
			q, err := strconv.ParseFloat(m[1][1:], 64)
			if err != nil || !(q > 0 && q <= 100) {
				return nil, fmt.Errorf("field %q: percentile out of range", k)
			}
			if s.Percentiles == nil {
				s.Percentiles = Percentiles{}
			}
			s.Percentiles[percentileKey(q)] = sec
		}
	}
	p.TTFT, p.TPOT, p.ITL, p.E2E = stats["ttft"], stats["tpot"], stats["itl"], stats["e2el"]
	b := &Baseline{
		Model:     r.s("model_id"),
		Hardware:  firstNonEmpty(r.s("gpu"), r.s("gpu_type"), r.s("hardware")),
		Framework: r.s("framework"), // --metadata framework=... (vLLM's benchmark-output branch)
		RunNumber: r.i("run_number"),
		Source:    Source{Tool: ToolVLLMServe, Date: r.s("date")},
	}
	if b.Model == "" {
		b.Model = r.s("model")
	}
	if isSGLangRecord(rec) {
		// SGLang's bench_serving --output-file record: its backend is the framework measured,
		// "total_throughput" its total token throughput, "concurrency" a measured mean (not the
		// load level, which is max_concurrency / request_rate as in vLLM).
		b.Source.Tool = ToolSGLangBenchServing
		if b.Framework == "" {
			b.Framework = backendFramework(r.s("backend"))
		}
		if p.TotalTokenThroughput == nil {
			p.TotalTokenThroughput = r.f("total_throughput")
		}
	}
	par := Parallelism{}
	for key, dst := range map[string]*int64{"tensor_parallel_size": &par.TP, "pipeline_parallel_size": &par.PP, "data_parallel_size": &par.DP} {
		if v := r.i(key); v != nil {
			*dst = *v
		}
	}
	if par != (Parallelism{}) {
		b.Parallelism = &par
	}
	if v := r.i("max_model_len"); v != nil {
		b.MaxModelLen = *v
	}
	if r.err != nil {
		return nil, r.err
	}
	if p.Concurrency == nil && p.RequestRate == nil {
		return nil, fmt.Errorf("missing load level: neither \"max_concurrency\" nor \"request_rate\" is set")
	}
	if p.Completed != nil && *p.Completed == 0 {
		p.AllFailed = true
	}
	b.Points = []Point{p}
	return b, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func filepathBase(name string) string {
	i := strings.LastIndexAny(name, `/\`)
	return name[i+1:]
}

// printedKeys maps the labels of the printed summary block (vllm/benchmarks/serve.py) to the JSON keys
// of --save-result, so that both go through vllmServeBaseline.
var printedKeys = map[string]string{
	"successful requests":                  "completed",
	"max request concurrency":              "max_concurrency", // SGLang bench_serving
	"traffic request rate":                 "request_rate",    // SGLang bench_serving, inside the block
	"failed requests":                      "failed",
	"maximum request concurrency":          "max_concurrency",
	"request rate configured (rps)":        "request_rate",
	"benchmark duration (s)":               "duration",
	"total input tokens":                   "total_input_tokens",
	"total generated tokens":               "total_output_tokens",
	"request throughput (req/s)":           "request_throughput",
	"request goodput (req/s)":              "request_goodput",
	"output token throughput (tok/s)":      "output_throughput",
	"peak output token throughput (tok/s)": "max_output_tokens_per_s",
	"peak concurrent requests":             "max_concurrent_requests",
	"total token throughput (tok/s)":       "total_token_throughput",
	"total throughput (tok/s)":             "total_token_throughput", // SGLang bench_serving before 2025
	"input token throughput (tok/s)":       "input_throughput",
}

var (
	// "Mean TTFT (ms)"; SGLang's bench_serving also prints "Max ITL (ms)" and "Mean E2E Latency (ms)".
	rePrintedStat = regexp.MustCompile(`^(Mean|Median|Std|Max|P(\d+(?:\.\d+)?)) (TTFT|TPOT|ITL|E2EL|E2E Latency) \(ms\)$`)
	rePrintedLine = regexp.MustCompile(`^\s*([^:]+?)\s*:\s+(\S+(?: \S+)?)\s*$`)
	reContextTP   = regexp.MustCompile(`(?:^|\s)(?:-tp|--tensor-parallel-size)[= ](\d+)\b`)
	reContextPP   = regexp.MustCompile(`(?:^|\s)(?:-pp|--pipeline-parallel-size)[= ](\d+)\b`)
	reContextLen  = regexp.MustCompile(`--max-model-len[= ]"?(\d+)`)
	reServeModel  = regexp.MustCompile(`vllm serve\s+(?:-\S+\s+\S+\s+)*?([\w.-]+/[\w.-]+)`)
	// The client's --model: an org/name id or a served name without org ("--model qwen2.5"); a
	// shell variable or a path (--model $MODEL, --model /data/llm/x) is not a model id.
	reClientModel = regexp.MustCompile(`--model[= ]['"]?([\w.-]+(?:/[\w.-]+)?)(?:[^\w./-]|$)`)
	reTrafficRate = regexp.MustCompile(`Traffic request rate:\s*(\S+)`)
)

// importVLLMServeText reads printed "Serving Benchmark Result" blocks. Several blocks per file are
// allowed; the progress bar may precede the header on the same line and \r redraws are lines.
// Server set-up (model, -tp, --max-model-len) is taken from command lines before a block; a
// "vllm serve" or -tp line starts a new series (a distinct set-up).
func importVLLMServeText(im *Import, text string) error {
	// Progress bars redraw with \r: each redraw is its own line, numbered as the file line holding it.
	var lines []string
	var lineNo []int
	for n, l := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		for _, seg := range strings.Split(l, "\r") {
			lines = append(lines, seg)
			lineNo = append(lineNo, n+1)
		}
	}
	var (
		model             string
		tp, pp, ctxLen    int64
		series            int
		pendingConc, rate string
		args              map[string]string // the client's Namespace(...) line before the block
	)
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		idx := strings.Index(line, "Serving Benchmark Result")
		if idx < 0 {
			if strings.Contains(line, "vllm serve") {
				series++
				tp, pp, ctxLen = 0, 0, 0
				if m := reServeModel.FindStringSubmatch(line); m != nil {
					model = m[1]
				}
			} else if reContextTP.MatchString(line) {
				series++
			}
			if m := reContextTP.FindStringSubmatch(line); m != nil {
				tp, _ = strconv.ParseInt(m[1], 10, 64)
			}
			if m := reContextPP.FindStringSubmatch(line); m != nil {
				pp, _ = strconv.ParseInt(m[1], 10, 64)
			}
			if m := reContextLen.FindStringSubmatch(line); m != nil {
				ctxLen, _ = strconv.ParseInt(m[1], 10, 64)
			}
			if m := reClientModel.FindStringSubmatch(line); m != nil {
				model = m[1]
			}
			// "None" is how Python prints an unset --max-concurrency (every rate-driven run).
			if m := rePrintedLine.FindStringSubmatch(line); m != nil && strings.EqualFold(m[1], "Maximum request concurrency") && m[2] != "None" {
				pendingConc = m[2]
			}
			if ns, ok := parseNamespace(line); ok {
				args = ns
			}
			if m := reTrafficRate.FindStringSubmatch(line); m != nil {
				rate = m[1]
			}
			continue
		}
		start := lineNo[i]
		rec := map[string]any{}
		sglang := false
		if pendingConc != "" {
			rec["max_concurrency"] = pendingConc
		}
		if rate != "" {
			rec["request_rate"] = rate
		}
		closed := false
		for i++; i < len(lines); i++ {
			l := strings.TrimSpace(lines[i])
			if l == "" || (strings.HasPrefix(l, "-") && strings.HasSuffix(l, "-")) {
				continue // section rule
			}
			if strings.HasPrefix(l, "=====") {
				closed = true
				break
			}
			m := rePrintedLine.FindStringSubmatch(l)
			if m == nil {
				return fmt.Errorf("line %d: unexpected line in the result block started at line %d: %q", lineNo[i], start, l)
			}
			label, val := m[1], m[2]
			if val == "None" || val == "not set" {
				continue // unset: Python's None ("Maximum request concurrency: None"), SGLang's "not set"
			}
			if strings.EqualFold(label, "Backend") {
				// SGLang's bench_serving (a fork of benchmark_serving.py, same definitions) prints the
				// serving framework it benchmarked: sglang, vllm, lmdeploy, trt, ...
				sglang = true
				if fw := backendFramework(val); fw != "" {
					rec["framework"] = fw
				}
				continue
			}
			if f, err := strconv.ParseFloat(val, 64); err == nil && f < 0 {
				// SGLang prints -1 for what it did not measure (simulation mode, text-only runs).
				im.Notes = append(im.Notes, fmt.Sprintf("line %d: %q is %s, the tool's mark for not measured; not imported", lineNo[i], label, val))
				continue
			}
			if key, ok := printedKeys[strings.ToLower(label)]; ok {
				rec[key] = val
			} else if sm := rePrintedStat.FindStringSubmatch(label); sm != nil {
				stat := strings.ToLower(sm[1])
				metric := strings.ToLower(sm[3])
				if metric == "e2e latency" {
					metric = "e2el"
				}
				rec[stat+"_"+metric+"_ms"] = val
			} else {
				im.Notes = append(im.Notes, fmt.Sprintf("line %d: %q is not a baseline metric; not imported", lineNo[i], label))
			}
		}
		if !closed {
			return fmt.Errorf("line %d: result block is not closed by a line of \"=\"", start)
		}
		if args != nil {
			applyNamespace(rec, args)
		}
		if _, ok := rec["max_concurrency"]; !ok {
			if _, ok := rec["request_rate"]; !ok {
				return fmt.Errorf("result block at line %d: no load level: expected a \"Maximum request concurrency\", \"Request rate configured (RPS)\" or \"Traffic request rate\" line", start)
			}
		}
		if model != "" {
			rec["model_id"] = model
		}
		if args != nil && args["model"] != "" {
			rec["model_id"] = firstNonEmpty(args["served_model_name"], args["model"])
		}
		b, err := vllmServeBaseline(rec)
		if err != nil {
			return fmt.Errorf("result block at line %d: %w", start, err)
		}
		if sglang {
			b.Source.Tool = ToolSGLangBenchServing
		}
		if args != nil {
			namespacePoint(&b.Points[0], args)
			// goodput=['ttft:200', 'tpot:50']: the objectives of the block's request goodput.
			if g := args["goodput"]; g != "" && b.Points[0].hasGoodput() {
				o, err := namespaceGoodput(g)
				if err != nil {
					return fmt.Errorf("result block at line %d: the Namespace line's goodput=%s: %w", start, g, err)
				}
				b.Points[0].GoodputObjectives = o
			}
		}
		var par Parallelism
		par.TP, par.PP = tp, pp
		if par != (Parallelism{}) {
			b.Parallelism = &par
		}
		b.MaxModelLen = ctxLen
		b.series = "run" + strconv.Itoa(series)
		b.Points[0].Ref = fmt.Sprintf("%s:%d", filepathBase(im.File), start)
		im.Baselines = append(im.Baselines, b)
		pendingConc, rate, args = "", "", nil
	}
	if len(im.Baselines) == 0 {
		return fmt.Errorf("no complete \"Serving Benchmark Result\" block")
	}
	// Series numbers are only meaningful relative to each other; drop them when there is one.
	seen := map[string]bool{}
	for _, b := range im.Baselines {
		seen[b.series] = true
	}
	if len(seen) == 1 {
		for _, b := range im.Baselines {
			b.series = ""
		}
	}
	return nil
}

// isSGLangRecord tells SGLang's bench_serving results (JSON records and printed blocks mapped to
// JSON keys) from vLLM's: only SGLang writes retokenized counts and *_e2e_latency_ms.
func isSGLangRecord(rec map[string]any) bool {
	if _, ok := rec["total_output_tokens_retokenized"]; ok {
		return true
	}
	_, ok := rec["mean_e2e_latency_ms"]
	return ok
}

// backendFramework maps the --backend of SGLang's bench_serving to the serving framework it
// measured; an OpenAI-compatible client backend ("oai", "openai") names no framework.
func backendFramework(backend string) string {
	b := strings.ToLower(backend)
	switch {
	case strings.HasPrefix(b, "sglang"):
		return "sglang"
	case strings.HasPrefix(b, "vllm"):
		return "vllm"
	case b == "lmdeploy", b == "trt", b == "tgi":
		return b
	}
	return ""
}

// parseNamespace reads the argparse Namespace(...) line benchmark_serving.py and vllm bench serve
// print at start-up, e.g. Namespace(backend='vllm', model='meta-llama/Llama-3.3-70B-Instruct',
// max_concurrency=None, request_rate=1.0, ...). Values are returned as printed, quotes removed;
// None values are left out.
func parseNamespace(line string) (map[string]string, bool) {
	i := strings.Index(line, "Namespace(")
	if i < 0 {
		return nil, false
	}
	rest := line[i+len("Namespace("):]
	out := map[string]string{}
	for len(rest) > 0 {
		rest = strings.TrimLeft(rest, " ,")
		if rest == "" || rest[0] == ')' {
			break
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return nil, false
		}
		key := strings.TrimSpace(rest[:eq])
		rest = rest[eq+1:]
		val, n := namespaceValue(rest)
		rest = rest[n:]
		if val != "None" {
			out[key] = val
		}
	}
	return out, len(out) > 0
}

// namespaceValue reads one Python repr value at the start of s and returns it (quotes removed
// from a string) and the number of bytes consumed. Nested brackets and quoted commas are skipped.
func namespaceValue(s string) (string, int) {
	if s != "" && (s[0] == '\'' || s[0] == '"') {
		q := s[0]
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch {
			case s[i] == '\\' && i+1 < len(s):
				b.WriteByte(s[i+1])
				i++
			case s[i] == q:
				return b.String(), i + 1
			default:
				b.WriteByte(s[i])
			}
		}
		return b.String(), len(s)
	}
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case (c == ')' || c == ']' || c == '}') && depth > 0:
			depth--
		case (c == ',' || c == ')') && depth == 0:
			return strings.TrimSpace(s[:i]), i
		}
	}
	return strings.TrimSpace(s), len(s)
}

// applyNamespace fills the load of a printed block from the client's arguments when the block
// and the lines before it did not state it (old logs print no "Request rate configured" line).
func applyNamespace(rec map[string]any, args map[string]string) {
	if _, ok := rec["max_concurrency"]; !ok {
		if v, ok := args["max_concurrency"]; ok {
			rec["max_concurrency"] = v
		}
	}
	if _, ok := rec["request_rate"]; !ok {
		if v, ok := args["request_rate"]; ok {
			rec["request_rate"] = v
		}
	}
	if _, ok := rec["num_prompts"]; !ok {
		if v, ok := args["num_prompts"]; ok {
			rec["num_prompts"] = v
		}
	}
	// --metadata KEY=VALUE ... (metadata=['gpu=H100', 'framework=vllm']): --save-result writes these
	// keys at the top of the JSON, where the JSON importer reads gpu, framework, parallel sizes.
	if md := strings.Trim(args["metadata"], "[]"); md != "" {
		for _, item := range strings.Split(md, ",") {
			k, v, ok := strings.Cut(strings.Trim(strings.TrimSpace(item), `'"`), "=")
			if _, taken := rec[k]; ok && k != "" && !taken {
				rec[k] = v
			}
		}
	}
}

// namespaceLengths maps a dataset to the arguments holding its requested input and output lengths
// (vLLM benchmarks/benchmark_serving.py, vllm/benchmarks/serve.py argument names).
var namespaceLengths = map[string][2]string{
	"random":   {"random_input_len", "random_output_len"},
	"sonnet":   {"sonnet_input_len", "sonnet_output_len"},
	"sharegpt": {"", "sharegpt_output_len"},
	"hf":       {"", "hf_output_len"},
	"custom":   {"", "custom_output_len"},
}

// namespacePoint records the dataset and its requested lengths from the client's arguments.
func namespacePoint(p *Point, args map[string]string) {
	ds := firstNonEmpty(args["dataset_name"], args["dataset"])
	p.Dataset = ds
	keys, ok := namespaceLengths[ds]
	if !ok {
		return
	}
	parse := func(k string) *int64 {
		if k == "" {
			return nil
		}
		n, err := strconv.ParseInt(args[k], 10, 64)
		if err != nil || n <= 0 {
			return nil
		}
		return &n
	}
	p.InputLen, p.OutputLen = parse(keys[0]), parse(keys[1])
}
