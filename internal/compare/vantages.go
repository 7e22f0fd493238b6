package compare

import (
	"fmt"
	"strings"
)

// VantageVerdict is one vantage's verdict on a target: its result (Pass,
// Fail or Inconclusive) and reason. A vantage that could not be asked is
// Inconclusive, its reason saying why.
type VantageVerdict struct {
	Vantage string `json:"vantage"`
	Result  string `json:"verdict"`
	Reason  string `json:"reason"`
}

// JudgeVantages makes v, the verdict of vantage own, one verdict over every
// vantage's (docs/rollouts.md, "Vantages"): a target fails where every vantage
// that judged it sees it fail; a failure seen from some vantages while others
// see the target pass is their path's (layer path: their network, DNS, proxy
// or prober replica), not the target's, and passes with a reason naming them;
// a failure where the other vantages could not judge is inconclusive. v keeps
// its rows (its own vantage's); v.Vantages lists every vantage's verdict.
func JudgeVantages(v *Verdict, own string, others []VantageVerdict) {
	if len(others) == 0 {
		return
	}
	all := append([]VantageVerdict{{Vantage: own, Result: v.Result, Reason: v.Reason}}, others...)
	v.Vantages = all
	var passed, failed, unjudged []string
	for _, o := range all {
		switch o.Result {
		case Pass:
			passed = append(passed, o.Vantage)
		case Fail:
			failed = append(failed, o.Vantage)
		default:
			unjudged = append(unjudged, o.Vantage)
		}
	}
	reasonOf := func(name string) string {
		for _, o := range all {
			if o.Vantage == name {
				return o.Reason
			}
		}
		return ""
	}
	list := func(names []string) string { return strings.Join(names, ", ") }
	switch {
	case len(failed) == 0 && len(passed) > 0:
		v.Result = Pass
		if all[0].Result != Pass || len(unjudged) > 0 {
			v.Reason = fmt.Sprintf("passes from %s (%s)", list(passed), reasonOf(passed[0]))
			if len(unjudged) > 0 {
				v.Reason += fmt.Sprintf("; not judged from %s", list(unjudged))
			}
		}
	case len(failed) > 0 && len(passed) > 0:
		v.Result = Pass
		v.Reason = fmt.Sprintf("fails from %s only while it passes from %s: the path from %s (its network, DNS, proxy or prober replica) is at fault, not the target (layer path); from %s: %s",
			list(failed), list(passed), list(failed), failed[0], reasonOf(failed[0]))
	case len(failed) > 0 && len(unjudged) == 0:
		v.Result = Fail
		v.Reason = fmt.Sprintf("fails from every vantage (%s); from %s: %s", list(failed), failed[0], reasonOf(failed[0]))
	case len(failed) > 0:
		v.Result = Inconclusive
		v.Reason = fmt.Sprintf("fails from %s, not judged from %s: a fault of the target or of %s's path cannot be told apart; from %s: %s",
			list(failed), list(unjudged), list(failed), failed[0], reasonOf(failed[0]))
	default:
		v.Result = Inconclusive
		v.Reason = fmt.Sprintf("not judged from any vantage (%s); from %s: %s", list(unjudged), own, all[0].Reason)
	}
}
