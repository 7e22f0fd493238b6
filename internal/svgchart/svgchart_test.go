package svgchart

import (
	"math"
	"strings"
	"testing"
)

func nan() float64 { return math.NaN() }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestNewAxis(t *testing.T) {
	for _, c := range []struct {
		name  string
		scale Scale
		vs    []float64
		want  Axis
	}{
		// Latencies of 180-240 ms: the axis starts just below the data, not at 0.
		{"near data", ScaleNearData, []float64{200, 240, 180}, Axis{160, 240, 20}},
		{"near data, one value", ScaleNearData, []float64{50}, Axis{45, 50, 1}},
		{"near data, close to 0", ScaleNearData, []float64{1, 100}, Axis{0, 100, 20}},
		{"from zero", ScaleZero, []float64{200, 240}, Axis{0, 250, 50}},
		// Counts: whole steps, even for 3 failures.
		{"count", ScaleCount, []float64{0, 3}, Axis{0, 3, 1}},
		{"count, large", ScaleCount, []float64{11, 47}, Axis{0, 50, 10}},
		{"nothing measured", ScaleNearData, []float64{nan()}, Axis{0, 1, 0.2}},
	} {
		if got := NewAxis(c.scale, c.vs...); !near(got.Lo, c.want.Lo) || !near(got.Hi, c.want.Hi) || !near(got.Step, c.want.Step) {
			t.Errorf("%s: axis %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestStrips: one probe group per probe, the failed ones marked, a circle per
// measured value, the expected value as a dashed line where given, the line
// broken at a failure, every text escaped.
func TestStrips(t *testing.T) {
	strips := []Strip{{Name: "TTFT", Unit: "ms", Color: "#111", Expected: 10}, {Name: "E2E", Unit: "ms", Color: "#222", Expected: nan()}}
	probes := []Probe{
		{Values: []float64{12, 100}, Title: "a"},
		{Values: []float64{11, 90}, Title: "b"},
		{Failed: true, Values: []float64{nan(), nan()}, Title: `<script>alert("x")</script>`},
		{Values: []float64{13, nan()}, Title: "d"},
	}
	svg := string(Strips("t <&>", strips, probes))
	count := func(s string) int { return strings.Count(svg, s) }
	for _, c := range []struct {
		what string
		n    int
	}{
		{`<g class="probe">`, 3}, {`<g class="probe fail">`, 1}, {`<circle `, 6 - 1},
		{`<line class="expected"`, 1}, {`<polyline `, 3}, {`<script>`, 0}, {`&lt;script&gt;`, 1}, {`t &lt;&amp;&gt;`, 1},
	} {
		if got := count(c.what); got != c.n {
			t.Errorf("%d × %s, want %d", got, c.what, c.n)
		}
	}
}
