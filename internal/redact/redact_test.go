package redact

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	commoncfg "github.com/prometheus/common/config"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestClientSecrets lists, for every secret-bearing field of HTTPClientConfig,
// the forms that go on the wire; each must be scrubbed.
func TestClientSecrets(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	proxy, _ := url.Parse("http://puser:pr%2Fox+y-pass@127.0.0.1:3128")
	for _, c := range []struct {
		name  string
		cfg   commoncfg.HTTPClientConfig
		forms []string
	}{
		{"bearer_token", commoncfg.HTTPClientConfig{BearerToken: "tok-inline-123"},
			[]string{"tok-inline-123", "Bearer tok-inline-123"}},
		{"bearer_token_file", commoncfg.HTTPClientConfig{BearerTokenFile: file("bt", "tok-file-456\n")},
			[]string{"tok-file-456", "Bearer tok-file-456"}},
		{"authorization credentials", commoncfg.HTTPClientConfig{Authorization: &commoncfg.Authorization{Type: "Token", Credentials: "cred-789x"}},
			[]string{"cred-789x", "Token cred-789x"}},
		{"authorization credentials_file", commoncfg.HTTPClientConfig{Authorization: &commoncfg.Authorization{CredentialsFile: file("ac", "cred-file-000\n")}},
			[]string{"cred-file-000", "Bearer cred-file-000"}},
		{"basic_auth password", commoncfg.HTTPClientConfig{BasicAuth: &commoncfg.BasicAuth{Username: "alice", Password: "pw-alice-1"}},
			[]string{"pw-alice-1", b64("alice:pw-alice-1"), "Basic " + b64("alice:pw-alice-1")}},
		{"basic_auth password_file", commoncfg.HTTPClientConfig{BasicAuth: &commoncfg.BasicAuth{Username: "bob", PasswordFile: file("pw", "pw-bob-2\n")}},
			[]string{"pw-bob-2", b64("bob:pw-bob-2"), "Basic " + b64("bob:pw-bob-2")}},
		{"oauth2 client_secret", commoncfg.HTTPClientConfig{OAuth2: &commoncfg.OAuth2{ClientID: "cid", ClientSecret: "cs+secret/1", TokenURL: "http://127.0.0.1:1/token"}},
			[]string{"cs+secret/1", url.QueryEscape("cs+secret/1"), b64("cid:" + url.QueryEscape("cs+secret/1"))}},
		{"http_headers secrets and files", commoncfg.HTTPClientConfig{HTTPHeaders: &commoncfg.Headers{Headers: map[string]commoncfg.Header{
			"X-Api-Key": {Secrets: []commoncfg.Secret{"hdr-secret-1"}}, "X-Other": {Files: []string{file("h", "hdr-file-2\n")}}}}},
			[]string{"hdr-secret-1", "hdr-file-2"}},
		{"proxy_url user:password", commoncfg.HTTPClientConfig{ProxyConfig: commoncfg.ProxyConfig{ProxyURL: commoncfg.URL{URL: proxy}}},
			[]string{"pr/ox+y-pass", "pr%2Fox+y-pass", url.QueryEscape("pr/ox+y-pass"), b64("puser:pr/ox+y-pass")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := New(ClientSecrets(&c.cfg)...)
			for _, f := range c.forms {
				text := "echo: " + f + " end"
				if got := r.String(text); strings.Contains(got, f) || !strings.Contains(got, Placeholder) {
					t.Errorf("%q scrubbed to %q", text, got)
				}
			}
		})
	}
}

func TestRedactorSources(t *testing.T) {
	r := New()
	if got := r.String("nothing here"); got != "nothing here" {
		t.Errorf("empty redactor changed text: %q", got)
	}
	r.Set("a", []string{"abcd", "abcdefgh", "xy"})
	if got := r.String("abcdefgh abcd xy"); got != "<secret> <secret> xy" {
		t.Errorf("got %q: longest first, short values kept", got)
	}
	r.Set("a", nil)
	r.Learn("Bearer learned-token")
	if got := r.String("abcd Bearer learned-token"); got != "abcd <secret>" {
		t.Errorf("after replacing source a: %q", got)
	}
	var nilR *Redactor
	if nilR.String("abcd") != "abcd" {
		t.Error("nil Redactor changed text")
	}
	h := http.Header{"Authorization": {"Basic Zm9v"}, "X-Echo": {"learned-token"}}
	r.Header(h)
	if h.Get("Authorization") != Placeholder || h.Get("X-Echo") != Placeholder {
		t.Errorf("header %v", h)
	}
}

// TestTransportLearns checks that a token obtained on the wire (here an
// OAuth2 token from a token endpoint) is learned by the Transport placed
// below the OAuth2 round tripper.
func TestTransportLearns(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/token" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"oauth-token-from-server","token_type":"Bearer","expires_in":3600}`))
			return
		}
		_, _ = w.Write([]byte("echo " + req.Header.Get("Authorization")))
	}))
	defer srv.Close()
	r := New()
	oauth := &commoncfg.OAuth2{ClientID: "id", ClientSecret: "client-secret-x", TokenURL: srv.URL + "/token"}
	rt := commoncfg.NewOAuth2RoundTripper(commoncfg.NewInlineSecret("client-secret-x"), oauth, Transport(http.DefaultTransport, r))
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), "oauth-token-from-server") {
		t.Fatalf("fixture: the server did not echo the token: %q", body.String())
	}
	if got := r.String(body.String()); strings.Contains(got, "oauth-token-from-server") {
		t.Errorf("learned token not scrubbed: %q", got)
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	r := New("pw-in-log")
	l := level.NewFilter(Logger(log.NewLogfmtLogger(&buf), r), level.AllowDebug())
	level.Debug(l).Log("msg", "failed pw-in-log", "err", os.ErrNotExist, "x", url.URL{Host: "pw-in-log"})
	out := buf.String()
	if strings.Contains(out, "pw-in-log") || !strings.Contains(out, "level=debug") {
		t.Errorf("log line %q", out)
	}
}

// FuzzRedactor checks that no secret survives scrubbing, whatever surrounds it
// and whichever secrets overlap.
func FuzzRedactor(f *testing.F) {
	f.Add("Authorization=Basic YWxpY2U6cHc=", "YWxpY2U6cHc=", "pw-x")
	f.Add("aaaa-aaaa", "aaaa", "aaaa-a")
	f.Add("<secret><secret>", "secret", "<sec")
	f.Fuzz(func(t *testing.T, text, s1, s2 string) {
		r := New(s1, s2)
		got := r.String(text)
		for _, s := range []string{s1, s2} {
			s = strings.TrimSpace(s)
			// A secret sharing no character with the placeholder cannot be
			// assembled from placeholders and the text around them: it must not
			// survive. (Shorter ones are not scrubbed, by design.)
			if len(s) < minSecretLen || strings.ContainsAny(s, Placeholder) {
				continue
			}
			if strings.Contains(got, s) {
				t.Errorf("secret %q survives in %q (from %q)", s, got, text)
			}
		}
	})
}
