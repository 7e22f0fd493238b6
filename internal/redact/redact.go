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
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Placeholder replaces every secret. It is what Prometheus' config.Secret
// marshals as, so /config reads the same either way.
const Placeholder = "<secret>"

// minSecretLen is the shortest value scrubbed: shorter ones would mangle
// innocent text (a one-letter password would scrub every "a"). Credentials
// that short are refused by no server but protect nothing either.
const minSecretLen = 4

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
	r *strings.Replacer // nil: nothing to scrub
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
	for _, v := range all {
		for _, form := range forms(v) {
			if len(form) < minSecretLen || slices.Contains(r.learned, form) {
				continue
			}
			r.learned = append(r.learned, form)
			changed = true
		}
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
	r.state.Store(&state{r: strings.NewReplacer(pairs...)})
}

// forms are the texts a value may appear as: itself and, when it has
// surrounding white space (a credential file's trailing newline), trimmed.
func forms(v string) []string {
	if t := strings.TrimSpace(v); t != v {
		return []string{v, t}
	}
	return []string{v}
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
	return st.r.Replace(s)
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
