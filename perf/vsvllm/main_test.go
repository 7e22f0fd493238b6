package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestServerFigures computes the server side from a hand-written trace and
// arrival file: request a (arrived at 0) wrote tokens at 50, 70 and 100 ms,
// request b (arrived at 10) at 70, 90 and 110 ms; t, benchmark_serving.py's
// test request, arrived first and is left out when skipFirst.
func TestServerFigures(t *testing.T) {
	dir := t.TempDir()
	const ms = int64(1e6)
	trace := []string{}
	for _, e := range []struct {
		id string
		at int64
	}{{"t", -500}, {"t", -480}, {"a", 50}, {"b", 70}, {"a", 70}, {"b", 90}, {"a", 100}, {"b", 110}} {
		trace = append(trace, `{"request_id":"`+e.id+`","event":1,"kind":"token","token":1,"time_unix_nano":`+itoa(1e12+e.at*ms)+`}`)
	}
	trace = append(trace, `{"request_id":"a","event":9,"kind":"usage","token":3,"time_unix_nano":`+itoa(1e12+200*ms)+`}`)
	arrivals := []string{
		`{"request_id":"t","time_unix_nano":` + itoa(1e12-600*ms) + `}`,
		`{"request_id":"a","time_unix_nano":` + itoa(1e12) + `}`,
		`{"request_id":"b","time_unix_nano":` + itoa(1e12+10*ms) + `}`,
	}
	tp, ap := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "arrivals.jsonl")
	if err := os.WriteFile(tp, []byte(strings.Join(trace, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ap, []byte(strings.Join(arrivals, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := serverFigures(tp, ap, true)
	if err != nil {
		t.Fatal(err)
	}
	// Gaps 20, 30, 20, 20: numpy-linear p99 = 20 + 0.97·10; TTFTs 50 and 60.
	if math.Abs(got.gapP99-29.7) > 1e-9 || math.Abs(got.meanTTFT-55) > 1e-9 {
		t.Errorf("skipFirst: gap p99 %v, mean TTFT %v; want 29.7 and 55", got.gapP99, got.meanTTFT)
	}
	// Without skipFirst the test request counts: TTFT (100+50+60)/3.
	got, err = serverFigures(tp, ap, false)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.meanTTFT-70) > 1e-9 {
		t.Errorf("mean TTFT %v, want 70", got.meanTTFT)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
