// Package sdconfig holds the configuration of target discovery: Prometheus-style
// file_sd_configs and http_sd_configs, the relabel_configs applied to what they
// discover, and the target_defaults every discovered target starts from.
//
// It is a leaf package so that the config package can embed it without an import
// cycle (package discovery, which runs the discovery, imports config). Config is
// generic over the target template type only for that reason: config embeds
// Config[config.Target], and discovery.Config is an alias of that instantiation.
package sdconfig

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/relabel"
)

// Defaults, as in Prometheus.
var (
	DefaultFileSDConfig = FileSDConfig{
		RefreshInterval: model.Duration(5 * time.Minute),
	}
	DefaultHTTPSDConfig = HTTPSDConfig{
		RefreshInterval:  model.Duration(time.Minute),
		HTTPClientConfig: commoncfg.DefaultHTTPClientConfig,
	}
)

// filePatternRE is Prometheus' rule for file_sd file names: a wildcard only in
// the last path element, and a .json, .yml or .yaml extension.
var filePatternRE = regexp.MustCompile(`^[^*]*(\*[^/]*)?\.(json|yml|yaml|JSON|YML|YAML)$`)

// Config is the discovery part of the configuration file. It is meant to be
// inlined into the top-level configuration:
//
//	Discovery sdconfig.Config[Target] `yaml:",inline"`
//
// T is the target type used as the template of discovered targets.
type Config[T any] struct {
	FileSDConfigs  []FileSDConfig    `yaml:"file_sd_configs,omitempty"`
	HTTPSDConfigs  []HTTPSDConfig    `yaml:"http_sd_configs,omitempty"`
	RelabelConfigs []*relabel.Config `yaml:"relabel_configs,omitempty"`
	// TargetDefaults is the template of every discovered target (modules,
	// labels, max_num_seqs, baseline, http_client_config, ...). Name, URL and
	// model come from the discovered labels. Nil means the target type's defaults.
	TargetDefaults *T `yaml:"target_defaults,omitempty"`
}

// FileSDConfig reads target groups from JSON or YAML files, as Prometheus'
// file_sd_configs does. Files are watched; RefreshInterval is the fallback
// re-read period for changes a watch can miss (network file systems).
type FileSDConfig struct {
	Files           []string       `yaml:"files"`
	RefreshInterval model.Duration `yaml:"refresh_interval,omitempty"`
}

// HTTPSDConfig fetches target groups from an HTTP endpoint, as Prometheus'
// http_sd_configs does. The HTTP client settings (authorization, basic_auth,
// tls_config, proxy_url, ...) sit inline, as in Prometheus.
type HTTPSDConfig struct {
	URL              string                     `yaml:"url"`
	RefreshInterval  model.Duration             `yaml:"refresh_interval,omitempty"`
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:",inline"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *FileSDConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = DefaultFileSDConfig
	type plain FileSDConfig
	return unmarshal((*plain)(c))
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *HTTPSDConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = DefaultHTTPSDConfig
	type plain HTTPSDConfig
	return unmarshal((*plain)(c))
}

// Enabled reports whether any discovery mechanism is configured.
func (c *Config[T]) Enabled() bool {
	return len(c.FileSDConfigs) > 0 || len(c.HTTPSDConfigs) > 0
}

// SetDirectory resolves relative file_sd file patterns and HTTP client files
// (CA, certificates, credentials) against dir, the configuration file's
// directory. The template's own files are the target type's business.
func (c *Config[T]) SetDirectory(dir string) {
	if dir == "" {
		return
	}
	for i := range c.FileSDConfigs {
		for j, f := range c.FileSDConfigs[i].Files {
			if !filepath.IsAbs(f) {
				c.FileSDConfigs[i].Files[j] = filepath.Join(dir, f)
			}
		}
	}
	for i := range c.HTTPSDConfigs {
		c.HTTPSDConfigs[i].HTTPClientConfig.SetDirectory(dir)
	}
}

// Validate checks the discovery mechanisms and relabel rules. It does not
// validate TargetDefaults, whose checks (known modules and baseline, label
// names, client config) belong to the target type.
func (c *Config[T]) Validate() error {
	for i := range c.FileSDConfigs {
		if err := c.FileSDConfigs[i].validate(); err != nil {
			return fmt.Errorf("file_sd_configs[%d]: %w", i, err)
		}
	}
	for i := range c.HTTPSDConfigs {
		if err := c.HTTPSDConfigs[i].validate(); err != nil {
			return fmt.Errorf("http_sd_configs[%d]: %w", i, err)
		}
	}
	for i, rc := range c.RelabelConfigs {
		if rc == nil {
			return fmt.Errorf("relabel_configs[%d]: empty rule", i)
		}
		if err := rc.Validate(model.LegacyValidation); err != nil {
			return fmt.Errorf("relabel_configs[%d]: %w", i, err)
		}
	}
	if !c.Enabled() && (len(c.RelabelConfigs) > 0 || c.TargetDefaults != nil) {
		return errors.New("relabel_configs and target_defaults need file_sd_configs or http_sd_configs")
	}
	return nil
}

func (c *FileSDConfig) validate() error {
	if len(c.Files) == 0 {
		return errors.New("files must not be empty")
	}
	for _, f := range c.Files {
		if !filePatternRE.MatchString(f) {
			return fmt.Errorf("path %q is not valid for file discovery: a wildcard only in the last path element and a .json, .yml or .yaml extension", f)
		}
		if _, err := filepath.Match(filepath.Base(f), ""); err != nil {
			return fmt.Errorf("path %q: %w", f, err)
		}
	}
	if c.RefreshInterval <= 0 {
		return errors.New("refresh_interval must be greater than 0")
	}
	return nil
}

func (c *HTTPSDConfig) validate() error {
	if c.URL == "" {
		return errors.New("url is required")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL text may carry credentials
		}
		return fmt.Errorf("url is not valid: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("url has no host")
	}
	if u.User != nil {
		return errors.New("url must not carry credentials: use basic_auth or authorization")
	}
	if c.RefreshInterval <= 0 {
		return errors.New("refresh_interval must be greater than 0")
	}
	if err := c.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("http client config: %w", err)
	}
	return nil
}
