package redact

import (
	"encoding/base64"
	"net/url"
	"os"
	"strings"

	commoncfg "github.com/prometheus/common/config"
)

// maxSecretFile bounds the credential files read: a bigger file is not a
// credential that could be scrubbed from text.
const maxSecretFile = 64 << 10

// ClientSecrets lists every form in which the credentials of an HTTP client
// configuration go on the wire, as Prometheus' common/config sends them:
//
//   - bearer_token(_file), authorization credentials(_file): the credentials
//     and "<type> <credentials>";
//   - basic_auth password(_file): the password, base64("user:password") and
//     "Basic <base64>";
//   - oauth2 client_secret(_file) and client_certificate_key(_file): the secret,
//     its form encoding (the token request's body) and the client-credentials
//     Basic header (RFC 6749 §2.3.1); the tokens obtained are learned from the
//     wire instead (Transport);
//   - http_headers secrets and files, proxy_connect_header secrets;
//   - proxy_url's password: raw, escaped and as Proxy-Authorization's Basic.
//
// Credential files are read now (a file rotated later is caught by the next
// configuration load, and the Authorization it produces by Transport).
func ClientSecrets(c *commoncfg.HTTPClientConfig) []string {
	var out []string
	add := func(v string) {
		if v != "" {
			out = append(out, v)
		}
	}
	file := func(path string) string {
		if path == "" {
			return ""
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() > maxSecretFile {
			return "" // the client reports unreadable files itself
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		add(string(b))
		return strings.TrimSpace(string(b))
	}
	value := func(inline commoncfg.Secret, path string) string {
		if inline != "" {
			add(string(inline))
			return string(inline)
		}
		return file(path)
	}
	scheme := func(typ, cred string) {
		if cred == "" {
			return
		}
		add(cred)
		add(typ + " " + cred)
	}
	basic := func(user, password string) {
		if password == "" {
			return
		}
		add(password)
		b := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		add(b)
		add("Basic " + b)
	}

	scheme("Bearer", value(c.BearerToken, c.BearerTokenFile))
	if a := c.Authorization; a != nil {
		typ := a.Type
		if typ == "" {
			typ = "Bearer"
		}
		scheme(typ, value(a.Credentials, a.CredentialsFile))
	}
	if b := c.BasicAuth; b != nil {
		user := b.Username
		if b.UsernameFile != "" {
			if u, err := os.ReadFile(b.UsernameFile); err == nil {
				user = strings.TrimSpace(string(u))
			}
		}
		basic(user, value(b.Password, b.PasswordFile))
	}
	if o := c.OAuth2; o != nil {
		for _, s := range []string{value(o.ClientSecret, o.ClientSecretFile), value(o.ClientCertificateKey, o.ClientCertificateKeyFile)} {
			if s == "" {
				continue
			}
			add(url.QueryEscape(s))
			// golang.org/x/oauth2 sends client credentials as Basic of the
			// form-escaped id and secret, or in the body.
			basic(url.QueryEscape(o.ClientID), url.QueryEscape(s))
			basic(o.ClientID, s)
		}
	}
	if h := c.HTTPHeaders; h != nil {
		for _, hdr := range h.Headers {
			for _, s := range hdr.Secrets {
				add(string(s))
			}
			for _, f := range hdr.Files {
				file(f)
			}
		}
	}
	for _, vs := range c.ProxyConnectHeader {
		for _, s := range vs {
			add(string(s))
		}
	}
	if u := c.ProxyURL.URL; u != nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			add(url.QueryEscape(p))
			add(url.PathEscape(p))
			basic(u.User.Username(), p)
		}
	}
	return out
}
