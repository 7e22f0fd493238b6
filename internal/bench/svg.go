package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"

	"github.com/vllm-prober/vllm_prober/internal/svgchart"
)

// Scale says where a chart's value axis starts and how it is labelled
// (internal/svgchart, shared with the daemon's target page).
type Scale = svgchart.Scale

const (
	// ScaleZero starts the axis at 0 (throughputs).
	ScaleZero = svgchart.ScaleZero
	// ScaleNearData starts the axis at a round value just below the smallest
	// value drawn (latencies), so that differences between levels show.
	ScaleNearData = svgchart.ScaleNearData
	// ScaleCount starts at 0 with whole-number ticks and labels (counts).
	ScaleCount = svgchart.ScaleCount
)

// Series is one bar per level, drawn side by side with the other series.
type Series struct {
	Name   string
	Values []float64
}

// chartMetric is one bar chart: a metric per level, or for a latency the
// mean with the run's percentiles next to it.
type chartMetric struct {
	file, title, unit string
	scale             Scale
	value             func(*LevelResult) float64
	dist              func(*LevelResult) (d *Dist, scale float64) // latency charts: mean and percentiles
}

var chartMetrics = []chartMetric{
	{file: "prompt-tps", title: "Prompt TPS (server)", unit: "tokens/s", value: func(l *LevelResult) float64 { return l.Server.PromptTPS }},
	{file: "gen-tps", title: "Gen TPS (server)", unit: "tokens/s", value: func(l *LevelResult) float64 { return l.Server.GenerationTPS }},
	{file: "avg-latency", title: "Latency (E2E)", unit: "s", scale: ScaleNearData, dist: func(l *LevelResult) (*Dist, float64) { return &l.Metrics.E2E, 1 }},
	{file: "request-gen-tps", title: "Request Generation Level TPS", unit: "tokens/s", value: func(l *LevelResult) float64 { return l.Metrics.OutputTPSPerRequest.Mean }},
	{file: "request-prompt-tps", title: "Request Prompt Level TPS", unit: "tokens/s", value: func(l *LevelResult) float64 { return l.Metrics.InputTPSPerRequest.Mean }},
	{file: "errors", title: "Errors", unit: "requests", scale: ScaleCount, value: func(l *LevelResult) float64 { return float64(l.Metrics.Failed) }},
	{file: "output-throughput", title: "Output token throughput (client)", unit: "tokens/s", value: func(l *LevelResult) float64 { return l.Metrics.OutputThroughput }},
	{file: "mean-ttft", title: "TTFT", unit: "ms", scale: ScaleNearData, dist: func(l *LevelResult) (*Dist, float64) { return &l.Metrics.TTFT, 1000 }},
	{file: "mean-tpot", title: "TPOT", unit: "ms", scale: ScaleNearData, dist: func(l *LevelResult) (*Dist, float64) { return &l.Metrics.TPOT, 1000 }},
	{file: "mean-itl", title: "ITL", unit: "ms", scale: ScaleNearData, dist: func(l *LevelResult) (*Dist, float64) { return &l.Metrics.ITL, 1000 }},
}

// Charts renders the SVG charts of rep by file name: a bar chart per metric
// (like the multi-GPU presets report's; the latencies with their mean and
// percentiles side by side) and the throughput-vs-latency curve (the Lambda
// A100/H100 report).
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
		var series []Series
		if cm.dist != nil {
			mean := Series{Name: "mean", Values: make([]float64, len(rep.Levels))}
			pcts := make([]Series, len(rep.Percentiles))
			for j, p := range rep.Percentiles {
				pcts[j] = Series{Name: "p" + PercentileLabel(p), Values: make([]float64, len(rep.Levels))}
			}
			for i, lr := range rep.Levels {
				d, k := cm.dist(lr)
				mean.Values[i] = levelValue(lr, d.Mean*k)
				for j := range pcts {
					pcts[j].Values[i] = levelValue(lr, d.Percentiles[j]*k)
				}
			}
			series = append([]Series{mean}, pcts...)
		} else {
			vals := make([]float64, len(rep.Levels))
			for i, lr := range rep.Levels {
				vals[i] = cm.value(lr)
			}
			series = []Series{{Values: vals}}
		}
		title := rep.Name + ": " + cm.title
		if cm.dist != nil {
			title += " (" + seriesNames(series) + ")"
		}
		out[rep.Name+"-"+cm.file+".svg"] = BarChart(title, cm.unit, labels, series, cm.scale)
	}
	xs := make([]float64, len(rep.Levels))
	ys := make([]float64, len(rep.Levels))
	for i, lr := range rep.Levels {
		xs[i] = levelValue(lr, lr.Metrics.ITL.Mean*1000)
		ys[i] = lr.Metrics.OutputThroughput
	}
	out[rep.Name+"-throughput-latency.svg"] = CurveChart(rep.Name+": throughput vs latency",
		"Mean inter-token latency (ms)", "Output token throughput (tokens/s)", labels, xs, ys)
	return out
}

// levelValue is v, or NaN (not measured, drawn "n/a") for a level where no
// request completed: its latencies are vLLM's zeros, not measurements.
func levelValue(lr *LevelResult, v float64) float64 {
	if lr.Metrics.Completed == 0 {
		return math.NaN()
	}
	return v
}

func seriesNames(series []Series) string {
	names := make([]string, len(series))
	for i, s := range series {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

const (
	svgW, svgH                     = 720, 420
	padL, padR, padT, padB         = 80, 30, 50, 60
	plotW, plotH                   = svgW - padL - padR, svgH - padT - padB
	svgStyle                       = `font-family="sans-serif" font-size="12"`
	lineColor, gridColor           = "#e15759", "#dddddd"
	legendY                        = svgH - 14
	barGroupWidth                  = 0.7 // of a level's slot
	barColorMean, barColorFallback = "#4e79a7", "#bab0ac"
)

// barColors colour the series of a chart: the mean (or the only value) first.
var barColors = []string{barColorMean, "#f28e2b", "#e15759", "#76b7b2", "#59a14f"}

func barColor(i int) string {
	if i < len(barColors) {
		return barColors[i]
	}
	return barColorFallback
}

func svgOpen(b *bytes.Buffer, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>`+"\n", svgW, svgH, svgW, svgH, svgStyle)
	fmt.Fprintf(b, `<title>%s</title>`+"\n", html.EscapeString(title))
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(b, `<text x="%d" y="28" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", svgW/2, html.EscapeString(title))
}

// yAxis draws horizontal grid lines and labels over a.
func yAxis(b *bytes.Buffer, a svgchart.Axis, label string) {
	for _, v := range a.Ticks() {
		y := padT + plotH - int(math.Round(a.Pos(v)*plotH))
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", padL, y, padL+plotW, y, gridColor)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", padL-6, y+4, svgchart.FmtTick(v))
	}
	fmt.Fprintf(b, `<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, html.EscapeString(label))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT, padL, padT+plotH)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH)
}

// BarChart renders, per label, one bar for each series side by side, with a
// legend when there is more than one series. A NaN value (not measured) draws
// no bar and is labelled "n/a". ScaleCount values are labelled as integers.
func BarChart(title, unit string, labels []string, series []Series, scale Scale) []byte {
	var b bytes.Buffer
	svgOpen(&b, title)
	var all []float64
	for _, s := range series {
		all = append(all, s.Values...)
	}
	a := svgchart.NewAxis(scale, all...)
	yAxis(&b, a, unit)
	slot := float64(plotW) / float64(max(len(labels), 1))
	bw := slot * barGroupWidth / float64(max(len(series), 1))
	for i, label := range labels {
		x0 := float64(padL) + slot*float64(i) + slot*(1-barGroupWidth)/2
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(padL)+slot*(float64(i)+0.5), padT+plotH+18, html.EscapeString(label))
		for j, s := range series {
			x := x0 + bw*float64(j)
			cx := x + bw/2
			v := s.Values[i]
			if !ok(v) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#888888">n/a</text>`+"\n", cx, padT+plotH-6)
				continue
			}
			text := fmtValue(v)
			if scale == ScaleCount {
				text = strconv.FormatFloat(math.Round(v), 'f', 0, 64)
			}
			name := html.EscapeString(label)
			if s.Name != "" {
				name += " " + html.EscapeString(s.Name)
			}
			h := a.Pos(v) * plotH
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s %s</title></rect>`+"\n",
				x, float64(padT+plotH)-h, bw, h, barColor(j), name, text, html.EscapeString(unit))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", cx, float64(padT+plotH)-h-5, text)
		}
	}
	if len(series) > 1 {
		x := padL
		for j, s := range series {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", x, legendY-10, barColor(j))
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+16, legendY, html.EscapeString(s.Name))
			x += 80
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func fmtValue(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// CurveChart renders points (xs[i], ys[i]) joined in order, each labelled;
// points with a NaN coordinate are skipped. The latency (x) axis starts near
// the data, the throughput (y) axis at 0.
func CurveChart(title, xLabel, yLabel string, labels []string, xs, ys []float64) []byte {
	var b bytes.Buffer
	svgOpen(&b, title)
	var px0, py0 []float64
	for i := range xs {
		if ok(xs[i]) && ok(ys[i]) {
			px0, py0 = append(px0, xs[i]), append(py0, ys[i])
		}
	}
	ay := svgchart.NewAxis(ScaleZero, py0...)
	ax := svgchart.NewAxis(ScaleNearData, px0...)
	yAxis(&b, ay, yLabel)
	for _, v := range ax.Ticks() {
		x := padL + int(math.Round(ax.Pos(v)*plotW))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", x, padT, x, padT+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x, padT+plotH+16, svgchart.FmtTick(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-16, html.EscapeString(xLabel))
	px := func(v float64) float64 { return float64(padL) + ax.Pos(v)*plotW }
	py := func(v float64) float64 { return float64(padT+plotH) - ay.Pos(v)*plotH }
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

func ok(v float64) bool { return svgchart.Finite(v) }
