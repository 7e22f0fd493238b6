package baseline

import (
	"fmt"
	"html"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ---- multi-GPU presets report: per-preset HTML tables of a /metrics-polling script ----

var (
	reHTMLTable   = regexp.MustCompile(`(?s)<table.*?</table>`)
	reHTMLRow     = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	reHTMLCell    = regexp.MustCompile(`(?s)<t[hd][^>]*>(.*?)</t[hd]>`)
	reHTMLTag     = regexp.MustCompile(`<[^>]*>`)
	reHeadingCtx  = regexp.MustCompile(`(?i)^(?:[\d.]+\s+)?(.+?)\s+-\s+(\d+(?:\.\d+)?)(k?)\s+context length`)
	reHeadingConc = regexp.MustCompile(`(?i)@\s*(\d+)\s*req`)
	reHeadingN    = regexp.MustCompile(`(?i)for\s+(\d+)\s+total requests`)
	reChartFig    = regexp.MustCompile(`chart_([A-Za-z0-9.-]+)_([A-Za-z0-9.-]+?)_(\d+)ctx_(\d+)max`)
	reModelID     = regexp.MustCompile("`([A-Za-z0-9][\\w.-]*/[\\w.-]+)`")
)

type preset struct {
	gpus    int64
	gpuType string
}

func cleanMarkdown(s string) string {
	s = html.UnescapeString(s)
	for _, r := range []string{"**", "`", "\\", "#"} {
		s = strings.ReplaceAll(s, r, "")
	}
	s = strings.ReplaceAll(s, "\u00a0", " ")
	return strings.Join(strings.Fields(s), " ")
}

func htmlCells(row string) []string {
	var out []string
	for _, m := range reHTMLCell.FindAllStringSubmatch(row, -1) {
		out = append(out, strings.TrimSpace(html.UnescapeString(reHTMLTag.ReplaceAllString(m[1], ""))))
	}
	return out
}

// resolveModel maps a short model name from a heading ("Llama-8B") to the one full model id of the
// document whose name tokens include all of the short name's tokens.
func resolveModel(short string, ids []string) string {
	tokens := strings.FieldsFunc(strings.ToLower(short), func(r rune) bool { return r == '-' || r == '_' || r == ' ' })
	var match string
	for _, id := range ids {
		idTokens := map[string]bool{}
		for _, t := range strings.FieldsFunc(strings.ToLower(id), func(r rune) bool { return r == '-' || r == '_' || r == '/' }) {
			idTokens[t] = true
		}
		all := len(tokens) > 0
		for _, t := range tokens {
			all = all && idTokens[t]
		}
		if all {
			if match != "" && match != id {
				return short // ambiguous
			}
			match = id
		}
	}
	if match == "" {
		return short
	}
	return match
}

func importPresetHTML(im *Import, text string) error {
	// Preset table (markdown): Preset | vCPUs | Memory | VRAM | GPU Count | GPU Type.
	presets := map[string]preset{}
	for _, t := range markdownTables(text) {
		var hdr []string
		for _, h := range t.header {
			hdr = append(hdr, cleanMarkdown(h))
		}
		pi, ci, ti := indexOf(hdr, "Preset"), indexOf(hdr, "GPU Count"), indexOf(hdr, "GPU Type")
		if pi < 0 || ci < 0 {
			continue
		}
		for _, row := range t.rows {
			if pi >= len(row) || ci >= len(row) {
				continue
			}
			n, err := strconv.ParseInt(cleanMarkdown(row[ci]), 10, 64)
			if err != nil {
				return fmt.Errorf("preset table line %d: GPU Count %q is not a number", t.start, row[ci])
			}
			pr := preset{gpus: n}
			if ti >= 0 && ti < len(row) {
				pr.gpuType = cleanMarkdown(row[ti])
			}
			presets[cleanMarkdown(row[pi])] = pr
		}
	}
	var ids []string
	for _, m := range reModelID.FindAllStringSubmatch(text, -1) {
		if !containsString(ids, m[1]) {
			ids = append(ids, m[1])
		}
	}
	locs := reHTMLTable.FindAllStringIndex(text, -1)
	missingPresets := map[string]bool{}
	for ti, loc := range locs {
		tableLine := strings.Count(text[:loc[0]], "\n") + 1
		heading := precedingHeading(text[:loc[0]])
		after := text[loc[1]:]
		if ti+1 < len(locs) {
			after = text[loc[1]:locs[ti+1][0]]
		}
		ctx := tableContext{heading: heading}
		if m := reHeadingCtx.FindStringSubmatch(heading); m != nil {
			ctx.model = resolveModel(m[1], ids)
			v, _ := strconv.ParseFloat(m[2], 64)
			if m[3] != "" {
				v *= 1000 // "64k": the report's own chart names say 64000ctx, 128000ctx
			}
			ctx.ctxLen = int64(v)
		}
		if m := reChartFig.FindStringSubmatch(after); m != nil {
			// The script names its charts chart_<org>_<model>_<ctx>ctx_<max_tokens>max.png.
			ctx.model = m[1] + "/" + m[2]
			ctx.ctxLen, _ = strconv.ParseInt(m[3], 10, 64)
		}
		if m := reHeadingConc.FindStringSubmatch(heading); m != nil {
			ctx.conc, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := reHeadingN.FindStringSubmatch(heading); m != nil {
			ctx.total, _ = strconv.ParseInt(m[1], 10, 64)
		}
		rows := reHTMLRow.FindAllStringSubmatch(text[loc[0]:loc[1]], -1)
		if len(rows) < 2 {
			return fmt.Errorf("table at line %d: no data rows", tableLine)
		}
		header := htmlCells(rows[0][1])
		var data [][]string
		for _, r := range rows[1:] {
			data = append(data, htmlCells(r[1]))
		}
		var err error
		if indexOf(header, "Pipeline (Gen TPS)") >= 0 {
			err = presetComparisonTable(im, ctx, header, data, presets, missingPresets, tableLine)
		} else {
			err = presetTable(im, ctx, header, data, presets, missingPresets, tableLine)
		}
		if err != nil {
			return err
		}
	}
	if len(missingPresets) > 0 {
		im.Notes = append(im.Notes, fmt.Sprintf("presets not in the preset table (hardware and tensor parallel size unknown): %s", strings.Join(slices.Sorted(maps.Keys(missingPresets)), ", ")))
	}
	return nil
}

type tableContext struct {
	heading string
	model   string
	ctxLen  int64
	conc    float64
	total   int64
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if strings.EqualFold(strings.TrimSpace(x), s) {
			return i
		}
	}
	return -1
}

// precedingHeading returns the last markdown heading or bold line before a table.
func precedingHeading(before string) string {
	lines := strings.Split(before, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") || strings.HasPrefix(l, "**") {
			return cleanMarkdown(l)
		}
	}
	return ""
}

func (c tableContext) baseline(presetName string, presets map[string]preset, missing map[string]bool) *Baseline {
	b := &Baseline{Model: c.model, Preset: presetName, MaxModelLen: c.ctxLen, Source: Source{Tool: ToolPresetScript}}
	if pr, ok := presets[presetName]; ok {
		b.Hardware = fmt.Sprintf("%dx %s", pr.gpus, pr.gpuType)
		b.Parallelism = &Parallelism{TP: pr.gpus} // "tensor-parallel-size = number of GPUs of the preset"
	} else {
		missing[presetName] = true
	}
	return b
}

func parseCell(s, col string, line int) (*float64, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if s == "" || strings.EqualFold(s, "N/A") {
		return nil, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, fmt.Errorf("table at line %d: column %q: %q is not a non-negative number", line, col, s)
	}
	return &v, nil
}

// presetTable reads Preset | Prompt TPS | Gen TPS | Avg Latency (s) | Request Generation Level TPS |
// Request Prompt Level TPS | [Concurrency] | Errors.
func presetTable(im *Import, c tableContext, header []string, data [][]string, presets map[string]preset, missing map[string]bool, line int) error {
	col := func(name string) int { return indexOf(header, name) }
	pi := col("Preset")
	if pi < 0 {
		pi = col("GPU Preset")
	}
	if pi < 0 || col("Gen TPS") < 0 {
		return fmt.Errorf("table at line %d: missing the \"Preset\" or \"Gen TPS\" column", line)
	}
	if c.model == "" || c.ctxLen == 0 {
		return fmt.Errorf("table at line %d: model or context length unknown: neither the heading %q nor a chart_<model>_<N>ctx figure after the table names them", line, c.heading)
	}
	for ri, row := range data {
		if len(row) != len(header) {
			return fmt.Errorf("table at line %d, row %d: %d cells for %d columns", line, ri+1, len(row), len(header))
		}
		get := func(name string) (*float64, error) {
			i := col(name)
			if i < 0 {
				return nil, nil
			}
			return parseCell(row[i], name, line)
		}
		var p Point
		var vals [7]*float64
		var err error
		for i, name := range []string{"Prompt TPS", "Gen TPS", "Avg Latency (s)", "Request Generation Level TPS", "Request Prompt Level TPS", "Concurrency", "Errors"} {
			if vals[i], err = get(name); err != nil {
				return err
			}
		}
		p.InputThroughput, p.OutputThroughput = vals[0], vals[1]
		if vals[2] != nil {
			p.E2E = &Stats{Mean: vals[2]}
		}
		if vals[3] != nil {
			p.OutputThroughputPerRequest = &Stats{Mean: vals[3]}
		}
		if vals[4] != nil {
			p.InputThroughputPerRequest = &Stats{Mean: vals[4]}
		}
		conc := c.conc
		if vals[5] != nil {
			conc = *vals[5]
		}
		if conc <= 0 {
			return fmt.Errorf("table at line %d, row %d: concurrency unknown: no \"@N req\" in the heading %q and no Concurrency column", line, ri+1, c.heading)
		}
		p.Concurrency = lp(conc)
		if vals[6] != nil {
			p.Failed = ip(int64(*vals[6]))
			if c.total > 0 {
				p.Completed = ip(c.total - *p.Failed)
				p.NumPrompts = ip(c.total)
				p.AllFailed = *p.Completed <= 0
			}
		}
		p.Ref = fmt.Sprintf("%s table line %d row %d", filepathBase(im.File), line, ri+1)
		b := c.baseline(row[pi], presets, missing)
		b.Points = []Point{p}
		im.Baselines = append(im.Baselines, b)
	}
	return nil
}

// presetComparisonTable reads the pipeline-vs-tensor table: per preset two points (pipeline
// parallel and tensor parallel) with prompt and generation TPS; the speedup columns are derived.
func presetComparisonTable(im *Import, c tableContext, header []string, data [][]string, presets map[string]preset, missing map[string]bool, line int) error {
	if c.model == "" || c.ctxLen == 0 || c.conc <= 0 {
		return fmt.Errorf("table at line %d: model, context length or concurrency unknown from the heading %q", line, c.heading)
	}
	pi := indexOf(header, "GPU Preset")
	if pi < 0 {
		return fmt.Errorf("table at line %d: missing the \"GPU Preset\" column", line)
	}
	im.Notes = append(im.Notes, fmt.Sprintf("table at line %d: \"Prompt Speedup (%%)\" and \"Gen Speedup (%%)\" are derived from the other columns; not imported", line))
	for ri, row := range data {
		if len(row) != len(header) {
			return fmt.Errorf("table at line %d, row %d: %d cells for %d columns", line, ri+1, len(row), len(header))
		}
		for _, layout := range []string{"Pipeline", "Tensor"} {
			var p Point
			var err error
			if p.InputThroughput, err = parseCell(cellAt(row, header, layout+" (Prompt TPS)"), layout+" (Prompt TPS)", line); err != nil {
				return err
			}
			if p.OutputThroughput, err = parseCell(cellAt(row, header, layout+" (Gen TPS)"), layout+" (Gen TPS)", line); err != nil {
				return err
			}
			if p.OutputThroughput == nil && p.InputThroughput == nil {
				continue
			}
			p.Concurrency = lp(c.conc)
			if c.total > 0 {
				p.NumPrompts = ip(c.total)
			}
			p.Label = strings.ToLower(layout) + " parallel"
			p.Ref = fmt.Sprintf("%s table line %d row %d", filepathBase(im.File), line, ri+1)
			b := c.baseline(row[pi], presets, missing)
			if b.Parallelism != nil && layout == "Pipeline" {
				b.Parallelism = &Parallelism{PP: b.Parallelism.TP}
			}
			b.series = "pipeline-vs-tensor"
			b.Points = []Point{p}
			im.Baselines = append(im.Baselines, b)
		}
	}
	return nil
}

func cellAt(row, header []string, name string) string {
	if i := indexOf(header, name); i >= 0 && i < len(row) {
		return row[i]
	}
	return ""
}

// ---- the Lambda A100/H100 report: "throughput/latency" table (GPU rows x model columns) ----

var (
	reTLValue      = regexp.MustCompile(`^(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)$`)
	reNumPrompts   = regexp.MustCompile("--num-prompts`?\\s+set to\\s+(\\d+)")
	reHardwareGPUs = regexp.MustCompile(`^(\d+)x`)
)

func importThroughputLatencyTable(im *Import, text string) error {
	var numPrompts *int64
	if m := reNumPrompts.FindStringSubmatch(text); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		numPrompts = &n
	} else {
		im.Notes = append(im.Notes, "number of prompts per run not stated (\"--num-prompts set to N\"); num_prompts left out")
	}
	found := false
	for _, t := range markdownTables(text) {
		isTL := false
		for _, row := range t.rows {
			for _, cell := range row[min(1, len(row)):] {
				isTL = isTL || reTLValue.MatchString(cell)
			}
		}
		if !isTL {
			if len(t.rows) > 0 {
				im.Notes = append(im.Notes, fmt.Sprintf("table at line %d has no throughput/latency cells; not imported", t.start))
			}
			continue
		}
		found = true
		na := 0
		for ri, row := range t.rows {
			if len(row) != len(t.header) {
				return fmt.Errorf("table at line %d, row %d: %d cells for %d columns", t.start, ri+1, len(row), len(t.header))
			}
			hw := row[0]
			for ci := 1; ci < len(row); ci++ {
				cell := row[ci]
				if strings.EqualFold(cell, "N/A") || cell == "" {
					na++
					continue
				}
				m := reTLValue.FindStringSubmatch(cell)
				if m == nil {
					return fmt.Errorf("table at line %d, row %d, column %q: %q is not <throughput>/<latency>", t.start, ri+1, t.header[ci], cell)
				}
				tput, _ := strconv.ParseFloat(m[1], 64)
				lat, _ := strconv.ParseFloat(m[2], 64)
				p := Point{
					RequestRate:      lp(math.Inf(1)), // benchmark_serving.py default: all prompts at once
					NumPrompts:       numPrompts,
					OutputThroughput: fp(tput),
					ITL:              &Stats{Mean: fp(scale10(lat, 1e-3))}, // ms -> s
					Ref:              fmt.Sprintf("%s table line %d row %d column %d", filepathBase(im.File), t.start, ri+1, ci+1),
				}
				b := &Baseline{Model: t.header[ci], Hardware: hw, Source: Source{Tool: ToolVLLMServe, Definitions: map[string]string{
					"output_throughput": "the cell's first number: benchmark_serving.py \"Output token throughput (tok/s)\"",
					"itl_seconds":       "the cell's second number (ms / 1000), stored as the mean: the report's latency metric is benchmark_serving.py \"Inter-token Latency\"",
				}}}
				if m := reHardwareGPUs.FindStringSubmatch(hw); m == nil {
					im.Notes = append(im.Notes, fmt.Sprintf("row %q: GPU count not given as <N>x", hw))
				}
				b.Points = []Point{p}
				im.Baselines = append(im.Baselines, b)
			}
		}
		if na > 0 {
			im.Notes = append(im.Notes, fmt.Sprintf("table at line %d: %d N/A cells (model not served on that hardware); no points", t.start, na))
		}
	}
	if !found {
		return fmt.Errorf("no table with <throughput>/<latency> cells")
	}
	return nil
}
