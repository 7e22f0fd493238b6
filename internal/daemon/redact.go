package daemon

import (
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// configSecrets lists every credential of cfg in the forms that go on the
// wire (redact.ClientSecrets): its targets', target_defaults' (the client of
// discovered targets), http_sd_configs', kubernetes_sd_configs' and the gate's
// other vantages'.
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
	for i := range cfg.Global.Gate.Vantages {
		out = append(out, redact.ClientSecrets(&cfg.Global.Gate.Vantages[i].HTTPClientConfig)...)
	}
	return out
}
