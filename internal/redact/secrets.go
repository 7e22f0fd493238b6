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
	proxy := func(u *url.URL) {
		if u == nil || u.User == nil {
			return
		}
		if p, ok := u.User.Password(); ok && p != "" {
			add(url.QueryEscape(p))
			add(url.PathEscape(p))
			basic(u.User.Username(), p)
		}
	}
	proxy(c.ProxyURL.URL)
	if o := c.OAuth2; o != nil {
		// The token request goes through the OAuth2 section's own proxy.
		proxy(o.ProxyURL.URL)
	}
	if c.ProxyFromEnvironment || (c.OAuth2 != nil && c.OAuth2.ProxyFromEnvironment) {
		for _, u := range EnvProxies() {
			proxy(u)
		}
	}
	return out
}

// EnvProxies are the proxy URLs of the environment that proxy_from_environment
// uses (HTTP_PROXY, HTTPS_PROXY and their lower-case forms), parsed as
// golang.org/x/net/http/httpproxy does: a URL without a scheme is http.
func EnvProxies() []*url.URL {
	var out []*url.URL
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		v := os.Getenv(k)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			u, err = url.Parse("http://" + v)
		}
		if err == nil {
			out = append(out, u)
		}
	}
	return out
}

// Field is one credential of a client configuration: the key that sets it
// and its value (a file's content, trimmed, for the _file keys).
type Field struct {
	Key, Value string
}

// ClientFields lists every credential of c by its key, files read now
// (unreadable ones are left out: the client reports them). The configuration
// refuses a value shorter than MinSecretLen with it.
func ClientFields(c *commoncfg.HTTPClientConfig) []Field {
	var out []Field
	add := func(key, v string) {
		if v != "" {
			out = append(out, Field{key, v})
		}
	}
	file := func(key, path string) {
		if path == "" {
			return
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() > maxSecretFile {
			return
		}
		if b, err := os.ReadFile(path); err == nil {
			add(key, strings.TrimSpace(string(b)))
		}
	}
	add("bearer_token", string(c.BearerToken))
	file("bearer_token_file", c.BearerTokenFile)
	if a := c.Authorization; a != nil {
		add("authorization.credentials", string(a.Credentials))
		file("authorization.credentials_file", a.CredentialsFile)
	}
	if b := c.BasicAuth; b != nil {
		add("basic_auth.password", string(b.Password))
		file("basic_auth.password_file", b.PasswordFile)
	}
	if o := c.OAuth2; o != nil {
		add("oauth2.client_secret", string(o.ClientSecret))
		file("oauth2.client_secret_file", o.ClientSecretFile)
		add("oauth2.client_certificate_key", string(o.ClientCertificateKey))
		file("oauth2.client_certificate_key_file", o.ClientCertificateKeyFile)
		if u := o.ProxyURL.URL; u != nil && u.User != nil {
			p, _ := u.User.Password()
			add("oauth2.proxy_url password", p)
		}
	}
	if h := c.HTTPHeaders; h != nil {
		for name, hdr := range h.Headers {
			for _, s := range hdr.Secrets {
				add("http_headers."+name+".secrets", string(s))
			}
			for _, f := range hdr.Files {
				file("http_headers."+name+".files", f)
			}
		}
	}
	for name, vs := range c.ProxyConnectHeader {
		for _, s := range vs {
			add("proxy_connect_header."+name, string(s))
		}
	}
	if u := c.ProxyURL.URL; u != nil && u.User != nil {
		p, _ := u.User.Password()
		add("proxy_url password", p)
	}
	return out
}

// ClientFiles lists the credential files c reads on every request: a new
// content (a rotation) goes on the wire at once, so the redactor must learn
// it (httpclient re-reads them) and a reload must see it (config's checksum).
func ClientFiles(c *commoncfg.HTTPClientConfig) []string {
	var out []string
	add := func(p string) {
		if p != "" {
			out = append(out, p)
		}
	}
	add(c.BearerTokenFile)
	if a := c.Authorization; a != nil {
		add(a.CredentialsFile)
	}
	if b := c.BasicAuth; b != nil {
		add(b.UsernameFile)
		add(b.PasswordFile)
	}
	if o := c.OAuth2; o != nil {
		add(o.ClientSecretFile)
		add(o.ClientCertificateKeyFile)
	}
	if h := c.HTTPHeaders; h != nil {
		for _, hdr := range h.Headers {
			for _, f := range hdr.Files {
				add(f)
			}
		}
	}
	return out
}
