package redact

import "net/http"

// Transport wraps next so that r learns the credentials of every request
// that passes: the values of its credential-carrying headers (SensitiveHeader).
// Placed below an OAuth2 round tripper, it learns the tokens obtained, which
// no configuration holds.
func Transport(next http.RoundTripper, r *Redactor) http.RoundTripper {
	return &learner{next: next, r: r}
}

type learner struct {
	next http.RoundTripper
	r    *Redactor
}

func (l *learner) RoundTrip(req *http.Request) (*http.Response, error) {
	for k, vs := range req.Header {
		if SensitiveHeader(k) {
			l.r.Learn(vs...)
		}
	}
	return l.next.RoundTrip(req)
}

// CloseIdleConnections closes next's idle connections.
func (l *learner) CloseIdleConnections() {
	if c, ok := l.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
