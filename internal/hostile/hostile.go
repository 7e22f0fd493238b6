// Package hostile is a test helper: a vLLM-shaped HTTP server on 127.0.0.1
// that attacks its client as a hostile or misconfigured target would. It
// echoes every credential its requests carry, in every form vllm_prober
// guarantees to scrub, into everything it sends: the ids of /v1/models, the
// model_name label values and HELP text of /metrics, /version, error bodies
// (long ones, that straddle every cut a client makes), SSE error events,
// generated text split over many small chunks, response headers and
// redirects to another host. The tests of the prober, the daemon and bench
// run against it; it is not part of the product (vllm_sim is the simulator).
package hostile

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf16"
)

// Modes a completion request selects with its X-Mode header (a module's
// headers): how the server answers.
const (
	Mode401      = "401"      // 401 with a JSON error whose message echoes
	Mode500      = "500"      // 500 with a text body that echoes
	ModeEvent    = "event"    // 200, one token, then an SSE error event that echoes
	ModeSplit    = "split"    // 200, generated text that echoes, split in 7-byte chunks
	ModeRedirect = "redirect" // 302 to another host, the echo in the Location's path and query
)

// DenyPrefix is a path prefix under which /v1/models answers 401 with an
// echo (a target URL ending in it has no model list).
const DenyPrefix = "/deny"

// ModePrefix + a mode is a path prefix that selects the mode of the
// completions under it, for clients that send no X-Mode header (bench).
const ModePrefix = "/mode/"

// credentialHeaders are the request headers whose values the server takes
// for credentials: those of every HTTP client configuration field.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "X-Gateway-Token", "Cookie"}

// Server is a running hostile target.
type Server struct {
	*httptest.Server
	// Other is another host (localhost rather than 127.0.0.1, another port)
	// that the redirects point to; it records what reaches it.
	Other *httptest.Server

	n      atomic.Int64 // requests served: shifts the echoes by a byte each time
	token  atomic.Value // the last OAuth2 access token issued (string)
	mu     sync.Mutex
	seen   []string // "Name: value" of every credential header received
	stolen []string // every request that reached Other, with its headers
}

// New starts a hostile target and its other host; both stop at the end of
// the test.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	s.Other = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.stolen = append(s.stolen, r.Method+" "+r.URL.String()+" "+dump(r.Header))
		s.mu.Unlock()
		fmt.Fprintln(w, "thank you")
	}))
	s.Other.Start()
	// "localhost" is another host name than 127.0.0.1 for every client.
	s.Other.URL = strings.Replace(s.Other.URL, "127.0.0.1", "localhost", 1)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	t.Cleanup(s.Other.Close)
	return s
}

// Token is the last OAuth2 access token the server issued ("" if none).
func (s *Server) Token() string {
	v, _ := s.token.Load().(string)
	return v
}

// Seen lists every credential header value the server received, as
// "Name: value".
func (s *Server) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// Stolen lists the requests that reached the other host.
func (s *Server) Stolen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stolen)
}

func dump(h http.Header) string {
	var lines []string
	for k, vs := range h {
		for _, v := range vs {
			lines = append(lines, k+": "+v)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "; ")
}

// TokenPrefix starts the OAuth2 access tokens the server issues; the rest
// is the client secret of the token request.
const TokenPrefix = "Tk9-"

// Candidates are the secrets a credential header value may carry: the value,
// its credentials after the scheme ("Bearer x": x, and for an access token
// of ours the client secret in it), and for Basic the password of the
// decoded user:password.
func Candidates(value string) []string {
	out := []string{value}
	scheme, cred, ok := strings.Cut(value, " ")
	if !ok || strings.TrimFunc(scheme, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' }) != "" {
		return out
	}
	out = append(out, cred)
	if s, ok := strings.CutPrefix(cred, TokenPrefix); ok {
		out = append(out, s)
	}
	if strings.EqualFold(scheme, "Basic") {
		if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
			if _, pw, ok := strings.Cut(string(b), ":"); ok {
				out = append(out, pw)
				if u, err := url.QueryUnescape(pw); err == nil && u != pw {
					out = append(out, u) // OAuth2 client credentials are form-escaped
				}
			}
		}
	}
	return out
}

// Forms are the forms of secret c that the server echoes and that
// vllm_prober guarantees to scrub, by name.
func Forms(c string) map[string]string {
	return map[string]string{
		"plain":        c,
		"json":         JSONEscaped(c),
		"url-query":    url.QueryEscape(c),
		"url-path":     url.PathEscape(c),
		"base64":       base64.StdEncoding.EncodeToString([]byte(c)),
		"base64-url":   base64.RawURLEncoding.EncodeToString([]byte(c)),
		"json-of-json": JSONEscaped(JSONEscaped(c)),
		"json-u-every": UEscaped(c, 1),
		"json-u-mixed": UEscaped(c, 2),
	}
}

// UEscaped is s as the content of a JSON string with every nth character
// spelled \uXXXX (a surrogate pair beyond the BMP), the rest as
// encoding/json writes them: a spelling any JSON decoder reads as s.
func UEscaped(s string, nth int) string {
	var b strings.Builder
	for i, r := range []rune(s) {
		if i%nth != 0 {
			b.WriteString(JSONEscaped(string(r)))
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		} else {
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// JSONEscaped is s as the content of a JSON string, HTML-escaped as
// encoding/json writes it.
func JSONEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// echo is the text the server puts everywhere for request r: every form of
// every candidate secret of its credential headers, and the request URL;
// and the candidates.
func (s *Server) echo(r *http.Request) (string, []string) {
	var parts, plain []string
	for _, name := range credentialHeaders {
		for _, v := range r.Header.Values(name) {
			s.mu.Lock()
			s.seen = append(s.seen, name+": "+v)
			s.mu.Unlock()
			parts = append(parts, "wire="+v)
			for _, c := range Candidates(v) {
				plain = append(plain, c)
				forms := Forms(c)
				// JSON bodies escape the json form once more (json-of-json).
				for _, k := range []string{"plain", "json", "url-query", "url-path", "base64", "base64-url", "json-u-every", "json-u-mixed"} {
					parts = append(parts, k+"="+forms[k])
				}
			}
		}
	}
	parts = append(parts, "url="+r.URL.String())
	return strings.Join(parts, " | "), plain
}

// long is msg followed by many copies of each secret back to back, shifted
// by a byte per request: whatever the prefix a client adds and wherever it
// cuts (300, 512, 256, 80 bytes, ...), some copy straddles the cut.
func (s *Server) long(msg string, plain []string) string {
	var b strings.Builder
	b.WriteString(strings.Repeat("~", int(s.n.Add(1)%3)))
	b.WriteString(msg)
	for _, c := range plain {
		for b.Len() < 1200 {
			b.WriteString(" ")
			b.WriteString(strings.Repeat(c, 4))
		}
		b.WriteString(" ")
		for range 8 {
			b.WriteString(c)
		}
	}
	return b.String()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	echo, plain := s.echo(r)
	// Response headers echo too (header values cannot hold newlines).
	w.Header().Set("X-Echo", strings.NewReplacer("\r", " ", "\n", " ").Replace(echo))
	path, deny := strings.CutPrefix(r.URL.Path, DenyPrefix)
	if rest, ok := strings.CutPrefix(path, ModePrefix); ok {
		mode, p, _ := strings.Cut(rest, "/")
		path = "/" + p
		if r.Header.Get("X-Mode") == "" {
			r.Header.Set("X-Mode", mode)
		}
	}
	switch path {
	case "/token":
		// The access token issued carries the client secret (TokenPrefix +
		// secret): every later request carries it to be echoed.
		_ = r.ParseForm()
		secret := r.PostForm.Get("client_secret")
		if user, pw, ok := r.BasicAuth(); ok && user != "" {
			if u, err := url.QueryUnescape(pw); err == nil {
				secret = u
			}
		}
		tok := TokenPrefix + secret
		s.token.Store(tok)
		writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	case "/health":
		fmt.Fprintln(w, "ok")
	case "/version":
		writeJSON(w, http.StatusOK, map[string]any{"version": echo})
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP vllm:num_requests_running %s\n# TYPE vllm:num_requests_running gauge\n", strings.ReplaceAll(echo, "\\", `\\`))
		fmt.Fprintf(w, "vllm:num_requests_running{model_name=%q} 0\n", "hostile-model")
		for _, c := range plain {
			for _, f := range Forms(c) {
				fmt.Fprintf(w, "vllm:num_requests_running{model_name=\"%s\"} 0\n", labelEscape(f))
			}
		}
		fmt.Fprintf(w, "# HELP vllm:request_success_total %s\n# TYPE vllm:request_success_total counter\n", strings.ReplaceAll(echo, "\\", `\\`))
		for _, c := range plain {
			fmt.Fprintf(w, "vllm:request_success_total{model_name=\"hostile-model\",finished_reason=\"%s\"} 3\n", labelEscape(c))
		}
	case "/v1/models":
		if deny {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
				"message": s.long(echo, plain), "type": "AuthenticationError", "code": 401}})
			return
		}
		data := []map[string]any{{"id": "hostile-model", "object": "model", "owned_by": echo, "max_model_len": 4096}}
		for _, c := range plain {
			data = append(data, map[string]any{"id": c, "object": "model", "root": c, "parent": "hostile-model"})
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	case "/v1/completions", "/v1/chat/completions", "/v1/embeddings":
		s.complete(w, r, echo, plain, path == "/v1/chat/completions")
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": s.long(echo, plain)})
	}
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request, echo string, plain []string, chat bool) {
	switch r.Header.Get("X-Mode") {
	case Mode401:
		// The body itself spells every secret with \u escapes, as a JSON
		// encoder escaping every character would: any decoder reads the
		// message as the secret.
		b, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": s.long(echo, plain), "type": "AuthenticationError", "code": 401}})
		body := string(b)
		byLength := slices.Clone(plain)
		slices.SortFunc(byLength, func(a, b string) int { return len(b) - len(a) })
		for i, c := range byLength {
			body = strings.ReplaceAll(body, JSONEscaped(c), UEscaped(c, 1+i%2))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, body)
	case Mode500:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, s.long("internal error: "+echo, plain))
	case ModeEvent:
		sse(w)
		chunk(w, chat, "hi")
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": s.long(echo, plain), "type": "InternalServerError", "code": 500}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fmt.Fprint(w, "data: [DONE]\n\n")
	case ModeSplit:
		sse(w)
		text := s.long("generated: "+echo, plain)
		for i := 0; i < len(text); i += 7 {
			chunk(w, chat, text[i:min(len(text), i+7)])
		}
		fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	case ModeRedirect:
		loc := s.Other.URL + "/steal"
		for _, c := range plain {
			loc += "/" + url.PathEscape(c)
		}
		q := url.Values{}
		for _, c := range plain {
			q.Add("k", c)
		}
		w.Header().Set("Location", loc+"?"+q.Encode())
		w.WriteHeader(http.StatusFound)
	default:
		sse(w)
		chunk(w, chat, "hello")
		fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func sse(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

func chunk(w http.ResponseWriter, chat bool, text string) {
	var v map[string]any
	if chat {
		v = map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}}}}
	} else {
		v = map[string]any{"object": "text_completion", "choices": []any{map[string]any{"index": 0, "text": text}}}
	}
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// labelEscape escapes a Prometheus text-format label value.
func labelEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
