package bench

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestSearchGoodputBisects: the search doubles while the target is met, then
// bisects to within 10 % of the highest concurrency meeting it, trying no
// level twice; it reports 0 when concurrency 1 misses and stops at the cap.
func TestSearchGoodputBisects(t *testing.T) {
	for _, c := range []struct {
		limit, maxC, want int
		capped            bool
		tried             []int
	}{
		{limit: 37, maxC: 256, want: 35, tried: []int{1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37}},
		{limit: 3, maxC: 256, want: 3, tried: []int{1, 2, 4, 3}},
		{limit: 0, maxC: 256, want: 0, tried: []int{1}},
		{limit: 1000, maxC: 20, want: 20, capped: true, tried: []int{1, 2, 4, 8, 16, 20}},
	} {
		var tried []int
		res, err := searchGoodput(context.Background(), 0.99, c.maxC, func(n int) (float64, error) {
			tried = append(tried, n)
			if n <= c.limit {
				return 1, nil
			}
			return 0.5, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		lo := c.want - c.want/10
		if res.Highest < lo || res.Highest > c.limit || res.Capped != c.capped {
			t.Errorf("limit %d: highest %d capped %v, want within 10%% below %d (capped %v); tried %v", c.limit, res.Highest, res.Capped, c.limit, c.capped, tried)
		}
		sorted := slices.Clone(tried)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(tried) {
			t.Errorf("limit %d: a level was tried twice: %v", c.limit, tried)
		}
	}
}

// TestBenchGoodputOnSimulator: vllm_sim's ITL grows with the requests running
// (5 ms × concurrency), so with a TPOT objective of 12.5 ms (vLLM's syntax
// tpot:12.5) concurrency 2 meets it and 3 does not. The search finds 2;
// every level reports its request goodput as vLLM's bench prints and saves it.
func TestBenchGoodputOnSimulator(t *testing.T) {
	_, url := startSim(t, func(c *simulator.Config) {
		c.TTFT, c.ITL, c.BatchSlowdown = 20*time.Millisecond, 5*time.Millisecond, 1
	})
	obj, err := config.ParseGoodput("tpot:12.5")
	if err != nil {
		t.Fatal(err)
	}
	var summary bytes.Buffer
	rep, err := Run(context.Background(), Options{URL: url, Requests: 6, MaxTokens: 12, IgnoreEOS: true,
		PollInterval: 50 * time.Millisecond, Goodput: &obj, GoodputTarget: 0.9, Summary: &summary})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GoodputSearch == nil || rep.GoodputSearch.Highest != 2 || rep.GoodputSearch.Capped {
		t.Fatalf("goodput search %+v, want highest 2", rep.GoodputSearch)
	}
	var levels []int
	for _, lr := range rep.Levels {
		levels = append(levels, int(lr.Level.Value))
		c := int(lr.Level.Value)
		g := lr.Goodput
		if g == nil {
			t.Fatalf("concurrency %d: no goodput", c)
		}
		if want := float64(g.Good) / lr.Metrics.Duration.Seconds(); g.RequestGoodput != want {
			t.Errorf("concurrency %d: request goodput %v, want good/duration %v", c, g.RequestGoodput, want)
		}
		if p := Point(rep, lr); p.RequestGoodput == nil || *p.RequestGoodput != g.RequestGoodput {
			t.Errorf("concurrency %d: the baseline point's request_goodput is %v, want %v", c, p.RequestGoodput, g.RequestGoodput)
		}
		// The per-level JSON keeps them next to vLLM's keys, and importing it
		// gives them back.
		im, err := baseline.ImportBytes("level.json", ServeJSON(rep, lr))
		if err != nil {
			t.Fatalf("concurrency %d: importing its JSON: %v", c, err)
		}
		if p := im.Baselines[0].Points[0]; p.SLOAttainment == nil || *p.SLOAttainment != g.Attainment || !p.GoodputObjectives.Equal(obj) {
			t.Errorf("concurrency %d: the imported JSON's slo_attainment %v, objectives %+v; want %v against %+v", c, p.SLOAttainment, p.GoodputObjectives, g.Attainment, obj)
		}
		// The baseline point keeps the attainment and what it was measured against.
		if p := Point(rep, lr); p.SLOAttainment == nil || *p.SLOAttainment != g.Attainment || !p.GoodputObjectives.Equal(obj) {
			t.Errorf("concurrency %d: the baseline point's slo_attainment %v, objectives %+v; want %v against %+v", c, p.SLOAttainment, p.GoodputObjectives, g.Attainment, obj)
		}
		if c <= 2 && g.Attainment != 1 || c >= 3 && g.Attainment >= 0.9 {
			t.Errorf("concurrency %d: attainment %v (TPOT mean %.1f ms)", c, g.Attainment, lr.Metrics.TPOT.Mean*1000)
		}
	}
	if !slices.Equal(levels, []int{1, 2, 4, 3}) {
		t.Errorf("levels run %v, want 1 2 4 3", levels)
	}
	if n := strings.Count(summary.String(), "Request goodput (req/s):"); n != len(rep.Levels) {
		t.Errorf("%d summaries print the request goodput, want %d", n, len(rep.Levels))
	}
}
