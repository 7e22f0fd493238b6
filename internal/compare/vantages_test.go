package compare

import (
	"strings"
	"testing"
)

// TestJudgeVantages is the verdict table of docs/rollouts.md, "Vantages".
func TestJudgeVantages(t *testing.T) {
	for _, c := range []struct {
		name       string
		own        string
		others     []VantageVerdict
		want       string
		reasonHas  []string
		vantagesNo int
	}{
		{"one vantage", Pass, nil, Pass, []string{"own reason"}, 0},
		{"every vantage passes", Pass, []VantageVerdict{{"b", Pass, "b ok"}}, Pass, []string{"own reason"}, 2},
		{"one vantage fails, another passes: the path", Fail, []VantageVerdict{{"b", Pass, "b ok"}}, Pass,
			[]string{"fails from a only while it passes from b", "layer path", "from a: own reason"}, 2},
		{"this vantage passes, another fails: the other's path", Pass, []VantageVerdict{{"b", Fail, "b timeout"}}, Pass,
			[]string{"fails from b only", "from b: b timeout"}, 2},
		{"every vantage fails", Fail, []VantageVerdict{{"b", Fail, "b slow"}}, Fail, []string{"fails from every vantage (a, b)"}, 2},
		{"fails here, the other cannot judge", Fail, []VantageVerdict{{"b", Inconclusive, "unreachable"}}, Inconclusive,
			[]string{"fails from a, not judged from b"}, 2},
		{"passes elsewhere only", Inconclusive, []VantageVerdict{{"b", Pass, "b ok"}}, Pass, []string{"passes from b (b ok); not judged from a"}, 2},
		{"nobody judges", Inconclusive, []VantageVerdict{{"b", Inconclusive, "too few"}}, Inconclusive, []string{"not judged from any vantage"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Verdict{Result: c.own, Reason: "own reason"}
			JudgeVantages(&v, "a", c.others)
			if v.Result != c.want {
				t.Errorf("verdict %s (%s), want %s", v.Result, v.Reason, c.want)
			}
			for _, s := range c.reasonHas {
				if !strings.Contains(v.Reason, s) {
					t.Errorf("reason %q lacks %q", v.Reason, s)
				}
			}
			if len(v.Vantages) != c.vantagesNo {
				t.Errorf("%d vantages listed, want %d", len(v.Vantages), c.vantagesNo)
			}
		})
	}
}
