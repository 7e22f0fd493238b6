package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/common/model"
	promdiscovery "github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/dns"
	"github.com/prometheus/prometheus/discovery/file"
	"github.com/prometheus/prometheus/discovery/http"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/vllm-prober/vllm_prober/internal/decodeerr"
)

// SDConfigs are the service discovery sections of the configuration file. Each
// holds Prometheus' own configuration type of that mechanism, so every key
// (api_server, kubeconfig_file, namespaces, selectors, attach_metadata, the
// HTTP client settings, ...) is spelled, defaulted and validated as in a
// Prometheus scrape_config.
type SDConfigs struct {
	FileSDConfigs       []*file.SDConfig       `yaml:"file_sd_configs,omitempty"`
	HTTPSDConfigs       []*http.SDConfig       `yaml:"http_sd_configs,omitempty"`
	KubernetesSDConfigs []*kubernetes.SDConfig `yaml:"kubernetes_sd_configs,omitempty"`
	DNSSDConfigs        []*dns.SDConfig        `yaml:"dns_sd_configs,omitempty"`
	// RelabelConfigs turn each discovered target's labels (__address__ and
	// the mechanism's __meta_* labels) into a vllm_prober target.
	RelabelConfigs []*relabel.Config `yaml:"relabel_configs,omitempty"`
}

// Discovery is the target discovery part of the configuration file, inlined
// into Config. Package discovery runs it.
type Discovery struct {
	SDConfigs `yaml:",inline"`
	// TargetDefaults is the template of every discovered target (modules,
	// labels, max_num_seqs, baseline, http_client_config, ...). Name, URL and
	// model come from the discovered labels. When discovery is enabled,
	// validation leaves it set, with Modules resolved.
	TargetDefaults *Target `yaml:"target_defaults,omitempty"`
}

// NamedSDConfig is one configured discovery mechanism and its place in the
// file, such as "kubernetes_sd_configs[0]".
type NamedSDConfig struct {
	Name   string
	Config promdiscovery.Config
}

// Enabled reports whether any discovery mechanism is configured.
func (d *Discovery) Enabled() bool { return len(d.Configs()) > 0 }

// Configs lists the configured mechanisms in file order: file, http,
// kubernetes, dns.
func (d *Discovery) Configs() []NamedSDConfig {
	var out []NamedSDConfig
	for i, c := range d.FileSDConfigs {
		out = append(out, NamedSDConfig{fmt.Sprintf("file_sd_configs[%d]", i), c})
	}
	for i, c := range d.HTTPSDConfigs {
		out = append(out, NamedSDConfig{fmt.Sprintf("http_sd_configs[%d]", i), c})
	}
	for i, c := range d.KubernetesSDConfigs {
		out = append(out, NamedSDConfig{fmt.Sprintf("kubernetes_sd_configs[%d]", i), c})
	}
	for i, c := range d.DNSSDConfigs {
		out = append(out, NamedSDConfig{fmt.Sprintf("dns_sd_configs[%d]", i), c})
	}
	return out
}

// SetDirectory resolves relative paths (file_sd files, kubeconfig_file, HTTP
// client files) against dir, the configuration file's directory, as
// Prometheus does. The template's own files are Target's business.
func (d *Discovery) SetDirectory(dir string) {
	if dir == "" {
		return
	}
	for _, c := range d.Configs() {
		if s, ok := c.Config.(interface{ SetDirectory(string) }); ok {
			s.SetDirectory(dir)
		}
	}
}

// Validate checks what Prometheus' own types leave to their user: no nil
// entries, positive refresh intervals, no credentials in an http_sd URL (it
// becomes the __meta_url label), and relabel rules.
func (d *Discovery) Validate() error {
	for _, c := range d.Configs() {
		if err := validateSD(c.Config); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	for i, rc := range d.RelabelConfigs {
		if rc == nil {
			return fmt.Errorf("relabel_configs[%d]: empty rule", i)
		}
		if err := rc.Validate(model.LegacyValidation); err != nil {
			return fmt.Errorf("relabel_configs[%d]: %w", i, err)
		}
	}
	if !d.Enabled() && (len(d.RelabelConfigs) > 0 || d.TargetDefaults != nil) {
		return errors.New("relabel_configs and target_defaults need a discovery mechanism (file_sd_configs, http_sd_configs, kubernetes_sd_configs or dns_sd_configs)")
	}
	return nil
}

func validateSD(c promdiscovery.Config) error {
	positive := func(d model.Duration) error {
		if time.Duration(d) <= 0 {
			return errors.New("refresh_interval must be greater than 0")
		}
		return nil
	}
	switch c := c.(type) {
	case *file.SDConfig:
		return positive(c.RefreshInterval)
	case *http.SDConfig:
		if u, err := url.Parse(c.URL); err == nil && u.User != nil {
			return errors.New("url must not carry credentials: use basic_auth or authorization")
		}
		return positive(c.RefreshInterval)
	case *dns.SDConfig:
		return positive(c.RefreshInterval)
	}
	return nil
}

// sdSections is how UnmarshalYAML receives the discovery sections: each entry
// is decoded on its own so that an error names it ("kubernetes_sd_configs[1]:
// role missing ...").
type sdSections struct {
	FileSDConfigs       []*deferred       `yaml:"file_sd_configs,omitempty"`
	HTTPSDConfigs       []*deferred       `yaml:"http_sd_configs,omitempty"`
	KubernetesSDConfigs []*deferred       `yaml:"kubernetes_sd_configs,omitempty"`
	DNSSDConfigs        []*deferred       `yaml:"dns_sd_configs,omitempty"`
	RelabelConfigs      []*relabel.Config `yaml:"relabel_configs,omitempty"`
	TargetDefaults      *deferred         `yaml:"target_defaults,omitempty"`
}

// decode fills d from the raw sections.
func (s *sdSections) decode(d *Discovery) error {
	*d = Discovery{}
	d.RelabelConfigs = s.RelabelConfigs
	if err := decodeAll("file_sd_configs", s.FileSDConfigs, &d.FileSDConfigs); err != nil {
		return err
	}
	if err := decodeAll("http_sd_configs", s.HTTPSDConfigs, &d.HTTPSDConfigs); err != nil {
		return err
	}
	if err := decodeAll("kubernetes_sd_configs", s.KubernetesSDConfigs, &d.KubernetesSDConfigs); err != nil {
		return err
	}
	if err := decodeAll("dns_sd_configs", s.DNSSDConfigs, &d.DNSSDConfigs); err != nil {
		return err
	}
	if s.TargetDefaults != nil {
		t := DefaultTarget
		if err := s.TargetDefaults.decode(&t); err != nil {
			return fmt.Errorf("target_defaults: %w", decodeerr.YAML(err, "in target_defaults"))
		}
		d.TargetDefaults = &t
	}
	return nil
}

// decodeAll decodes each raw entry of section into a new *T.
func decodeAll[T any](section string, raw []*deferred, out *[]*T) error {
	for i, r := range raw {
		where := fmt.Sprintf("%s[%d]", section, i)
		if r == nil || r.unmarshal == nil {
			return fmt.Errorf("%s: empty entry", where)
		}
		v := new(T)
		if err := r.decode(v); err != nil {
			return fmt.Errorf("%s: %w", where, decodeerr.YAML(err, "in "+where))
		}
		*out = append(*out, v)
	}
	return nil
}
