package collector

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// vmRSS returns the process's resident set size in bytes, from
// /proc/self/status; 0 where there is none.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if f := strings.Fields(string(l)); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestEngineValuesSoak is TestEngineValuesBounded for minutes: the hostile
// target (20,000 models, one 2 MiB long, 10,000 finished_reason values) and a
// healthy one are scraped and gathered once a second; the healthy target
// keeps all its series at every gather and RSS does not grow: the peak of
// the second half stays within 32 MB of the first half's. RSS is the test
// binary's, the fake hostile target (which renders its 20,000 models, one
// 2 MiB long, at every scrape) included: 130-157 MB over 100 s on a 2-core
// machine, flat. It runs when VLLM_PROBER_SOAK is a duration (e.g. 3m); TestEngineValuesBounded
// is its short version in every test run.
func TestEngineValuesSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("VLLM_PROBER_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("VLLM_PROBER_SOAK is not a duration")
	}
	const growth = 32 << 20
	start := time.Now()
	var firstPeak int64
	bad, good := hostileEngine(t, 20000, 10000), newFakeVLLM(t)
	good.set(state{Running: 4, Waiting: 2, KV: 0.8, Prompt: 100, Gen: 1000, Stop: 10, TTFT01: 5, TTFT05: 10, TTFTInf: 10, TTFTSum: 1})
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	cfg := configFor(t, bad.URL, "10s", 4)
	cfg.Targets[1].URL, cfg.Targets[1].ScrapeMetrics = good.URL, true
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	var peak int64
	goodSeries, rounds := 0, 0
	for end := time.Now().Add(d); time.Now().Before(end); rounds++ {
		for _, name := range []string{"a", "b"} {
			m.target(name).scrapeOnce(context.Background())
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather: %v", err)
		}
		n := 0
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				for _, lp := range mt.GetLabel() {
					if lp.GetName() == "target" && lp.GetValue() == "b" {
						n++
					}
				}
			}
		}
		if goodSeries == 0 {
			goodSeries = n
		}
		if n < 15 || n < goodSeries {
			t.Fatalf("round %d: the healthy target exports %d series, %d before", rounds, n, goodSeries)
		}
		rss := vmRSS(t)
		peak = max(peak, rss)
		if time.Since(start) < d/2 {
			firstPeak = peak
		} else if rss > firstPeak+growth {
			t.Fatalf("round %d: RSS %d MB, the first half's peak %d MB: memory grows", rounds, rss>>20, firstPeak>>20)
		}
		if rounds%10 == 0 {
			t.Logf("round %d: RSS %.1f MB", rounds, float64(rss)/(1<<20))
		}
		time.Sleep(time.Second)
	}
	t.Logf("%d rounds in %v: peak RSS %.1f MB (the test binary, both fake targets included), healthy target %d series at every gather", rounds, d, float64(peak)/(1<<20), goodSeries)
}
