package daemon

import (
	"net/http"
	"sort"

	"github.com/vllm-prober/vllm_prober/internal/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// scrubber is the daemon's view of its redact.Redactor (the one owner of
// scrubbing, shared with the prober, the HTTP clients and the logger): every
// text the daemon renders goes through it.
type scrubber struct {
	red *redact.Redactor
}

func (s *scrubber) scrub(text string) string {
	if s == nil {
		return text
	}
	return s.red.String(text)
}

// configSecrets lists every credential of cfg in the forms that go on the
// wire (redact.ClientSecrets): its targets', target_defaults' (the client of
// discovered targets), http_sd_configs' and kubernetes_sd_configs'.
func configSecrets(cfg *config.Config) []string {
	if cfg == nil {
		return nil
	}
	var out []string
	for i := range cfg.Targets {
		out = append(out, redact.ClientSecrets(&cfg.Targets[i].HTTPClientConfig)...)
	}
	if td := cfg.Discovery.TargetDefaults; td != nil {
		out = append(out, redact.ClientSecrets(&td.HTTPClientConfig)...)
	}
	for i := range cfg.Discovery.HTTPSDConfigs {
		out = append(out, redact.ClientSecrets(&cfg.Discovery.HTTPSDConfigs[i].HTTPClientConfig)...)
	}
	if cfg.URLProbes != nil {
		out = append(out, redact.ClientSecrets(&cfg.URLProbes.HTTPClientConfig)...)
	}
	for i := range cfg.Discovery.KubernetesSDConfigs {
		out = append(out, redact.ClientSecrets(&cfg.Discovery.KubernetesSDConfigs[i].HTTPClientConfig)...)
	}
	return out
}

// headerLines renders h sorted, one "Name: value" line each, with sensitive
// headers redacted and secrets scrubbed. h is not modified.
func (s *scrubber) headerLines(h http.Header) []string {
	h = h.Clone()
	s.red.Header(h)
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lines []string
	for _, k := range keys {
		for _, v := range h[k] {
			lines = append(lines, k+": "+v)
		}
	}
	return lines
}
