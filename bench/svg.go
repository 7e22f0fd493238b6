package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// chartMetric is one bar chart: a metric per level.
type chartMetric struct {
	file, title, unit string
	value             func(*LevelResult) float64
}

var chartMetrics = []chartMetric{
	{"prompt-tps", "Prompt TPS (server)", "tokens/s", func(l *LevelResult) float64 { return l.Server.PromptTPS }},
	{"gen-tps", "Gen TPS (server)", "tokens/s", func(l *LevelResult) float64 { return l.Server.GenerationTPS }},
	{"avg-latency", "Avg Latency", "s", func(l *LevelResult) float64 { return l.Metrics.E2E.Mean }},
	{"request-gen-tps", "Request Generation Level TPS", "tokens/s", func(l *LevelResult) float64 { return l.Metrics.OutputTPSPerRequest.Mean }},
	{"request-prompt-tps", "Request Prompt Level TPS", "tokens/s", func(l *LevelResult) float64 { return l.Metrics.InputTPSPerRequest.Mean }},
	{"errors", "Errors", "requests", func(l *LevelResult) float64 { return float64(l.Metrics.Failed) }},
	{"output-throughput", "Output token throughput (client)", "tokens/s", func(l *LevelResult) float64 { return l.Metrics.OutputThroughput }},
	{"mean-ttft", "Mean TTFT", "ms", func(l *LevelResult) float64 { return l.Metrics.TTFT.Mean * 1000 }},
	{"mean-tpot", "Mean TPOT", "ms", func(l *LevelResult) float64 { return l.Metrics.TPOT.Mean * 1000 }},
	{"mean-itl", "Mean ITL", "ms", func(l *LevelResult) float64 { return l.Metrics.ITL.Mean * 1000 }},
}

// Charts renders the SVG charts of rep by file name: a bar chart per metric
// (the multi-GPU presets report) and the throughput-vs-latency curve (the Lambda A100/H100 report).
func Charts(rep *Report) map[string][]byte {
	out := map[string][]byte{}
	if len(rep.Levels) == 0 {
		return out
	}
	labels := make([]string, len(rep.Levels))
	for i, lr := range rep.Levels {
		labels[i] = lr.Level.Slug()
	}
	for _, cm := range chartMetrics {
		vals := make([]float64, len(rep.Levels))
		for i, lr := range rep.Levels {
			vals[i] = cm.value(lr)
		}
		out[rep.Name+"-"+cm.file+".svg"] = BarChart(rep.Name+": "+cm.title, cm.unit, labels, vals)
	}
	xs := make([]float64, len(rep.Levels))
	ys := make([]float64, len(rep.Levels))
	for i, lr := range rep.Levels {
		xs[i] = lr.Metrics.ITL.Mean * 1000
		ys[i] = lr.Metrics.OutputThroughput
	}
	out[rep.Name+"-throughput-latency.svg"] = CurveChart(rep.Name+": throughput vs latency",
		"Mean inter-token latency (ms)", "Output token throughput (tokens/s)", labels, xs, ys)
	return out
}

const (
	svgW, svgH                     = 720, 420
	padL, padR, padT, padB         = 80, 30, 50, 60
	plotW, plotH                   = svgW - padL - padR, svgH - padT - padB
	svgStyle                       = `font-family="sans-serif" font-size="12"`
	barColor, lineColor, gridColor = "#4e79a7", "#e15759", "#dddddd"
)

func svgOpen(b *bytes.Buffer, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>`+"\n", svgW, svgH, svgW, svgH, svgStyle)
	fmt.Fprintf(b, `<title>%s</title>`+"\n", html.EscapeString(title))
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(b, `<text x="%d" y="28" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", svgW/2, html.EscapeString(title))
}

// niceCeil returns a round axis maximum >= v and its tick step.
func niceCeil(v float64) (top, step float64) {
	if !(v > 0) || math.IsInf(v, 0) {
		return 1, 0.2
	}
	raw := v / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return math.Ceil(v/step-1e-9) * step, step
}

func fmtTick(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// yAxis draws horizontal grid lines and labels from 0 to top.
func yAxis(b *bytes.Buffer, top, step float64, label string) {
	for v := 0.0; v <= top+step/2; v += step {
		y := padT + plotH - int(math.Round(v/top*plotH))
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", padL, y, padL+plotW, y, gridColor)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", padL-6, y+4, fmtTick(v))
	}
	fmt.Fprintf(b, `<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, html.EscapeString(label))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT, padL, padT+plotH)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH)
}

// BarChart renders one bar per label. A NaN value (not measured) draws no bar
// and is labelled "n/a".
func BarChart(title, unit string, labels []string, values []float64) []byte {
	var b bytes.Buffer
	svgOpen(&b, title)
	hi := 0.0
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			hi = math.Max(hi, v)
		}
	}
	top, step := niceCeil(hi)
	yAxis(&b, top, step, unit)
	n := len(values)
	slot := float64(plotW) / float64(max(n, 1))
	bw := slot * 0.6
	for i, v := range values {
		x := float64(padL) + slot*float64(i) + (slot-bw)/2
		cx := x + bw/2
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", cx, padT+plotH+18, html.EscapeString(labels[i]))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#888888">n/a</text>`+"\n", cx, padT+plotH-6)
			continue
		}
		h := v / top * plotH
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s %s</title></rect>`+"\n",
			x, float64(padT+plotH)-h, bw, h, barColor, html.EscapeString(labels[i]), fmtValue(v), html.EscapeString(unit))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", cx, float64(padT+plotH)-h-5, fmtValue(v))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func fmtValue(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// CurveChart renders points (xs[i], ys[i]) joined in order, each labelled;
// points with a NaN coordinate are skipped.
func CurveChart(title, xLabel, yLabel string, labels []string, xs, ys []float64) []byte {
	var b bytes.Buffer
	svgOpen(&b, title)
	hx, hy := 0.0, 0.0
	for i := range xs {
		if ok(xs[i]) && ok(ys[i]) {
			hx, hy = math.Max(hx, xs[i]), math.Max(hy, ys[i])
		}
	}
	topY, stepY := niceCeil(hy)
	topX, stepX := niceCeil(hx)
	yAxis(&b, topY, stepY, yLabel)
	for v := 0.0; v <= topX+stepX/2; v += stepX {
		x := padL + int(math.Round(v/topX*plotW))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", x, padT, x, padT+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x, padT+plotH+16, fmtTick(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-16, html.EscapeString(xLabel))
	px := func(v float64) float64 { return float64(padL) + v/topX*plotW }
	py := func(v float64) float64 { return float64(padT+plotH) - v/topY*plotH }
	var pts bytes.Buffer
	for i := range xs {
		if ok(xs[i]) && ok(ys[i]) {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(xs[i]), py(ys[i]))
		}
	}
	if pts.Len() > 0 {
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", bytes.TrimSpace(pts.Bytes()), lineColor)
	}
	for i := range xs {
		if !ok(xs[i]) || !ok(ys[i]) {
			continue
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s: %s ms, %s tokens/s</title></circle>`+"\n",
			px(xs[i]), py(ys[i]), lineColor, html.EscapeString(labels[i]), fmtValue(xs[i]), fmtValue(ys[i]))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", px(xs[i])+6, py(ys[i])-6, html.EscapeString(labels[i]))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func ok(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
