package rolloutcheck

import (
	"math"
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
)

// TestArgoPhase follows Argo Rollouts' utils/evaluate.EvaluateResult: a true
// failure condition fails, neither condition true is Inconclusive, a missing
// condition is the negation of the other, an evaluation error is Error.
func TestArgoPhase(t *testing.T) {
	const ok, bad = "len(result) > 0 && result[0] <= 1.2", "len(result) > 0 && result[0] > 1.2"
	for _, c := range []struct {
		result        []float64
		success, fail string
		want          string
	}{
		{[]float64{1}, ok, bad, Successful},
		{[]float64{3}, ok, bad, Failed},
		{[]float64{}, ok, bad, Inconclusive},
		{[]float64{math.NaN()}, ok, bad, Inconclusive},
		{[]float64{3}, ok, "", Failed},
		{[]float64{}, ok, "", Failed},
		{[]float64{1}, "", bad, Successful},
		{[]float64{}, "result[0] <= 1.2", "", Error},
		{[]float64{1}, "result[0]", "", Error}, // not a bool
		{[]float64{1}, "", "", Successful},
	} {
		if got, err := ArgoPhase(c.result, c.success, c.fail); got != c.want {
			t.Errorf("ArgoPhase(%v, %q, %q) = %s (%v), want %s", c.result, c.success, c.fail, got, err, c.want)
		}
	}
}

func TestArgoArgs(t *testing.T) {
	got, err := ArgoArgs(`x{g="{{args.group}}"}[{{ args.window }}]`, map[string]string{"group": "a", "window": "5m"})
	if err != nil || got != `x{g="a"}[5m]` {
		t.Errorf("ArgoArgs = %q, %v", got, err)
	}
	if _, err := ArgoArgs("{{args.missing}}", nil); err == nil {
		t.Error("an argument without a value is not an error")
	}
}

func TestFlagger(t *testing.T) {
	q, err := FlaggerQuery(`r{group="{{ variables.group }}", ns="{{ namespace }}"}`,
		flaggerv1.MetricTemplateModel{Namespace: "n", Variables: map[string]string{"group": "g"}})
	if err != nil || q != `r{group="g", ns="n"}` {
		t.Errorf("FlaggerQuery = %q, %v", q, err)
	}
	if _, err := FlaggerQuery(`{{ variables.nope }}`, flaggerv1.MetricTemplateModel{Variables: map[string]string{}}); err == nil {
		t.Error("a missing variable is not an error (Flagger renders with missingkey=error)")
	}
	lo, hi := 0.9, 1.2
	r := &flaggerv1.CanaryThresholdRange{Min: &lo, Max: &hi}
	for _, c := range []struct {
		result []float64
		pass   bool
	}{{[]float64{1}, true}, {[]float64{1.3}, false}, {[]float64{0.5}, false}, {nil, false}, {[]float64{math.NaN()}, false}} {
		if pass, why := FlaggerCheck(c.result, r); pass != c.pass {
			t.Errorf("FlaggerCheck(%v) = %v (%s), want %v", c.result, pass, why, c.pass)
		}
	}
}
