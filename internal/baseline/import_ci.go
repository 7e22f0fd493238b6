package baseline

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ciColumns maps vLLM CI serving-table columns (as written by vLLM's
// .buildkite/nightly-benchmarks/scripts/convert-results-json-to-markdown.py, 2024 to 2026) to the
// vllm bench serve result keys they were renamed from. "Median" and "P99" right after
// "Mean TPOT (ms)" are TPOT columns without the metric name.
var ciColumns = map[string]string{
	"Model":                    "model_id",
	"GPU":                      "gpu",
	"# of req.":                "completed",
	"qps":                      "request_rate",
	"# of max concurrency.":    "max_concurrency",
	"TP Size":                  "tensor_parallel_size",
	"PP Size":                  "pipeline_parallel_size",
	"Tput (req/s)":             "request_throughput",
	"Output Tput (tok/s)":      "output_throughput",
	"Total Token Tput (tok/s)": "total_token_throughput",
	"Total Tput (tok/s)":       "total_token_throughput",
	"Total input tokens":       "total_input_tokens",
	"Total output tokens":      "total_output_tokens",
	"Median":                   "median_tpot_ms",
	"P99":                      "p99_tpot_ms",
}

// ciInfoColumns describe the test; they are kept in the label only.
var ciInfoColumns = map[string]bool{"Test name": true, "Dataset Name": true, "Input Len": true, "Output Len": true, "dtype": true}

var (
	reCIStatColumn = regexp.MustCompile(`^(Mean|Median|P99|STD) (TTFT|TPOT|ITL|E2EL) \(ms\)$`)
	reCIQPS        = regexp.MustCompile(`_qps_([0-9.]+|inf)`)
	reCIConc       = regexp.MustCompile(`_concurrency_(\d+)`)
	reCITP         = regexp.MustCompile(`(?:^|_)tp(\d+)`)
	reCIPP         = regexp.MustCompile(`(?:^|_)pp(\d+)`)
)

// ciRow converts one serving-table row (column -> value) to a one-point baseline.
func ciRow(row map[string]any, ref string, unknown map[string]bool) (*Baseline, error) {
	rec := map[string]any{"completed": nil}
	for col, v := range row {
		if key, ok := ciColumns[col]; ok {
			rec[key] = v
		} else if m := reCIStatColumn.FindStringSubmatch(col); m != nil {
			rec[strings.ToLower(m[1])+"_"+strings.ToLower(m[2])+"_ms"] = v
		} else if !ciInfoColumns[col] {
			unknown[col] = true
		}
	}
	name, _ := row["Test name"].(string)
	if _, ok := row["Tput (req/s)"]; !ok {
		return nil, fmt.Errorf("%s: missing column \"Tput (req/s)\"", ref)
	}
	if rec["request_rate"] == nil {
		if m := reCIQPS.FindStringSubmatch(name); m != nil {
			rec["request_rate"] = m[1]
		}
	}
	if rec["max_concurrency"] == nil {
		if m := reCIConc.FindStringSubmatch(name); m != nil {
			rec["max_concurrency"] = m[1]
		}
	}
	if rec["tensor_parallel_size"] == nil {
		if m := reCITP.FindStringSubmatch(name); m != nil {
			rec["tensor_parallel_size"] = m[1]
		}
	}
	if rec["pipeline_parallel_size"] == nil {
		if m := reCIPP.FindStringSubmatch(name); m != nil {
			rec["pipeline_parallel_size"] = m[1]
		}
	}
	if rec["request_rate"] == nil && rec["max_concurrency"] == nil {
		return nil, fmt.Errorf("%s (test %q): no load level: no \"qps\" or \"# of max concurrency.\" column and no _qps_N or _concurrency_N in the test name", ref, name)
	}
	b, err := vllmServeBaseline(rec)
	if err != nil {
		return nil, fmt.Errorf("%s (test %q): %w", ref, name, err)
	}
	b.Source.Tool = ToolVLLMCI
	b.Source.Date = ""
	b.Points[0].Label = name
	b.Points[0].Ref = ref
	b.series = reCIConc.ReplaceAllString(reCIQPS.ReplaceAllString(name, ""), "")
	return b, nil
}

func noteUnknownColumns(im *Import, unknown map[string]bool) {
	if len(unknown) > 0 {
		im.Notes = append(im.Notes, fmt.Sprintf("columns not imported (no baseline metric): %s", strings.Join(slices.Sorted(maps.Keys(unknown)), ", ")))
	}
}

// importVLLMCIJSON reads {"latency": {...}, "throughput": {...}, "serving": {"<column>": {"<row>": v}}}.
func importVLLMCIJSON(im *Import, v any) error {
	top := v.(map[string]any)
	for _, sec := range []string{"latency", "throughput"} {
		if n := ciDictRows(top[sec]); n > 0 {
			im.Notes = append(im.Notes, fmt.Sprintf("%q table: %d offline (non-serving) rows not imported: they have no load level", sec, n))
		}
	}
	serving, _ := top["serving"].(map[string]any)
	rows := map[string]map[string]any{}
	for col, cv := range serving {
		cells, ok := cv.(map[string]any)
		if !ok {
			return fmt.Errorf("serving column %q: a %s, not an object of rows", col, jsonKind(cv))
		}
		for idx, cell := range cells {
			if rows[idx] == nil {
				rows[idx] = map[string]any{}
			}
			rows[idx][col] = cell
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("the \"serving\" table has no rows")
	}
	idxs := slices.Sorted(maps.Keys(rows))
	sort.SliceStable(idxs, func(i, j int) bool {
		a, ea := strconv.Atoi(idxs[i])
		b, eb := strconv.Atoi(idxs[j])
		if ea != nil || eb != nil {
			return idxs[i] < idxs[j]
		}
		return a < b
	})
	unknown := map[string]bool{}
	for _, idx := range idxs {
		b, err := ciRow(rows[idx], filepathBase(im.File)+" serving row "+idx, unknown)
		if err != nil {
			return err
		}
		im.Baselines = append(im.Baselines, b)
	}
	noteUnknownColumns(im, unknown)
	return nil
}

func ciDictRows(v any) int {
	o, _ := v.(map[string]any)
	n := 0
	for _, col := range o {
		if c, ok := col.(map[string]any); ok && len(c) > n {
			n = len(c)
		}
	}
	return n
}

// importVLLMCIRecords reads benchmark_results.json: a flat list of latency, throughput and serving rows.
func importVLLMCIRecords(im *Import, v any) error {
	unknown := map[string]bool{}
	skipped := 0
	for i, e := range v.([]any) {
		row, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("row %d: a %s, not an object", i+1, jsonKind(e))
		}
		_, serving := row["Tput (req/s)"]
		_, ttft := row["Mean TTFT (ms)"]
		if !serving || !ttft {
			skipped++
			continue
		}
		b, err := ciRow(row, fmt.Sprintf("%s row %d", filepathBase(im.File), i+1), unknown)
		if err != nil {
			return err
		}
		im.Baselines = append(im.Baselines, b)
	}
	if skipped > 0 {
		im.Notes = append(im.Notes, fmt.Sprintf("%d latency/throughput (non-serving) rows not imported: they have no load level", skipped))
	}
	noteUnknownColumns(im, unknown)
	return nil
}

// importVLLMCIMarkdown reads the serving table of benchmark_results.md (tabulate "pipe" format).
func importVLLMCIMarkdown(im *Import, text string) error {
	tables := markdownTables(text)
	unknown := map[string]bool{}
	found := false
	for _, t := range tables {
		if !containsString(t.header, "Test name") || !containsString(t.header, "Tput (req/s)") {
			continue
		}
		found = true
		for ri, cells := range t.rows {
			row := map[string]any{}
			for ci, h := range t.header {
				if ci < len(cells) {
					row[h] = cells[ci]
				}
			}
			b, err := ciRow(row, fmt.Sprintf("%s:%d", filepathBase(im.File), t.lines[ri]), unknown)
			if err != nil {
				return err
			}
			im.Baselines = append(im.Baselines, b)
		}
	}
	if !found {
		return fmt.Errorf("no table with \"Test name\" and \"Tput (req/s)\" columns")
	}
	noteUnknownColumns(im, unknown)
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mdTable is a markdown pipe table.
type mdTable struct {
	header []string
	rows   [][]string
	lines  []int // 1-based line number of each row
	start  int   // line of the header
}

var reMDSeparator = regexp.MustCompile(`^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$`)

// markdownTables finds every pipe table (header, separator, rows) in text.
func markdownTables(text string) []mdTable {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var out []mdTable
	for i := 0; i+1 < len(lines); i++ {
		h := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(h, "|") || !reMDSeparator.MatchString(strings.TrimSpace(lines[i+1])) {
			continue
		}
		t := mdTable{header: splitPipeRow(h), start: i + 1}
		j := i + 2
		for ; j < len(lines); j++ {
			l := strings.TrimSpace(lines[j])
			if !strings.HasPrefix(l, "|") {
				break
			}
			t.rows = append(t.rows, splitPipeRow(l))
			t.lines = append(t.lines, j+1)
		}
		out = append(out, t)
		i = j - 1
	}
	return out
}

func splitPipeRow(l string) []string {
	l = strings.TrimSpace(l)
	l = strings.TrimPrefix(l, "|")
	l = strings.TrimSuffix(l, "|")
	parts := strings.Split(l, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}
