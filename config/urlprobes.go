package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"

	commoncfg "github.com/prometheus/common/config"
)

// URLProbes is the url_probes section: /probe?target=<URL>&module=M probes a
// URL that is not a configured target, as a Prometheus Operator Probe (or a
// VictoriaMetrics VMProbe) asks a prober to. Off unless allowed_urls is set.
type URLProbes struct {
	// AllowedURLs are RE2 regular expressions, anchored at both ends: a URL
	// probe runs only for a target URL one of them matches.
	AllowedURLs []string `yaml:"allowed_urls"`
	// Modules URL probes may use; empty means every module.
	Modules []string `yaml:"modules,omitempty"`
	// HTTPClientConfig is the only client URL probes use: never a
	// configured target's credentials.
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:"http_client_config,omitempty"`
	// TokenBudgetPerHour caps prompt plus output tokens of all URL probes
	// together in any rolling hour, apart from every target's budget.
	TokenBudgetPerHour int `yaml:"token_budget_per_hour,omitempty"`

	allowed []*regexp.Regexp
}

// DefaultURLProbes are the defaults of a url_probes section.
var DefaultURLProbes = URLProbes{
	HTTPClientConfig:   commoncfg.DefaultHTTPClientConfig,
	TokenBudgetPerHour: 10000,
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (u *URLProbes) UnmarshalYAML(unmarshal func(any) error) error {
	*u = DefaultURLProbes
	type plain URLProbes
	return unmarshal((*plain)(u))
}

// Allowed reports whether URL probes may probe target, a URL.
func (u *URLProbes) Allowed(target string) bool {
	for _, re := range u.allowed {
		if re.MatchString(target) {
			return true
		}
	}
	return false
}

// AllowedHop reports whether a URL probe may follow a redirect to hop: the
// same anchored match as Allowed, of hop without its query, or of one of
// its parent paths (the probe sends to <target>/v1/..., so a hop under an
// allowed URL is allowed, and only such a hop). A hop that carries
// credentials is refused, as such a target is.
func (u *URLProbes) AllowedHop(hop *url.URL) bool {
	if hop.User != nil {
		return false
	}
	base, path := hop.Scheme+"://"+hop.Host, hop.EscapedPath()
	if u.Allowed(base) {
		return true
	}
	for i := 1; i < len(path); i++ {
		if path[i] == '/' && (u.Allowed(base+path[:i]) || u.Allowed(base+path[:i+1])) {
			return true
		}
	}
	return path != "" && u.Allowed(base+path)
}

// ModuleAllowed reports whether URL probes may use module.
func (u *URLProbes) ModuleAllowed(module string) bool {
	return len(u.Modules) == 0 || slices.Contains(u.Modules, module)
}

// validate compiles the allow-list and checks the section against c's modules.
func (u *URLProbes) validate(c *Config, dir string) error {
	if len(u.AllowedURLs) == 0 {
		return errors.New("allowed_urls must not be empty: list the URLs (anchored RE2 regexes) /probe may probe")
	}
	u.allowed = nil
	for i, s := range u.AllowedURLs {
		re, err := regexp.Compile("^(?:" + s + ")$")
		if err != nil {
			return fmt.Errorf("allowed_urls[%d]: %w", i, err)
		}
		u.allowed = append(u.allowed, re)
	}
	for _, m := range u.Modules {
		if _, ok := c.Modules[m]; !ok {
			return fmt.Errorf("unknown module %q", m)
		}
	}
	if u.TokenBudgetPerHour <= 0 {
		return fmt.Errorf("token_budget_per_hour must be positive, got %d", u.TokenBudgetPerHour)
	}
	for name, m := range c.Modules {
		if u.ModuleAllowed(name) && m.MaxTokens > u.TokenBudgetPerHour {
			return fmt.Errorf("token_budget_per_hour %d is smaller than max_tokens %d of module %q: every probe would be refused", u.TokenBudgetPerHour, m.MaxTokens, name)
		}
	}
	if dir != "" {
		u.HTTPClientConfig.SetDirectory(dir)
	}
	if err := u.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("http_client_config: %w", err)
	}
	return nil
}

// ParseProbeURL checks a URL probe's target: an absolute http or https URL of
// a vLLM server, without credentials, query or fragment.
func ParseProbeURL(target string) (*url.URL, error) {
	u, err := url.Parse(target)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL text may carry credentials
		}
		return nil, fmt.Errorf("target is not a valid URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("target URL scheme %q is not http or https", u.Scheme)
	case u.Host == "":
		return nil, errors.New("target URL has no host")
	case u.User != nil:
		return nil, errors.New("target URL must not carry credentials: url_probes.http_client_config holds them")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("target URL must not have a query or fragment")
	}
	return u, nil
}
