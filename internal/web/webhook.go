package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/config"
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

// parseDuration reads a duration as Prometheus writes them (1m30s, 5m, 1h)
// or as Go does (1.5s, 500ms).
func parseDuration(s string) (time.Duration, error) {
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return time.ParseDuration(s)
}
