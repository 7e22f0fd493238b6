package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	commoncfg "github.com/prometheus/common/config"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// clientConfigs lists every HTTP client configuration of c: its targets',
// target_defaults' (the client of discovered targets) and http_sd_configs'.
func (c *Config) clientConfigs() []*commoncfg.HTTPClientConfig {
	var out []*commoncfg.HTTPClientConfig
	for i := range c.Targets {
		out = append(out, &c.Targets[i].HTTPClientConfig)
	}
	if td := c.Discovery.TargetDefaults; td != nil {
		out = append(out, &td.HTTPClientConfig)
	}
	for i := range c.Discovery.HTTPSDConfigs {
		out = append(out, &c.Discovery.HTTPSDConfigs[i].HTTPClientConfig)
	}
	return out
}

// checkSecretLengths refuses a credential shorter than redact.MinSecretLen:
// the redactor cannot scrub so short a value from what targets send back
// without mangling every other text, so it would show.
func checkSecretLengths(c *commoncfg.HTTPClientConfig) error {
	for _, f := range redact.ClientFields(c) {
		if len(f.Value) < redact.MinSecretLen {
			return fmt.Errorf("http_client_config: %s is shorter than %d characters: a credential that short cannot be scrubbed from what targets send back; use a longer one", f.Key, redact.MinSecretLen)
		}
	}
	return nil
}

// hashCredentialFiles adds every credential file of cfg to h: a reload after
// a rotation of one of them is not skipped as "unchanged", so that the
// redactor and the clients start again from the new values.
func hashCredentialFiles(h hash.Hash, cfg *Config) error {
	for _, cc := range cfg.clientConfigs() {
		for _, path := range redact.ClientFiles(cc) {
			content, err := os.ReadFile(path)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				fmt.Fprintf(h, "\ncredential %s absent\n", path)
				continue
			case err != nil:
				// The client reports it; the checksum still changes.
				fmt.Fprintf(h, "\ncredential %s unreadable\n", path)
				continue
			}
			sum := sha256.Sum256(content)
			fmt.Fprintf(h, "\ncredential %s %x\n", path, sum)
		}
	}
	return nil
}

// secretKeys hold credentials, or sections of them: every scalar below one
// of them is a secret unless its own key is in publicKeys.
var secretKeys = map[string]bool{
	"http_client_config": true, "basic_auth": true, "authorization": true, "oauth2": true,
	"http_headers": true, "proxy_connect_header": true, "bearer_token": true, "password": true,
	"credentials": true, "client_secret": true, "client_certificate_key": true, "secrets": true,
}

// publicKeys are the keys below secretKeys that hold no secret.
var publicKeys = map[string]bool{
	"username": true, "type": true, "client_id": true, "token_url": true, "scopes": true,
	"grant_type": true, "values": true, "endpoint_params": true, "tls_config": true,
	"no_proxy": true, "proxy_from_environment": true, "follow_redirects": true,
	"enable_http2": true, "audience": true, "iss": true, "claims": true, "signature_algorithm": true,
}

// userinfoPassword finds the password of a URL's user information even in
// text that does not parse as a URL (a malformed port or host).
var userinfoPassword = regexp.MustCompile(`://[^/@:\s]*:([^/@\s]+)@`)

// rawSecrets reads the secrets of a configuration file that may not load:
// every scalar under a secret-bearing key (secretKeys), whatever its shape,
// the content of every credential file it names, and the password of every
// proxy_url (raw and unescaped). Its redactor scrubs the load's error, which
// would otherwise quote a secret of the wrong shape or a proxy URL whose
// port is malformed.
func rawSecrets(data []byte, dir string) []string {
	var doc any
	if yaml.Unmarshal(data, &doc) != nil {
		return nil
	}
	var out []string
	add := func(v string) {
		if len(v) >= redact.MinSecretLen {
			out = append(out, v)
			// yaml's type errors quote a long scalar by its first 7 characters.
			if len(v) > 10 {
				out = append(out, v[:7]+"...")
			}
		}
	}
	file := func(p string) {
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(p); err != nil || fi.Size() > 64<<10 {
			return
		}
		if b, err := os.ReadFile(p); err == nil {
			add(strings.TrimSpace(string(b)))
		}
	}
	var walk func(node any, key string, secret, headers bool)
	walk = func(node any, key string, secret, headers bool) {
		switch n := node.(type) {
		case map[any]any:
			for k, v := range n {
				ks := fmt.Sprint(k)
				walk(v, ks, (secret || secretKeys[ks]) && !publicKeys[ks], headers || ks == "http_headers")
			}
		case []any:
			for _, v := range n {
				walk(v, key, secret, headers)
			}
		case nil:
		default:
			v := fmt.Sprint(n)
			switch {
			case key == "proxy_url":
				if m := userinfoPassword.FindStringSubmatch(v); m != nil {
					add(m[1])
					if u, err := url.PathUnescape(m[1]); err == nil {
						add(u)
					}
				}
			case strings.HasSuffix(key, "_file") && (secret || secretKeys[strings.TrimSuffix(key, "_file")]),
				key == "files" && headers:
				file(v)
			case secret:
				add(v)
			}
		}
	}
	walk(doc, "", false, false)
	return out
}

// scrubLoadError returns err with every secret of the raw file replaced.
func scrubLoadError(err error, data []byte, dir string) error {
	if err == nil {
		return nil
	}
	secrets := rawSecrets(data, dir)
	if len(secrets) == 0 {
		return err
	}
	red := redact.New(secrets...)
	msg := red.Error(err)
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// CheckCredentialFiles reads every credential file of c's HTTP clients as
// the client reads it on each request (prometheus/common's file secret), and
// returns the first failure, in the words a probe would then fail with,
// naming the client. It is --config.check's: a configuration whose
// credential files are absent loads (a mounted secret may appear later; each
// probe reports it), but a check says it now.
func (c *Config) CheckCredentialFiles(ctx context.Context) error {
	type named struct {
		name string
		cfg  *commoncfg.HTTPClientConfig
	}
	var clients []named
	for i := range c.Targets {
		clients = append(clients, named{fmt.Sprintf("target %q", c.Targets[i].Name), &c.Targets[i].HTTPClientConfig})
	}
	if td := c.Discovery.TargetDefaults; td != nil {
		clients = append(clients, named{"target_defaults", &td.HTTPClientConfig})
	}
	for i := range c.Discovery.HTTPSDConfigs {
		clients = append(clients, named{fmt.Sprintf("http_sd_configs[%d]", i), &c.Discovery.HTTPSDConfigs[i].HTTPClientConfig})
	}
	if c.URLProbes != nil {
		clients = append(clients, named{"url_probes", &c.URLProbes.HTTPClientConfig})
	}
	for _, cl := range clients {
		for _, path := range redact.ClientFiles(cl.cfg) {
			if _, err := commoncfg.NewFileSecret(path).Fetch(ctx); err != nil {
				return fmt.Errorf("%s: http_client_config: %w", cl.name, err)
			}
		}
	}
	return nil
}
