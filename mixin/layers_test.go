package mixin

import (
	"regexp"
	"slices"
	"testing"
)

// TestEveryAlertHasALayer: every alert names the layer at fault (docs/runbook.md,
// "Where did it break"), as a static label or, for the burn-rate alerts, set by
// its expression to endpoint, pool or gateway.
func TestEveryAlertHasALayer(t *testing.T) {
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	set := regexp.MustCompile(`"layer", "([a-z]+)", "", ""`)
	n := 0
	for _, g := range spec.AlertGroups() {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			var layers []string
			for _, l := range r.Labels {
				if l.Name == LayerLabel {
					layers = append(layers, l.Value)
				}
			}
			for _, m := range set.FindAllStringSubmatch(r.Expr, -1) {
				layers = append(layers, m[1])
			}
			if len(layers) == 0 {
				t.Errorf("%s carries no layer label", r.Alert)
			}
			for _, l := range layers {
				if !slices.Contains(Layers(), l) {
					t.Errorf("%s: layer %q is none of %v", r.Alert, l, Layers())
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts")
	}
}
