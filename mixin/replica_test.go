package mixin

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// TestSLIRulesAggregateReplicasAway checks every recording rule, and the
// burn-rate alerts built on them, on the generated files: each raw series they
// read is under an aggregation `without` every replica label (instance, pod),
// so no rule output carries the prober replica (the promtool proof of a move is
// alerts/tests/restart_test.yml; this covers every SLI and window).
func TestSLIRulesAggregateReplicasAway(t *testing.T) {
	replica := strings.Split(replicaLabels, ", ")
	check := func(where, expr string) {
		e, err := promQL.ParseExpr(expr)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		parser.Inspect(e, func(node parser.Node, path []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok || strings.HasPrefix(vs.Name, "target_module:") || strings.HasPrefix(vs.Name, "group_module") || strings.HasPrefix(vs.Name, "job:") {
				return nil
			}
			for _, p := range path {
				a, ok := p.(*parser.AggregateExpr)
				if !ok {
					continue
				}
				// without (instance, pod, ...), or by (...) naming neither
				if a.Without && !slices.ContainsFunc(replica, func(l string) bool { return !slices.Contains(a.Grouping, l) }) ||
					!a.Without && !slices.ContainsFunc(replica, func(l string) bool { return slices.Contains(a.Grouping, l) }) {
					return nil
				}
			}
			t.Errorf("%s: %s is not aggregated without (%s): %s", where, vs, replicaLabels, expr)
			return nil
		})
	}
	for _, g := range loadRuleFile(t, RulesFile).Groups {
		for _, r := range g.Rules {
			check(r.Record, r.Expr)
		}
	}
	burn := 0
	for _, g := range loadRuleFile(t, AlertsFile).Groups {
		for _, r := range g.Rules {
			if strings.HasSuffix(r.Alert, "BudgetBurn") || r.Alert == "VLLMWrongAnswers" {
				burn++
				check(r.Alert, r.Expr)
			}
		}
	}
	if burn < 7 {
		t.Errorf("only %d burn-rate alerts found", burn)
	}
}
