package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	commoncfg "github.com/prometheus/common/config"
)

// TestGuaranteedForms: every guaranteed form of a secret is scrubbed: plain,
// trimmed, JSON-escaped (with and without HTML escaping, once and twice),
// URL-encoded (query and path), base64 alone (standard, unpadded, URL), and
// each form of each wire value. Hex and another case are documented as not
// covered.
func TestGuaranteedForms(t *testing.T) {
	const s = `Zq9Wm7x"\<&>/+=? %`
	r := New(s, "Bearer "+s)
	jsonOnce := func(v string, html bool) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		_ = enc.Encode(v)
		out := strings.TrimSpace(b.String())
		return out[1 : len(out)-1]
	}
	for _, base := range []string{s, "Bearer " + s} {
		for name, form := range map[string]string{
			"plain":             base,
			"json":              jsonOnce(base, true),
			"json without html": jsonOnce(base, false),
			"json twice":        jsonOnce(jsonOnce(base, true), true),
			"query":             url.QueryEscape(base),
			"path":              url.PathEscape(base),
			"base64":            base64.StdEncoding.EncodeToString([]byte(base)),
			"base64 unpadded":   base64.RawStdEncoding.EncodeToString([]byte(base)),
			"base64 url":        base64.RawURLEncoding.EncodeToString([]byte(base)),
			"json of query":     jsonOnce(url.QueryEscape(base), true),
		} {
			if got := r.String("<<" + form + ">>"); got != "<<"+Placeholder+">>" {
				t.Errorf("%q form %s: %q", base, name, got)
			}
		}
	}
}

// TestCutScrubsFirst: a secret straddling the cut leaves no part of itself.
func TestCutScrubsFirst(t *testing.T) {
	r := New("Zq9Wm7xSecretValue")
	text := strings.Repeat("x", 10) + "Zq9Wm7xSecretValue" + " tail"
	for n := 0; n < len(text); n++ {
		if got := r.Cut(text, n); strings.Contains(got, "Zq9W") {
			t.Errorf("Cut at %d = %q", n, got)
		}
	}
	if got := r.Cut("héllo", 2); got != "h…" {
		t.Errorf("Cut in a rune = %q, want h…", got)
	}
}

// TestLabel: a value holding a secret becomes the placeholder alone.
func TestLabel(t *testing.T) {
	r := New("Zq9Wm7xSecretValue")
	if v, held := r.Label("model-Zq9Wm7xSecretValue-x"); v != Placeholder || !held {
		t.Errorf("Label = %q %v", v, held)
	}
	if v, held := r.Label("llama"); v != "llama" || held {
		t.Errorf("Label(llama) = %q %v", v, held)
	}
}

// TestProxyCredentialsRegistered: the password of oauth2.proxy_url and the
// user information of the environment's proxy under proxy_from_environment
// are secrets in every wire form (Proxy-Authorization's Basic).
func TestProxyCredentialsRegistered(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://envuser:env-proxy-pw-9@proxy.internal:3128")
	t.Setenv("HTTP_PROXY", "")
	oproxy, _ := url.Parse("http://ouser:oauth-proxy-pw-7@proxy.internal:3128")
	for _, c := range []struct {
		name string
		cfg  commoncfg.HTTPClientConfig
		user string
		pw   string
	}{
		{"oauth2 proxy_url", commoncfg.HTTPClientConfig{OAuth2: &commoncfg.OAuth2{ClientID: "c", ClientSecret: "cs-secret-1", TokenURL: "http://t/",
			ProxyConfig: commoncfg.ProxyConfig{ProxyURL: commoncfg.URL{URL: oproxy}}}}, "ouser", "oauth-proxy-pw-7"},
		{"proxy_from_environment", commoncfg.HTTPClientConfig{ProxyConfig: commoncfg.ProxyConfig{ProxyFromEnvironment: true}}, "envuser", "env-proxy-pw-9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := New(ClientSecrets(&c.cfg)...)
			basic := base64.StdEncoding.EncodeToString([]byte(c.user + ":" + c.pw))
			for _, form := range []string{c.pw, basic, "Basic " + basic} {
				if got := r.String("x " + form + " y"); got != "x "+Placeholder+" y" {
					t.Errorf("%s: %q not scrubbed: %q", c.name, form, got)
				}
			}
		})
	}
}

// TestScrubTail: a text that ends in the start of a secret (a stream cut by
// a timeout in the middle of an echo) loses that start; a text that ends in
// fewer than the minimum's bytes of it, or in no secret, is left alone.
func TestScrubTail(t *testing.T) {
	r := New("Zq9Wm7xSecretValue")
	for in, want := range map[string]string{
		"text Zq9Wm7xSec":               "text " + Placeholder,
		"text Zq9Wm7xSecretValue tail":  "text " + Placeholder + " tail",
		"text Zq9":                      "text Zq9",
		"plain text":                    "plain text",
		"a Zq9Wm7xSecretValue Zq9Wm7xS": "a " + Placeholder + " " + Placeholder,
	} {
		if got := r.ScrubTail(in); got != want {
			t.Errorf("ScrubTail(%q) = %q, want %q", in, got, want)
		}
	}
}
