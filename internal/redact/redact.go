// Package redact is vllm_prober's one owner of secret scrubbing. A Redactor
// holds the exact values that go on the wire (every credential of the HTTP
// client configurations, in every encoding sent, and the OAuth2 tokens the
// clients obtained) and replaces each with Placeholder in any text: results,
// pages, debug reports, /config, logs and errors.
//
// It sits below the prober and the collector and imports neither: it knows
// strings, header maps, loggers and round trippers only.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"
)

// Placeholder replaces every secret. It is what Prometheus' config.Secret
// marshals as, so /config reads the same either way.
const Placeholder = "<secret>"

// MinSecretLen is the shortest value scrubbed: shorter ones would mangle
// innocent text (a one-letter password would scrub every "a"). The
// configuration refuses credentials that short (config.Load), so that no
// secret in force escapes scrubbing.
const MinSecretLen = 4

const minSecretLen = MinSecretLen

// maxLearned bounds the tokens a Redactor learned from the wire (Learn); the
// oldest go first. OAuth2 tokens are refreshed, not accumulated.
const maxLearned = 64

// Redactor replaces secrets in text. The zero value and nil scrub nothing. It
// is safe for concurrent use; reads take no lock.
type Redactor struct {
	mu      sync.Mutex // serialises writers
	sources map[string][]string
	learned []string
	state   atomic.Pointer[state]
}

type state struct {
	r       *strings.Replacer // nil: nothing to scrub
	maxLen  int               // the longest form scrubbed
	secrets []string          // every form scrubbed, longest first
}

// New returns a Redactor of the given secrets (source "").
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Set("", secrets)
	return r
}

// Set replaces the secrets of one source (e.g. "config"); the Redactor scrubs
// the union of every source and every learned value.
func (r *Redactor) Set(source string, secrets []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sources == nil {
		r.sources = map[string][]string{}
	}
	r.sources[source] = slices.Clone(secrets)
	r.rebuild()
}

// Learn adds values seen on the wire (e.g. "Bearer <an OAuth2 token>"): the
// value and, for "<scheme> <credentials>", the credentials alone. It is cheap
// when the value is known already.
func (r *Redactor) Learn(values ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	var all []string
	for _, v := range values {
		all = append(all, v)
		// "Bearer <token>": the token alone may be echoed too.
		if i := strings.IndexByte(v, ' '); i > 0 && i+1 < len(v) {
			all = append(all, v[i+1:])
		}
	}
	// The values are kept; rebuild derives their forms.
	for _, v := range all {
		if len(v) < minSecretLen || slices.Contains(r.learned, v) {
			continue
		}
		r.learned = append(r.learned, v)
		changed = true
	}
	if !changed {
		return
	}
	if len(r.learned) > maxLearned {
		r.learned = slices.Delete(r.learned, 0, len(r.learned)-maxLearned)
	}
	r.rebuild()
}

// rebuild compiles the replacer. r.mu must be held.
func (r *Redactor) rebuild() {
	set := map[string]bool{}
	add := func(v string) {
		for _, form := range forms(v) {
			if len(form) >= minSecretLen && form != Placeholder {
				set[form] = true
			}
		}
	}
	for _, vs := range r.sources {
		for _, v := range vs {
			add(v)
		}
	}
	for _, v := range r.learned {
		add(v)
	}
	if len(set) == 0 {
		r.state.Store(&state{})
		return
	}
	secrets := make([]string, 0, len(set))
	for s := range set {
		secrets = append(secrets, s)
	}
	// Longest first, so that a secret containing another is replaced whole
	// (strings.Replacer tries its pairs in argument order at each position).
	slices.SortFunc(secrets, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, Placeholder)
	}
	r.state.Store(&state{r: strings.NewReplacer(pairs...), maxLen: len(secrets[0]), secrets: secrets})
}

// forms are the texts a value may appear as, the forms the Redactor
// guarantees to scrub: the value itself and, when it has surrounding white
// space (a credential file's trailing newline), trimmed; each of those
// JSON-escaped (as every JSON encoder writes it, with and without HTML
// escaping), URL-encoded (query and path escaping) and base64-encoded alone
// (standard, unpadded and URL alphabets); and each of those inside a JSON
// string, once or twice. The wire forms ("Bearer …",
// "Basic base64(user:password)") are values of their own (ClientSecrets), so
// they get every form too. Any other \uXXXX spelling of a JSON form (every
// character escaped, some, upper-case hex, surrogate pairs, "\/") is folded
// to the canonical one before the check (String). Not guaranteed: hex,
// another letter case, base64 of the secret inside a longer text, and any
// other transformation a target may apply.
func forms(v string) []string {
	out := []string{v}
	if t := strings.TrimSpace(v); t != v && t != "" {
		out = append(out, t)
	}
	for _, base := range slices.Clone(out) {
		out = append(out, url.QueryEscape(base), url.PathEscape(base),
			base64.StdEncoding.EncodeToString([]byte(base)),
			base64.RawStdEncoding.EncodeToString([]byte(base)),
			base64.RawURLEncoding.EncodeToString([]byte(base)))
	}
	// Each of them inside a JSON string, and inside a JSON string that is
	// itself quoted in JSON (an error message quoting an upstream body).
	for _, f := range slices.Clone(out) {
		for _, html := range []bool{true, false} {
			once := jsonEscaped(f, html)
			out = append(out, once, jsonEscaped(once, html))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// jsonEscaped is s as a JSON string's content, without the quotes.
func jsonEscaped(s string, html bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if enc.Encode(s) != nil {
		return s
	}
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// String returns s with every secret replaced by Placeholder.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	st := r.state.Load()
	if st == nil || st.r == nil {
		return s
	}
	out := st.r.Replace(s)
	// A secret a target spelled with \u escapes (every character, some,
	// surrogate pairs) reads as the secret: the check sees the text with
	// those escapes folded to the canonical JSON spelling, and when that
	// held a secret the text is shown in that folded form, scrubbed.
	if strings.Contains(out, `\u`) || strings.Contains(out, `\/`) {
		if folded := foldJSONEscapes(out); folded != out {
			if scrubbed := st.r.Replace(folded); scrubbed != folded {
				return scrubbed
			}
		}
	}
	return out
}

// foldJSONEscapes rewrites the \uXXXX escapes of s (a surrogate pair as one
// character) and "\/" in the canonical spelling encoding/json writes without
// HTML escaping: the character itself, or \" \\ \n … where JSON needs an
// escape. An escape inside a JSON string quoted in JSON (\\uXXXX) is folded
// to the canonical spelling quoted twice, as forms writes json-of-json. Any
// other text is kept as it is.
func foldJSONEscapes(s string) string {
	var b strings.Builder
	i := 0
	for i < len(s) {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			i++
			continue
		}
		k := 0 // the run of backslashes
		for i+k < len(s) && s[i+k] == '\\' {
			k++
		}
		rest := s[i+k:]
		// An odd run ends in an escape of one level; an even one, in an
		// escape of a string quoted twice (k=2: \\uXXXX).
		keep, depth := k-1, 1
		if k%2 == 0 {
			keep, depth = k-2, 2
		}
		r, n := escapedRune(rest, strings.Repeat(`\`, depth), depth)
		if n == 0 {
			b.WriteString(s[i : i+k])
			i += k
			continue
		}
		b.WriteString(s[i : i+keep])
		e := jsonEscaped(string(r), false)
		if depth == 2 {
			e = jsonEscaped(e, false)
		}
		b.WriteString(e)
		i += k + n
	}
	return b.String()
}

// escapedRune decodes the escape that starts rest, after the backslashes of
// its level ("/" or "uXXXX", with a following low surrogate spelled with the
// same backslashes, lead): the rune and the bytes of rest consumed, 0 when
// rest starts no such escape.
func escapedRune(rest, lead string, depth int) (rune, int) {
	if strings.HasPrefix(rest, "/") {
		return '/', 1
	}
	hex4 := func(t string) (rune, bool) {
		if len(t) < 5 || t[0] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(t[1:5], 16, 32)
		return rune(v), err == nil
	}
	r, ok := hex4(rest)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if low, ok := hex4(strings.TrimPrefix(rest[5:], lead)); ok && strings.HasPrefix(rest[5:], lead) {
			if p := utf16.DecodeRune(r, low); p != utf8.RuneError {
				return p, 5 + len(lead) + 5
			}
		}
		return 0, 0 // a lone surrogate is no character
	}
	return r, 5
}

// MaxLen is the length of the longest text the Redactor scrubs (0: none). A
// text cut at n bytes must be scrubbed before the cut, or read to n+MaxLen
// bytes first, so that no secret straddles the cut (Cut).
func (r *Redactor) MaxLen() int {
	if r == nil {
		return 0
	}
	if st := r.state.Load(); st != nil {
		return st.maxLen
	}
	return 0
}

// Cut scrubs s, then keeps at most n bytes of it, cut at a rune boundary,
// with "…" when cut. It is the one way to shorten a text a target sent:
// scrubbing first means no part of a secret straddling the cut survives.
func (r *Redactor) Cut(s string, n int) string {
	s = r.String(s)
	if len(s) <= n {
		return s
	}
	b := s[:n]
	for k := 1; k <= utf8.UTFMax && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRuneInString(b[len(b)-k:]) {
				b = b[:len(b)-k] // a rune cut in two
			}
			break
		}
	}
	return b + "…"
}

// ScrubTail returns s scrubbed, with a tail that is the start of a secret
// (at least MinSecretLen bytes of it) replaced by Placeholder. A text that
// ends where a stream broke, or where a timeout cut it, may end in the
// middle of an echoed secret, which no exact match finds.
func (r *Redactor) ScrubTail(s string) string {
	s = r.String(s)
	if r == nil {
		return s
	}
	st := r.state.Load()
	if st == nil {
		return s
	}
	// A cut may also fall inside an escape (`…\u00`): the secret's start
	// before it is what counts.
	t := trimPartialEscape(s)
	best := 0
	for _, f := range st.secrets {
		for k := min(len(f)-1, len(t)); k >= minSecretLen && k > best; k-- {
			if strings.HasSuffix(t, f[:k]) {
				best = k
				break
			}
		}
	}
	if best == 0 {
		return s
	}
	return t[:len(t)-best] + Placeholder
}

// trimPartialEscape is s without a JSON escape cut short at its end ("\",
// "\u", "\u0" … "\u002").
func trimPartialEscape(s string) string {
	i := strings.LastIndexByte(s, '\\')
	if i < 0 || len(s)-i > 5 {
		return s
	}
	tail := s[i+1:]
	if tail == "" {
		return s[:i]
	}
	if tail[0] != 'u' {
		return s
	}
	for _, c := range tail[1:] {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return s
		}
	}
	return s[:i]
}

// Label returns the value a label, or a page field, may hold for s, a string
// a target sent (a model id, a model_name label value, a version): s, or
// Placeholder alone when s held a secret (held is then true, and the caller
// warns, naming the target and the field, never the value). A label value
// partly scrubbed would still identify the secret's surroundings; the fixed
// placeholder keeps the series count bounded too.
func (r *Redactor) Label(s string) (v string, held bool) {
	if t := r.String(s); t != s {
		return Placeholder, true
	}
	return s, false
}

// Error returns err's text scrubbed, "" for nil.
func (r *Redactor) Error(err error) string {
	if err == nil {
		return ""
	}
	return r.String(err.Error())
}

// Header scrubs h in place: the values of credential-carrying headers
// (SensitiveHeader) become Placeholder whatever they hold, every other value
// loses its secrets.
func (r *Redactor) Header(h http.Header) {
	for k, vs := range h {
		sensitive := SensitiveHeader(k)
		for i, v := range vs {
			if sensitive {
				vs[i] = Placeholder
			} else {
				vs[i] = r.String(v)
			}
		}
	}
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

// SensitiveHeader reports whether the header named name carries credentials
// by its nature (Authorization, Cookie, API keys), so that its value is never
// shown.
func SensitiveHeader(name string) bool { return sensitiveHeaders[http.CanonicalHeaderKey(name)] }
