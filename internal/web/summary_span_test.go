package web

import (
	"slices"
	"strings"
	"testing"
)

// TestSpanTargets: adjacent rows of one target share its last-scrape and
// labels cells, and a reason they have in common; a row never passed to
// spanTargets still renders every one of its 12 cells.
func TestSpanTargets(t *testing.T) {
	cells := func(r pairRow) int { return strings.Count(string(r.HTML()), "<td") }
	if n := cells(pairRow{Target: "a", State: stateHealthy}); n != 12 {
		t.Errorf("a row of its own renders %d cells, want 12", n)
	}
	rows := spanTargets([]pairRow{
		{Target: "a", Module: "m1", State: stateFailing, Reason: "connection", Scrape: "down", Labels: "pool=x"},
		{Target: "a", Module: "m2", State: stateFailing, Reason: "connection", Scrape: "down", Labels: "pool=x"},
		{Target: "a", Module: "m3", State: stateFailing, Reason: "timeout", Scrape: "down", Labels: "pool=x"},
		{Target: "b", Module: "m1", State: stateFailing, Reason: "timeout", Scrape: "up", Labels: "pool=y"},
	})
	if got, want := []int{cells(rows[0]), cells(rows[1]), cells(rows[2]), cells(rows[3])}, []int{12, 9, 10, 12}; !slices.Equal(got, want) {
		t.Errorf("cells per row = %v, want %v", got, want)
	}
	first := string(rows[0].HTML())
	for _, want := range []string{`<td rowspan="2">connection`, `<td rowspan="3">down`, `<td rowspan="3">pool=x`} {
		if !strings.Contains(first, want) {
			t.Errorf("the target's first row lacks %s: %s", want, first)
		}
	}
	if last := string(rows[3].HTML()); strings.Contains(last, "rowspan") || !strings.Contains(last, "<td>timeout") {
		t.Errorf("another target's row spans or lacks its own reason: %s", last)
	}
}
