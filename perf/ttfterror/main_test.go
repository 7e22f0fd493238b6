package main

import (
	"context"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
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
	// a was sent 0.5 ms longer before its arrival than b: its way out is
	// 0.5 ms (b's is the least, 0) and its way back 2.5 ms.
	res, err := match([]clientRecord{{"a", 0.053, true, 10}, {"b", 0.051, true, 10.1005}}, 1, tp, ap)
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
	near("send p99", res.sendP99, 0.5) // nearest rank
	near("recv p99", res.recvP99, 2.5)
	near("wave 1 spread", res.wave1Spread, 0) // a alone
	if res, err := match([]clientRecord{{"a", 0.053, true, 0}, {"b", 0.051, true, 0}}, 1, tp, ap); err != nil || !math.IsNaN(res.sendP99) {
		t.Errorf("without send times: send p99 %v, err %v; want NaN", res.sendP99, err)
	}
	if _, err := match([]clientRecord{{"c", 0.05, true, 0}}, 1, tp, ap); err == nil || !strings.Contains(err.Error(), "never reached") {
		t.Errorf("an unmatched request: err %v", err)
	}
}

func TestPickClients(t *testing.T) {
	for _, tc := range []struct {
		list     string
		haveVLLM bool
		want     []string
		err      string
	}{
		{"prober,vllm,floor", true, []string{clientProber, clientVLLM, clientFloor}, ""},
		{"prober,vllm,floor", false, []string{clientProber, clientFloor}, ""},
		{"floor, prober", false, []string{clientProber, clientFloor}, ""},
		{"both", true, []string{clientProber, clientVLLM}, ""},
		{"vllm", false, nil, "needs vLLM's client"},
		{"prober,bench", true, nil, `"bench" is not one of`},
	} {
		got, err := pickClients(tc.list, tc.haveVLLM)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.list, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.list, got, err, tc.want)
		}
	}
}

// TestFloorAgainstTheSimulator runs the floor client against a real
// simulator (in this process) and matches its records to the simulator's
// trace: every request succeeded, carried its id, and took at least the
// simulator's TTFT.
func TestFloorAgainstTheSimulator(t *testing.T) {
	dir := t.TempDir()
	cfg := simulator.DefaultConfig()
	cfg.TTFT, cfg.ITL, cfg.BatchSlowdown, cfg.Jitter = 30*time.Millisecond, 2*time.Millisecond, 0, 0
	cfg.TraceFile = filepath.Join(dir, "trace.jsonl")
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	const c, n = 3, 7
	recs, err := runFloor(context.Background(), srv.URL, cfg.Model, c, n, 8, 4)
	srv.Close()
	if cerr := sim.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	ids := map[string]bool{}
	err = perfutil.ReadTrace(cfg.TraceFile, func(e perfutil.TraceEvent) { ids[e.RequestID] = true })
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if !r.Success || r.TTFT < cfg.TTFT.Seconds() || r.Start <= 0 || !ids[r.ID] {
			t.Errorf("request %d: %+v; want a success with a TTFT of at least %s, a send time and an id in the trace", i, r, cfg.TTFT)
		}
	}
	if warm := len(ids) - n; warm != c {
		t.Errorf("%d warm-up requests in the trace, want %d (one per connection)", warm, c)
	}
}
