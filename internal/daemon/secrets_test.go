package daemon

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/bench"
)

// startHeaderEcho is a vLLM-shaped target that echoes every request header
// it receives (as some gateways and proxies do) in every body it sends: /v1/models
// answers 401 with them (200 with them in a model card when the request has
// X-Models: ok), and a completion answers by its X-Mode header: 401, 500,
// or 200 with a mid-stream error event. It also serves an OAuth2 token endpoint
// (/token, whose token it reports through token) and accepts proxy requests
// (absolute-form, with Proxy-Authorization), as a forward proxy would. seen
// gets every request's headers, so that a test can check the secret went on
// the wire.
func startHeaderEcho(t *testing.T, token *atomic.Value, seen *syncBuffer) *httptest.Server {
	t.Helper()
	dump := func(r *http.Request) string {
		var lines []string
		for k, vs := range r.Header {
			for _, v := range vs {
				lines = append(lines, k+"="+v)
			}
		}
		slices.Sort(lines)
		return strings.Join(lines, "; ")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg, _ := json.Marshal("request headers: " + dump(r))
		fmt.Fprintf(seen, "%s %s: %s\n", r.Method, r.URL.Path, dump(r))
		switch r.URL.Path {
		case "/token":
			_ = r.ParseForm()
			tok := fmt.Sprintf("oauth-access-token-%d", time.Now().UnixNano())
			token.Store(tok)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tok)
		case "/health":
			w.WriteHeader(http.StatusOK)
		case "/metrics":
			fmt.Fprintf(w, "# HELP echo %s\n# TYPE echo gauge\necho 1\n", strings.ReplaceAll(dump(r), "\n", " "))
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			if r.Header.Get("X-Models") == "ok" {
				fmt.Fprintf(w, `{"object":"list","data":[{"id":"echo-model","object":"model","owned_by":%s}]}`, msg)
				return
			}
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":%s,"type":"AuthenticationError","code":401}}`, msg)
		default:
			w.Header().Set("X-Echo", dump(r))
			switch r.Header.Get("X-Mode") {
			case "401":
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"error":{"message":%s,"type":"AuthenticationError","code":401}}`, msg)
			case "500":
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, "internal error, %s", dump(r))
			default:
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"hi\",\"finish_reason\":null}]}\n\n")
				fmt.Fprintf(w, "data: {\"error\":{\"message\":%s,\"type\":\"InternalServerError\",\"code\":500}}\n\n", msg)
				fmt.Fprint(w, "data: [DONE]\n\n")
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// recordLink is a link of the landing page to a stored probe record.
var recordLink = regexp.MustCompile(`probe/record\?[^"]+`)

// TestSecretsNeverShown is the secrets table: for every secret-bearing field
// of HTTPClientConfig, a target that echoes every request header in its 401,
// 500, 200-with-error-event and /v1/models bodies. No form of the secret (raw,
// base64, "Bearer …", "Basic …", and the OAuth2 token obtained) may appear on
// the landing page, the stored probe records (/probe/record), /probe's debug
// report, /config, /metrics or the logs at debug level.
func TestSecretsNeverShown(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	forms := func(user, secret string) []string {
		f := []string{secret, "Bearer " + secret, b64(secret), url.QueryEscape(secret)}
		if user != "" {
			f = append(f, b64(user+":"+secret), "Basic "+b64(user+":"+secret))
		}
		return f
	}
	for _, c := range []struct {
		name string
		// client is the http_client_config; {dir} is a directory for secret
		// files, {echo} the echo server's URL and {echohost} its host:port.
		client string
		files  map[string]string
		user   string
		secret string
		proxy  bool // the target is reached through the echo server as a proxy
	}{
		{name: "basic_auth password", client: `basic_auth: {username: alice, password: pw-basic-inline-8c1f}`, user: "alice", secret: "pw-basic-inline-8c1f"},
		{name: "basic_auth password_file", client: `basic_auth: {username: bob, password_file: {dir}/pw}`, files: map[string]string{"pw": "pw-basic-file-3b7d\n"}, user: "bob", secret: "pw-basic-file-3b7d"},
		{name: "authorization credentials", client: `authorization: {credentials: cred-inline-5e2a}`, secret: "cred-inline-5e2a"},
		{name: "authorization credentials_file", client: `authorization: {credentials_file: {dir}/cred}`, files: map[string]string{"cred": "cred-file-9a4c\n"}, secret: "cred-file-9a4c"},
		{name: "bearer_token", client: `bearer_token: bearer-inline-1d6e`, secret: "bearer-inline-1d6e"},
		{name: "oauth2 client_secret", client: `oauth2: {client_id: probe, client_secret: oauth-secret-7f3b, token_url: "{echo}/token"}`, user: "probe", secret: "oauth-secret-7f3b"},
		{name: "http_headers secret", client: `http_headers: {X-Api-Key: {secrets: [hdr-secret-4c8a]}}`, secret: "hdr-secret-4c8a"},
		{name: "http_headers file", client: `http_headers: {X-Gateway-Token: {files: [{dir}/hdr]}}`, files: map[string]string{"hdr": "hdr-file-2e9b\n"}, secret: "hdr-file-2e9b"},
		{name: "proxy_url user:password", client: `proxy_url: "http://puser:proxy-pw-6a1d@{echohost}"`, user: "puser", secret: "proxy-pw-6a1d", proxy: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var token atomic.Value
			seen := &syncBuffer{}
			echo := startHeaderEcho(t, &token, seen)
			dir := t.TempDir()
			for name, content := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			target := echo.URL
			if c.proxy {
				target = "http://vllm.internal:8000" // only the proxy knows the way
			}
			client := strings.NewReplacer("{dir}", dir, "{echo}", echo.URL, "{echohost}", strings.TrimPrefix(echo.URL, "http://")).Replace(c.client)
			path := filepath.Join(dir, "vllm_prober.yml")
			writeConfig(t, path, fmt.Sprintf(`
global: {probe_interval: 200ms, scrape_interval: 200ms, scrape_timeout: 150ms, stall_timeout: 5s}
modules:
  m401: {prober: completions, prompt: hi, max_tokens: 4, headers: {X-Mode: "401"}}
  m500: {prober: completions, prompt: hi, max_tokens: 4, headers: {X-Mode: "500"}}
  merr: {prober: completions, prompt: hi, max_tokens: 4, headers: {X-Mode: "event"}}
targets:
  - name: echo
    url: %s
    model: echo-model
    modules: [m401, m500, merr]
    http_client_config: {%s}
`, target, client))
			f := &fixture{t: t}
			f.path = path
			f.start(Options{ConfigFile: path, HistoryLimit: 5})
			waitFor(t, 10*time.Second, "a failed probe of every module", func() bool {
				for _, mod := range []string{"m401", "m500", "merr"} {
					if s, ok := f.d.probes.Stats("echo", mod); !ok || s.LastReason == "" {
						return false
					}
				}
				return strings.Contains(f.logs.String(), "Listing models failed")
			})

			want := forms(c.user, c.secret)
			if tok, ok := token.Load().(string); ok {
				want = append(want, tok, "Bearer "+tok)
			} else if strings.HasPrefix(c.name, "oauth2") {
				t.Fatal("fixture: no OAuth2 token was obtained")
			}
			texts := map[string]string{}
			_, texts["the landing page"] = f.get("/")
			// Every stored probe record the landing page links to.
			records := recordLink.FindAllString(texts["the landing page"], -1)
			if len(records) < 3 {
				t.Fatalf("fixture: %d probe records linked from the landing page, want one per module at least", len(records))
			}
			for _, link := range records {
				link = html.UnescapeString(link)
				code, body := f.get("/" + link)
				if code != http.StatusOK {
					t.Fatalf("/%s = %d: %s", link, code, body)
				}
				texts["/"+link] = body
			}
			_, texts["/config"] = f.get("/config")
			_, texts["/metrics"] = f.get("/metrics")
			for _, mod := range []string{"m401", "m500", "merr"} {
				_, texts["/probe debug of "+mod] = f.get("/probe?target=echo&module=" + mod + "&debug=true")
			}
			f.stop()
			texts["the debug log"] = f.logs.String()

			// The fixture must put the secret on the wire and the echo in front
			// of us, or the test proves nothing.
			if !slices.ContainsFunc(want, func(form string) bool { return strings.Contains(seen.String(), form) }) {
				t.Fatalf("fixture: no form of the secret went on the wire:\n%s", seen.String())
			}
			if !strings.Contains(texts["/probe debug of m401"], "request headers: ") {
				t.Fatalf("fixture: the debug report shows no echo:\n%s", texts["/probe debug of m401"])
			}
			for where, text := range texts {
				for _, form := range want {
					if i := strings.Index(text, form); i >= 0 {
						t.Errorf("%s shows %q: ...%s...", where, form, text[max(0, i-120):min(len(text), i+len(form)+40)])
					}
				}
			}
		})
	}
}

// TestSecretsNeverShownByBench: bench sends its API key (--api-key-file) as
// "Authorization: Bearer <key>" to a server that echoes every request header
// in its /v1/models list and in 401, 500 and 200-with-error-event answers. No
// form of the key (raw, base64, "Bearer …") may appear in the printed
// summary, the debug log, the run's error or any file WriteAll writes (the
// level JSON with --save-detailed's errors, the CSV, the baseline, the charts).
func TestSecretsNeverShownByBench(t *testing.T) {
	const key = "sk-bench-key-5c0d"
	var token atomic.Value
	seen := &syncBuffer{}
	echo := startHeaderEcho(t, &token, seen)
	want := []string{key, "Bearer " + key, base64.StdEncoding.EncodeToString([]byte(key))}
	for _, mode := range []string{"401", "500", "e"} { // "e": the error event
		t.Run("answer "+mode, func(t *testing.T) {
			logger, logs := debugLogger()
			var summary syncBuffer
			rep, err := bench.Run(t.Context(), bench.Options{
				URL: echo.URL, Concurrencies: []int{2}, Requests: 4, MaxTokens: 4,
				Header:  http.Header{"Authorization": {"Bearer " + key}, "X-Mode": {mode}, "X-Models": {"ok"}},
				Summary: &summary, Logger: logger, SaveDetailed: true, ForceBaseline: true,
				ReadyTimeout: 5 * time.Second, RequestTimeout: 5 * time.Second,
			})
			if err != nil {
				t.Fatalf("bench: %v", err)
			}
			dir := t.TempDir()
			files, err := bench.WriteAll(dir, rep)
			if err != nil {
				t.Fatal(err)
			}
			texts := map[string]string{"the summary": summary.String(), "the debug log": logs.String()}
			for _, p := range files.Paths(dir) {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				texts[filepath.Base(p)] = string(b)
			}
			// The key went on the wire and its echo came back into the output,
			// scrubbed: else the test proves nothing.
			if !strings.Contains(seen.String(), "Authorization=Bearer "+key) {
				t.Fatalf("fixture: the key was not sent:\n%s", seen.String())
			}
			for where, text := range texts {
				for _, form := range want {
					if i := strings.Index(text, form); i >= 0 {
						t.Errorf("%s shows %q: ...%s...", where, form, text[max(0, i-120):min(len(text), i+len(form)+40)])
					}
				}
			}
			if !t.Failed() && !strings.Contains(summary.String(), "Authorization=<secret>") {
				t.Fatalf("fixture: the summary shows no scrubbed echo:\n%s", summary.String())
			}
		})
	}
}
