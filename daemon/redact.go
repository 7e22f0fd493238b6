package daemon

import (
	"net/http"
	"os"
	"sort"
	"strings"

	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-prober/vllm_prober/config"
)

// secretPlaceholder replaces a secret wherever the daemon shows text to users.
const secretPlaceholder = "<secret>"

// scrubber replaces every credential of a configuration in text. The prober
// already keeps credentials out of its results; this is the daemon's second line
// of defence for everything it renders (pages, debug reports, errors, logs).
type scrubber struct {
	r *strings.Replacer // nil: nothing to scrub
}

// newScrubber collects the inline secrets of cfg's targets, target_defaults and
// http_sd_configs and, best effort, the contents of their credential files.
func newScrubber(cfg *config.Config) *scrubber {
	if cfg == nil {
		return &scrubber{}
	}
	set := map[string]bool{}
	add := func(c *commoncfg.HTTPClientConfig) {
		for _, s := range clientSecrets(c) {
			if s = strings.TrimSpace(s); s != "" && s != secretPlaceholder {
				set[s] = true
			}
		}
	}
	for i := range cfg.Targets {
		add(&cfg.Targets[i].HTTPClientConfig)
	}
	// Discovered targets share target_defaults' client; http_sd has its own.
	if td := cfg.Discovery.TargetDefaults; td != nil {
		add(&td.HTTPClientConfig)
	}
	for i := range cfg.Discovery.HTTPSDConfigs {
		add(&cfg.Discovery.HTTPSDConfigs[i].HTTPClientConfig)
	}
	if len(set) == 0 {
		return &scrubber{}
	}
	secrets := make([]string, 0, len(set))
	for s := range set {
		secrets = append(secrets, s)
	}
	// Longest first, so that a secret containing another is replaced whole.
	sort.Slice(secrets, func(i, j int) bool {
		if len(secrets[i]) != len(secrets[j]) {
			return len(secrets[i]) > len(secrets[j])
		}
		return secrets[i] < secrets[j]
	})
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, secretPlaceholder)
	}
	return &scrubber{r: strings.NewReplacer(pairs...)}
}

func (s *scrubber) scrub(text string) string {
	if s == nil || s.r == nil {
		return text
	}
	return s.r.Replace(text)
}

// clientSecrets lists the credentials of an HTTP client configuration: inline
// secrets and the contents of the files that hold them.
func clientSecrets(c *commoncfg.HTTPClientConfig) []string {
	var out []string
	secret := func(v commoncfg.Secret) { out = append(out, string(v)) }
	file := func(path string) {
		if path == "" {
			return
		}
		// Credential files are small; a bigger file is not a credential we can scrub.
		if fi, err := os.Stat(path); err != nil || fi.Size() > 64<<10 {
			return
		}
		if b, err := os.ReadFile(path); err == nil {
			out = append(out, string(b))
		}
	}
	secret(c.BearerToken)
	file(c.BearerTokenFile)
	if a := c.Authorization; a != nil {
		secret(a.Credentials)
		file(a.CredentialsFile)
	}
	if b := c.BasicAuth; b != nil {
		secret(b.Password)
		file(b.PasswordFile)
	}
	if o := c.OAuth2; o != nil {
		secret(o.ClientSecret)
		file(o.ClientSecretFile)
	}
	if h := c.HTTPHeaders; h != nil {
		for _, hdr := range h.Headers {
			for _, s := range hdr.Secrets {
				secret(s)
			}
			for _, f := range hdr.Files {
				file(f)
			}
		}
	}
	if u := c.ProxyURL.URL; u != nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	return out
}

// sensitiveHeaders never show their values, whatever they hold.
var sensitiveHeaders = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Cookie":              true,
	"Set-Cookie":          true,
	"X-Api-Key":           true,
	"Api-Key":             true,
	"Openai-Api-Key":      true,
}

// headerLines renders h sorted, one "Name: value" line each, with sensitive
// headers redacted and secrets scrubbed.
func (s *scrubber) headerLines(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lines []string
	for _, k := range keys {
		for _, v := range h[k] {
			if sensitiveHeaders[http.CanonicalHeaderKey(k)] {
				v = secretPlaceholder
			}
			lines = append(lines, k+": "+s.scrub(v))
		}
	}
	return lines
}
