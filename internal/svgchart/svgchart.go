// Package svgchart holds the SVG chart parts shared by bench's result charts
// and the daemon's target page: round value axes and a small chart of
// stacked strips over a history.
package svgchart

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// Scale says where a chart's value axis starts and how it is labelled.
type Scale int

const (
	// ScaleZero starts the axis at 0 (throughputs, latencies over time).
	ScaleZero Scale = iota
	// ScaleNearData starts the axis at a round value just below the smallest
	// value drawn (latencies), so that differences between levels show.
	ScaleNearData
	// ScaleCount starts at 0 with whole-number ticks and labels (counts).
	ScaleCount
)

const (
	maxTicks       = 5
	nearDataMargin = 0.25 // of the data's range, below its smallest value
)

// Finite reports whether v is a number to draw (not NaN, not ±Inf).
func Finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Axis is a value axis from Lo to Hi with a tick every step.
type Axis struct{ Lo, Hi, Step float64 }

// niceStep is the smallest of 1, 2, 2.5, 5 × 10^k that is at least raw.
func niceStep(raw float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step := m * mag; step >= raw*(1-1e-9) {
			return step
		}
	}
	return 10 * mag
}

// NewAxis returns round bounds holding every finite value of vs: from 0, or
// (ScaleNearData) from a round value a little below the smallest, with whole
// steps for ScaleCount. Without a finite positive value it is 0 to 1.
func NewAxis(scale Scale, vs ...float64) Axis {
	lo, hi, found := math.Inf(1), math.Inf(-1), false
	for _, v := range vs {
		if Finite(v) {
			lo, hi, found = math.Min(lo, v), math.Max(hi, v), true
		}
	}
	if !found || !(hi > 0) {
		if scale == ScaleCount {
			return Axis{0, 1, 1}
		}
		return Axis{0, 1, 0.2}
	}
	bottom := 0.0
	if scale == ScaleNearData && lo > 0 {
		bottom = lo - nearDataMargin*(hi-lo)
		if hi == lo {
			bottom = 0.9 * lo // one value: 10 % below it
		}
		bottom = math.Max(0, bottom)
	}
	step := niceStep((hi - bottom) / maxTicks)
	if scale == ScaleCount {
		step = math.Max(1, math.Ceil(step))
	}
	a := Axis{Lo: math.Floor(bottom/step+1e-9) * step, Hi: math.Ceil(hi/step-1e-9) * step, Step: step}
	if a.Hi <= a.Lo {
		a.Hi = a.Lo + step
	}
	return a
}

// Pos maps v to a fraction of the axis, clamped to [0, 1].
func (a Axis) Pos(v float64) float64 {
	return math.Max(0, math.Min(1, (v-a.Lo)/(a.Hi-a.Lo)))
}

// Ticks are the values of the axis's grid lines, Lo to Hi.
func (a Axis) Ticks() []float64 {
	var out []float64
	n := int(math.Round((a.Hi - a.Lo) / a.Step))
	for i := 0; i <= n; i++ {
		out = append(out, a.Lo+float64(i)*a.Step)
	}
	return out
}

// FmtTick labels a tick value.
func FmtTick(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// Strip is one metric of a Strips chart.
type Strip struct {
	Name, Unit string
	Color      string
	// Expected is drawn as a dashed line across the strip (a baseline's
	// expected value); NaN draws none.
	Expected float64
}

// Probe is one x position of a Strips chart, oldest first.
type Probe struct {
	// Values holds one value per strip, in the strip's unit; NaN where there
	// is none (a failed probe's).
	Values []float64
	// Failed marks the probe with a red line across every strip.
	Failed bool
	// Title is the probe's tooltip (its time, values or failure): plain
	// text, escaped here.
	Title string
}

// Strips chart layout, in pixels.
const (
	stripsW      = 560
	stripH       = 52
	stripGap     = 8
	stripsLeft   = 92 // name, unit and tick labels
	stripsRight  = 12
	stripsTop    = 6
	stripsBottom = 18
	failColor    = "#c62828"
)

// Strips renders probes as small stacked charts sharing the x axis, one per
// strip (TTFT, TPOT, E2E): a line through each strip's values, every probe a
// <g class="probe"> group (its circles, one per measured value), a failed
// probe a <g class="probe fail"> group with a red line across the strips, and
// a strip's expected value a dashed <line class="expected">. Each strip's
// axis starts at 0 and holds its values and its expected value. No script,
// no style sheet: a few kilobytes of inline SVG.
func Strips(title string, strips []Strip, probes []Probe) []byte {
	var b bytes.Buffer
	h := stripsTop + len(strips)*(stripH+stripGap) - stripGap + stripsBottom
	plotW := float64(stripsW - stripsLeft - stripsRight)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="history" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="10" role="img">`,
		stripsW, h, stripsW, h)
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(title))
	x := func(i int) float64 {
		if len(probes) == 1 {
			return stripsLeft + plotW/2
		}
		return stripsLeft + plotW*float64(i)/float64(len(probes)-1)
	}
	axes := make([]Axis, len(strips))
	for k, s := range strips {
		vs := []float64{s.Expected}
		for _, p := range probes {
			if k < len(p.Values) {
				vs = append(vs, p.Values[k])
			}
		}
		axes[k] = NewAxis(ScaleZero, vs...)
		top := float64(stripsTop + k*(stripH+stripGap))
		fmt.Fprintf(&b, `<g class="strip" data-metric="%s">`, html.EscapeString(s.Name))
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="#fafafa" stroke="#dddddd"/>`, stripsLeft, top, plotW, stripH)
		fmt.Fprintf(&b, `<text x="4" y="%.0f" font-size="11" font-weight="bold" fill="%s">%s</text>`, top+14, s.Color, html.EscapeString(s.Name))
		fmt.Fprintf(&b, `<text x="4" y="%.0f" fill="#666666">%s</text>`, top+27, html.EscapeString(s.Unit))
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end" fill="#666666">%s</text>`, stripsLeft-4, top+9, FmtTick(axes[k].Hi))
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end" fill="#666666">0</text>`, stripsLeft-4, top+stripH)
		if Finite(s.Expected) {
			y := top + stripH - axes[k].Pos(s.Expected)*stripH
			fmt.Fprintf(&b, `<line class="expected" x1="%d" y1="%.1f" x2="%.0f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"><title>%s expected by the baseline: %s %s</title></line>`,
				stripsLeft, y, stripsLeft+plotW, y, s.Color, html.EscapeString(s.Name), strconv.FormatFloat(s.Expected, 'f', 2, 64), html.EscapeString(s.Unit))
		}
		// The line breaks at a failed probe: nothing was measured there.
		var pts bytes.Buffer
		flush := func() {
			if pts.Len() > 0 {
				fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, bytes.TrimSpace(pts.Bytes()), s.Color)
			}
			pts.Reset()
		}
		for i, p := range probes {
			if k < len(p.Values) && Finite(p.Values[k]) && !p.Failed {
				fmt.Fprintf(&pts, "%.1f,%.1f ", x(i), top+stripH-axes[k].Pos(p.Values[k])*stripH)
				continue
			}
			flush()
		}
		flush()
		b.WriteString(`</g>`)
	}
	bottom := float64(h - stripsBottom)
	for i, p := range probes {
		if p.Failed {
			fmt.Fprintf(&b, `<g class="probe fail"><title>%s</title><line x1="%.1f" y1="%d" x2="%.1f" y2="%.0f" stroke="%s" stroke-width="2"/><text x="%.1f" y="%.0f" text-anchor="middle" fill="%s" font-weight="bold">✕</text></g>`,
				html.EscapeString(p.Title), x(i), stripsTop, x(i), bottom, failColor, x(i), bottom+12, failColor)
			continue
		}
		fmt.Fprintf(&b, `<g class="probe"><title>%s</title>`, html.EscapeString(p.Title))
		for k, s := range strips {
			if k < len(p.Values) && Finite(p.Values[k]) {
				top := float64(stripsTop + k*(stripH+stripGap))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, x(i), top+stripH-axes[k].Pos(p.Values[k])*stripH, s.Color)
			}
		}
		b.WriteString(`</g>`)
	}
	b.WriteString("</svg>")
	return b.Bytes()
}
