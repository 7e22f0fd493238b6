package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMatch computes the errors from a hand-written trace and arrival file:
// a (first wave) arrived at 0, its first token at 50 ms, the client saw it at
// 53 ms: error 3 ms; b (second wave) arrived at 100, first token at 150, the
// client saw 151 ms: error 1 ms. The client's test request t is not a
// request of the run.
func TestMatch(t *testing.T) {
	dir := t.TempDir()
	const ms = int64(1e6)
	line := func(id string, at int64) string {
		return `{"request_id":"` + id + `","event":1,"kind":"token","token":1,"time_unix_nano":` + strconv.FormatInt(1e12+at*ms, 10) + `}`
	}
	trace := []string{line(runnerTestID, -400), line("a", 50), line("a", 70), line("b", 150), line("b", 170)}
	arrivals := []string{
		`{"request_id":"` + runnerTestID + `","time_unix_nano":` + strconv.FormatInt(1e12-450*ms, 10) + `}`,
		`{"request_id":"a","time_unix_nano":` + strconv.FormatInt(1e12, 10) + `}`,
		`{"request_id":"b","time_unix_nano":` + strconv.FormatInt(1e12+100*ms, 10) + `}`,
	}
	tp, ap := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "arrivals.jsonl")
	if err := os.WriteFile(tp, []byte(strings.Join(trace, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ap, []byte(strings.Join(arrivals, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := match([]clientRecord{{"a", 0.053, true}, {"b", 0.051, true}}, 1, tp, ap)
	if err != nil {
		t.Fatal(err)
	}
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("wave1 p99", res.wave1P99, 3)
	near("later p99", res.laterP99, 1)
	near("max", res.max, 3)
	near("tokens/s", res.tokensPerS, 4/0.170)
	if _, err := match([]clientRecord{{"c", 0.05, true}}, 1, tp, ap); err == nil || !strings.Contains(err.Error(), "never reached") {
		t.Errorf("an unmatched request: err %v", err)
	}
}
