package httpclient

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// maxRedirects is net/http's own bound, kept by CheckRedirect.
const maxRedirects = 10

// RedirectError is why a client did not follow a redirect: every refusal of
// the redirect policies below is one (client.Do wraps it in a *url.Error
// naming the refused location), so that a caller tells a redirect it did not
// follow from a connection failure. Nothing is sent to a refused location.
type RedirectError struct{ msg string }

func (e *RedirectError) Error() string { return e.msg }

// ErrCrossHostRedirect is why a client that sends credentials stopped at a
// redirect to another host.
var ErrCrossHostRedirect error = &RedirectError{"refusing to follow a redirect to another host, scheme or port: the configured credentials would be sent there"}

// errTooManyRedirects is net/http's own limit, as a RedirectError.
var errTooManyRedirects error = &RedirectError{"stopped after 10 redirects"}

// CheckRedirect is the redirect policy of every client that sends
// credentials: it follows a redirect only to the origin of the first request
// (the same host and port, and never from https to http), and refuses any
// other. prometheus/common strips only a fixed list of headers
// (Authorization, Cookie, ...) on a redirect to another host name, and none
// on one to another port of the same host: every http_headers entry (an
// X-Api-Key gateway key) went along. Refusing is the one rule that covers
// every credential, wherever a round tripper below adds it.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if err := LimitRedirects(req, via); err != nil {
		return err
	}
	if len(via) > 0 && !sameOrigin(via[0].URL, req.URL) {
		return ErrCrossHostRedirect
	}
	return nil
}

// LimitRedirects is the redirect policy of a client without credentials: it
// follows any redirect up to net/http's own bound of 10, and refuses the next
// with a RedirectError (net/http's own refusal is a plain error, which a
// caller cannot tell from a connection failure).
func LimitRedirects(_ *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return errTooManyRedirects
	}
	return nil
}

// RestrictRedirects returns a copy of client (its Transport shared) that
// follows a redirect only to a location allowed accepts, and there only as
// client itself would (its own policy: credentials stay on their origin,
// follow_redirects false follows none). A refused location is never sent
// a request: the error is a *RedirectError saying why (why: what does not
// allow it). The holder releases client, not the copy.
func RestrictRedirects(client *http.Client, allowed func(*url.URL) bool, why string) *http.Client {
	c := *client
	next := client.CheckRedirect
	refused := &RedirectError{"refusing to follow a redirect: " + why}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !allowed(req.URL) {
			return refused
		}
		if next != nil {
			return next(req, via)
		}
		return LimitRedirects(req, via)
	}
	return &c
}

// sameOrigin reports whether to may receive what was configured for from:
// the same host and port, and not a downgrade from https to http.
func sameOrigin(from, to *url.URL) bool {
	if from.Scheme == "https" && to.Scheme != "https" {
		return false
	}
	return strings.EqualFold(hostPort(from), hostPort(to))
}

func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// sendsCredentials reports whether cfg puts a credential on the requests to
// the target (proxy credentials go to the proxy only).
func sendsCredentials(cfg *commoncfg.HTTPClientConfig) bool {
	return cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.Authorization != nil ||
		cfg.BasicAuth != nil || cfg.OAuth2 != nil || (cfg.HTTPHeaders != nil && len(cfg.HTTPHeaders.Headers) > 0)
}

// refresher re-reads cfg's credential files around every request and
// teaches red their current values (source): prometheus/common reads them
// on every request, so a rotated file's new value goes on the wire at once,
// and the redactor must know it before the answer is read.
type refresher struct {
	next   http.RoundTripper
	red    *redact.Redactor
	source string
	cfg    commoncfg.HTTPClientConfig

	mu   sync.Mutex
	last []string
}

func (r *refresher) refresh() {
	secrets := redact.ClientSecrets(&r.cfg)
	slices.Sort(secrets)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil && slices.Equal(secrets, r.last) {
		return
	}
	r.last = secrets
	r.red.Set(r.source, secrets)
}

func (r *refresher) RoundTrip(req *http.Request) (*http.Response, error) {
	r.refresh()
	resp, err := r.next.RoundTrip(req)
	// Again: the file may have changed between the read above and the
	// client's own.
	r.refresh()
	return resp, err
}

// CloseIdleConnections closes next's idle connections.
func (r *refresher) CloseIdleConnections() {
	if c, ok := r.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// oauth2Switch is the OAuth2 round tripper of a client: one of
// prometheus/common's per value of the client secret, each built with that
// value inline and first used alone. common's own round tripper rebuilds
// its token source in place when the secret file changes (and on its first
// request), writing the oauth2.Transport that concurrent requests read: a
// data race when a client_secret_file rotates under concurrent probes.
type oauth2Switch struct {
	cred commoncfg.SecretReader
	cfg  *commoncfg.OAuth2
	next http.RoundTripper
	opts []commoncfg.HTTPClientOption

	mu     sync.Mutex
	secret string
	rt     http.RoundTripper
	warm   chan struct{} // closed once rt's first request set it up
}

func (o *oauth2Switch) RoundTrip(req *http.Request) (*http.Response, error) {
	secret, err := o.cred.Fetch(req.Context())
	if err != nil {
		return nil, fmt.Errorf("unable to read oauth2 client secret: %w", err)
	}
	o.mu.Lock()
	if o.rt == nil || secret != o.secret {
		if c, ok := o.rt.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections() // its token client's; requests in flight go on
		}
		o.secret = secret
		o.rt = commoncfg.NewOAuth2RoundTripper(commoncfg.NewInlineSecret(secret), o.cfg, o.next, o.opts...)
		o.warm = make(chan struct{})
		rt, warm := o.rt, o.warm
		o.mu.Unlock()
		// The first request sets the token source up; the others wait.
		defer close(warm)
		return rt.RoundTrip(req)
	}
	rt, warm := o.rt, o.warm
	o.mu.Unlock()
	select {
	case <-warm:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return rt.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the current round
// tripper and of next.
func (o *oauth2Switch) CloseIdleConnections() {
	o.mu.Lock()
	rt := o.rt
	o.mu.Unlock()
	for _, t := range []http.RoundTripper{rt, o.next} {
		if c, ok := t.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
}
