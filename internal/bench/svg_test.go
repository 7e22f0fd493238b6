package bench

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestChartsShowPercentilesAndCounts checks the rendered charts: each latency
// chart draws the mean with P90 and P99 beside it and an axis that starts
// near the data, the error chart whole numbers, and a level where nothing
// completed "n/a" instead of vLLM's zeros.
func TestChartsShowPercentilesAndCounts(t *testing.T) {
	ok := goldenLevel() // TTFT mean 200 ms, p90 280, p99 298; 1 of 4 failed
	failed := goldenLevel()
	failed.Level = Level{LoadConcurrency, 8}
	failed.Metrics.Completed, failed.Metrics.Failed = 0, 4
	rep := &Report{Name: "c", Percentiles: []float64{90, 99}, Levels: []*LevelResult{ok, failed}, Date: time.Now()}
	charts := Charts(rep)
	ttft := string(charts["c-mean-ttft.svg"])
	for _, want := range []string{"<title>c: TTFT (mean, p90, p99)</title>", "<title>c4 mean: 200.00 ms</title>",
		"<title>c4 p90: 280.00 ms</title>", "<title>c4 p99: 298.00 ms</title>", ">n/a</text>"} {
		if !strings.Contains(ttft, want) {
			t.Errorf("TTFT chart lacks %q", want)
		}
	}
	ticks := regexp.MustCompile(`text-anchor="end">([0-9.]+)</text>`).FindAllStringSubmatch(ttft, -1)
	if len(ticks) == 0 || ticks[0][1] == "0" {
		t.Errorf("TTFT axis ticks %v: want the axis to start near 200 ms, not at 0", ticks)
	}
	errs := string(charts["c-errors.svg"])
	for _, want := range []string{"<title>c4: 1 requests</title>", "<title>c8: 4 requests</title>", `text-anchor="middle">4</text>`} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors chart lacks %q", want)
		}
	}
	if regexp.MustCompile(`>\d+\.\d+</text>`).MatchString(errs) {
		t.Errorf("errors chart has fractional labels:\n%s", errs)
	}
	for name, data := range charts {
		if err := wellFormedXML(data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
