// Package rolloutcheck evaluates the chart's rollout analyses the way Argo
// Rollouts and Flagger do, for the tests that prove them: Argo's
// successCondition and failureCondition with github.com/expr-lang/expr, the
// library Argo Rollouts evaluates them with (utils/evaluate), on the []float64
// its Prometheus provider makes of a vector result; Flagger's query templates
// with its own template functions (flaggerv1.MetricTemplateModel) and its
// thresholdRange check.
package rolloutcheck

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"text/template"

	"github.com/expr-lang/expr"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
)

// Argo Rollouts' measurement phases (v1alpha1.AnalysisPhase values).
const (
	Successful   = "Successful"
	Failed       = "Failed"
	Inconclusive = "Inconclusive"
	Error        = "Error"
)

// ArgoPhase is the phase Argo Rollouts gives a measurement whose Prometheus
// result is result (one value per sample of the vector; empty for no data),
// as utils/evaluate.EvaluateResult decides it: an evaluation error is Error,
// a true failureCondition Failed, neither condition true Inconclusive. A
// missing condition is the negation of the other.
func ArgoPhase(result []float64, successCondition, failureCondition string) (phase string, err error) {
	var ok, bad bool
	if successCondition != "" {
		if ok, err = evalCondition(result, successCondition); err != nil {
			return Error, err
		}
	}
	if failureCondition != "" {
		if bad, err = evalCondition(result, failureCondition); err != nil {
			return Error, err
		}
	}
	switch {
	case successCondition == "" && failureCondition == "":
		return Successful, nil
	case failureCondition == "":
		bad = !ok
	case successCondition == "":
		ok = !bad
	}
	switch {
	case bad:
		return Failed, nil
	case !ok:
		return Inconclusive, nil
	}
	return Successful, nil
}

// evalCondition is Argo's EvalCondition: the condition is compiled and run
// with the environment Argo gives it.
func evalCondition(result []float64, condition string) (bool, error) {
	env := map[string]any{
		"result":  result,
		"isNaN":   math.IsNaN,
		"isInf":   func(f float64) bool { return math.IsInf(f, 0) },
		"asFloat": func(f float64) float64 { return f },
	}
	program, err := expr.Compile(condition, expr.Env(env))
	if err != nil {
		return false, fmt.Errorf("compiling %q: %w", condition, err)
	}
	out, err := expr.Run(program, env)
	if err != nil {
		return false, fmt.Errorf("evaluating %q on %v: %w", condition, result, err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("%q gave a %T, not a bool", condition, out)
	}
	return b, nil
}

var argRE = regexp.MustCompile(`\{\{\s*args\.([A-Za-z0-9_-]+)\s*\}\}`)

// ArgoArgs fills Argo's {{args.NAME}} placeholders of s, as the controller
// does when it creates an AnalysisRun from a template. An argument without a
// value is an error.
func ArgoArgs(s string, args map[string]string) (string, error) {
	var missing []string
	out := argRE.ReplaceAllStringFunc(s, func(m string) string {
		name := argRE.FindStringSubmatch(m)[1]
		v, ok := args[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("arguments without a value: %v", missing)
	}
	return out, nil
}

// FlaggerQuery renders a MetricTemplate's query as Flagger's
// observers.RenderQuery does: Go templates with Flagger's functions (name,
// namespace, target, interval, variables, ...) and missingkey=error.
func FlaggerQuery(query string, model flaggerv1.MetricTemplateModel) (string, error) {
	t, err := template.New("tmpl").Option("missingkey=error").Funcs(model.TemplateFunctions()).Parse(query)
	if err != nil {
		return "", fmt.Errorf("template parsing failed: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, nil); err != nil {
		return "", fmt.Errorf("template execution failed: %w", err)
	}
	return b.String(), nil
}

// FlaggerCheck is Flagger's verdict on one metric check: a query with no
// value fails ("no values found"), as does a value outside thresholdRange.
// Flagger's Prometheus provider reads the last sample of a vector.
func FlaggerCheck(result []float64, r *flaggerv1.CanaryThresholdRange) (pass bool, why string) {
	if len(result) == 0 {
		return false, "no values found"
	}
	v := result[len(result)-1]
	if math.IsNaN(v) {
		return false, "no values found (NaN)"
	}
	if r == nil {
		return true, ""
	}
	if r.Min != nil && v < *r.Min {
		return false, fmt.Sprintf("%v < min %v", v, *r.Min)
	}
	if r.Max != nil && v > *r.Max {
		return false, fmt.Sprintf("%v > max %v", v, *r.Max)
	}
	return true, ""
}
