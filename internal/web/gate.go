package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/internal/config"
)

// maxWebhookBody bounds the JSON body /gate and /burst read (a Flagger
// webhook's payload).
const maxWebhookBody = 64 << 10

// flaggerPayload is the body Flagger POSTs to its webhooks
// (fluxcd/flagger docs/gitbook/usage/webhooks.md): the canary's name,
// namespace and phase, and the webhook's metadata.
type flaggerPayload struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Phase     string            `json:"phase"`
	Metadata  map[string]string `json:"metadata"`
}

// webhookParams returns r's query parameters, completed by the metadata of a
// Flagger webhook payload in a POST body: a query parameter wins over the
// metadata key of the same name.
func webhookParams(r *http.Request) (url.Values, error) {
	q := r.URL.Query()
	if r.Method != http.MethodPost || r.Body == nil {
		return q, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	if len(body) > maxWebhookBody {
		return nil, fmt.Errorf("request body over %d bytes", maxWebhookBody)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return q, nil
	}
	var p flaggerPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("request body is not a Flagger webhook payload (JSON with a metadata object): %w", err)
	}
	for k, v := range p.Metadata {
		if !q.Has(k) {
			q.Set(k, v)
		}
	}
	return q, nil
}

// webhookPair reads the parameters of a /gate or /burst request
// (webhookParams) and the target and module they name (resolvePair).
func webhookPair(cfg *config.Config, r *http.Request) (url.Values, *config.Target, string, error) {
	q, err := webhookParams(r)
	if err != nil {
		return nil, nil, "", err
	}
	t, module, err := resolvePair(cfg, q)
	return q, t, module, err
}

// resolvePair finds the target and module a /gate or /burst request names:
// module may be left out when the target has one.
func resolvePair(cfg *config.Config, q url.Values) (*config.Target, string, error) {
	name := q.Get("target")
	if name == "" {
		return nil, "", fmt.Errorf("target parameter is missing; targets: %s", strings.Join(targetNames(cfg), ", "))
	}
	t, ok := cfg.Target(name)
	if !ok {
		return nil, "", fmt.Errorf("unknown target %q; targets: %s", name, strings.Join(targetNames(cfg), ", "))
	}
	if t.Models != "" {
		return nil, "", fmt.Errorf("target %q probes several models (models: %s): /gate and /burst judge targets of one model only", t.Name, t.Models)
	}
	module := q.Get("module")
	switch {
	case module == "" && len(t.Modules) == 1:
		module = t.Modules[0]
	case module == "":
		return nil, "", fmt.Errorf("module parameter is missing; modules of target %q: %s", t.Name, strings.Join(t.Modules, ", "))
	case !slices.Contains(t.Modules, module):
		return nil, "", fmt.Errorf("module %q is not configured for target %q; modules: %s", module, t.Name, strings.Join(t.Modules, ", "))
	}
	return t, module, nil
}

// gateThresholds reads latency_ratio, success_ratio and min_successes,
// each defaulting to compare.DefaultThresholds.
func gateThresholds(q url.Values) (compare.Thresholds, error) {
	th := compare.DefaultThresholds
	for _, f := range []struct {
		key string
		set func(string) error
	}{
		{"latency_ratio", func(s string) (err error) { th.LatencyRatio, err = strconv.ParseFloat(s, 64); return }},
		{"success_ratio", func(s string) (err error) { th.SuccessRatio, err = strconv.ParseFloat(s, 64); return }},
		{"min_successes", func(s string) (err error) { th.MinSuccesses, err = strconv.Atoi(s); return }},
	} {
		if v := q.Get(f.key); v != "" {
			if err := f.set(v); err != nil {
				return th, fmt.Errorf("%s %q is not a number", f.key, v)
			}
		}
	}
	return th, th.Validate()
}

// gateHandler is GET (or, for Flagger's webhooks, POST)
// /gate?target=T[&module=M][&reference=R][&window=D]: the verdict of T's
// probes of the last window (global.gate.window by default) against its
// baseline, or against reference target R's probes of the same window. 200
// when T passes, 503 when it fails or cannot be judged (too few successful
// probes, no baseline value), with the verdict as JSON (always_200=true: 200
// whatever the verdict, for Argo Rollouts' web provider). It runs no probe:
// it reads what the scheduled (and burst) probes recorded, so it spends no
// tokens.
func (h *handler) gateHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST")
		textResponse(w, http.StatusMethodNotAllowed, "This endpoint answers GET (and POST, for webhooks).")
		return
	}
	cfg := h.opts.Running()
	q, t, module, err := webhookPair(cfg, r)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	th, err := gateThresholds(q)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	window := time.Duration(cfg.Global.Gate.Window)
	if v := q.Get("window"); v != "" {
		var err error
		if window, err = parseDuration(v); err != nil || window <= 0 {
			textResponse(w, http.StatusBadRequest, "window %q is not a positive duration (e.g. 5m)", v)
			return
		}
	}
	v, err := h.gateVerdict(cfg, t, module, q.Get("reference"), window, th)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	b, err := v.MarshalJSON()
	if err != nil {
		textResponse(w, http.StatusInternalServerError, "encoding the verdict: %s", err)
		return
	}
	code := http.StatusOK
	// always_200=true: the verdict is in the body only, for clients that
	// treat any other status as an error of their own (Argo Rollouts' web
	// provider: an Error, where a failed or inconclusive verdict is meant).
	if always, _ := strconv.ParseBool(q.Get("always_200")); v.Result != compare.Pass && !always {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// parseDuration reads a duration as Prometheus writes them (1m30s, 5m, 1h)
// or as Go does (1.5s, 500ms).
func parseDuration(s string) (time.Duration, error) {
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return time.ParseDuration(s)
}

// errNoComparison: a gate needs a baseline or a reference.
var errNoComparison = errors.New("has no baseline: name a reference target (reference=NAME) to compare with")

// gateVerdict judges t's probes of module in the last window.
func (h *handler) gateVerdict(cfg *config.Config, t *config.Target, module, reference string, window time.Duration, th compare.Thresholds) (compare.Verdict, error) {
	since := time.Now().Add(-window)
	sample := func(target string) compare.Sample {
		st, _ := h.probes.Stats(target, module)
		probes, successes := st.ProbesSince(since)
		return compare.Sample{Probes: probes, Successes: successes, Means: st.Means(since)}
	}
	s := sample(t.Name)
	var v compare.Verdict
	if reference != "" {
		ref, ok := cfg.Target(reference)
		if !ok {
			return v, fmt.Errorf("unknown reference target %q; targets: %s", reference, strings.Join(targetNames(cfg), ", "))
		}
		if !slices.Contains(ref.Modules, module) {
			return v, fmt.Errorf("module %q is not configured for reference target %q", module, ref.Name)
		}
		rs := sample(ref.Name)
		v = compare.Judge(s, rs.Means, &rs, nil, th, "reference "+ref.Name)
	} else {
		cmp, has, ok := h.cmp.CompareWindow(t.Name, module, window)
		switch {
		case !has:
			return v, fmt.Errorf("target %q %w", t.Name, errNoComparison)
		case ok:
			s.Means = cmp.Live
		}
		v = compare.Judge(s, cmp.Expected, nil, cmp.Ratios, th, "baseline "+cmp.Baseline)
		if !ok && v.Result == compare.Pass {
			v.Result, v.Reason = compare.Inconclusive, "no probe of the window has an expectation in baseline "+cmp.Baseline
		}
	}
	v.Target, v.Module, v.Window = t.Name, module, window
	return v, nil
}
