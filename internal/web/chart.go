package web

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/svgchart"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// historyStrips are the metrics of a module's history chart on /target.
var historyStrips = []struct {
	name, color string
	value       func(probe.Result) time.Duration
	expected    func(e expectation) float64 // seconds, NaN when none
}{
	{"TTFT", "#4e79a7", func(r probe.Result) time.Duration { return r.TTFT }, func(e expectation) float64 { return e.ttft }},
	{"TPOT", "#f28e2b", func(r probe.Result) time.Duration { return r.TPOT }, func(e expectation) float64 { return e.tpot }},
	{"E2E", "#59a14f", func(r probe.Result) time.Duration { return r.E2E }, func(e expectation) float64 { return e.e2e }},
}

// expectation is a baseline's expected means, in seconds (NaN: none).
type expectation struct{ ttft, tpot, e2e float64 }

var noExpectation = expectation{math.NaN(), math.NaN(), math.NaN()}

// moduleExpectation is what t's baseline expects of module at the load the
// window's probes saw, noExpectation without a baseline or before the load
// is known.
func (h *handler) moduleExpectation(t *config.Target, module string) expectation {
	if t.Baseline == "" || h.cmp == nil {
		return noExpectation
	}
	c, ok := h.cmp.Compare(t.Name, module)
	if !ok {
		return noExpectation
	}
	return expectation{c.Expected.TTFTMean, c.Expected.TPOTMean, c.Expected.E2EMean}
}

// historyChart draws history (newest first, as the prober keeps it) as the
// module's chart: TTFT, TPOT and E2E in ms over the kept probes, oldest on
// the left, failed probes marked, the baseline's expected values as dashed
// lines. errText is the probe's error as the page shows it (scrubbed).
func historyChart(module string, history []pageResult, exp expectation) template.HTML {
	if len(history) == 0 {
		return ""
	}
	strips := make([]svgchart.Strip, len(historyStrips))
	for k, s := range historyStrips {
		strips[k] = svgchart.Strip{Name: s.name, Unit: "ms", Color: s.color, Expected: s.expected(exp) * 1000}
	}
	probes := make([]svgchart.Probe, 0, len(history))
	for i := len(history) - 1; i >= 0; i-- {
		r := history[i]
		p := svgchart.Probe{Failed: !r.Success, Values: make([]float64, len(historyStrips))}
		var parts []string
		for k, s := range historyStrips {
			p.Values[k] = math.NaN()
			if v := s.value(r.Result); r.Success && v > 0 {
				p.Values[k] = float64(v) / float64(time.Millisecond)
				parts = append(parts, s.name+" "+fmtDur(v))
			}
		}
		when := r.Start.UTC().Format("15:04:05Z")
		if p.Failed {
			msg := r.Err
			if len(msg) > 200 {
				msg = msg[:200] + "…"
			}
			p.Title = fmt.Sprintf("%s %s: %s", when, r.Reason, msg)
		} else {
			p.Title = when + " success: " + strings.Join(parts, ", ")
		}
		probes = append(probes, p)
	}
	title := fmt.Sprintf("%s: TTFT, TPOT and E2E of the last %d probes (oldest on the left; ✕ a failed probe; dashed: the baseline's expected value)", module, len(history))
	// Every text in the SVG is escaped by svgchart.Strips.
	return template.HTML(svgchart.Strips(title, strips, probes)) //nolint:gosec // every text in it is escaped
}
