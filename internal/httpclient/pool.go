// Package httpclient is vllm_prober's one owner of HTTP clients: one Pool
// hands out one *http.Client (one Transport, one connection pool) per
// distinct http_client_config, shared by the prober, the collector and
// discovery, each sending the one User-Agent vllm_prober/<version>. Clients
// teach the Pool's redact.Redactor the credentials they put on the wire that
// no configuration holds (OAuth2 tokens).
package httpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/version"

	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// UserAgent is the User-Agent of every request vllm_prober sends.
func UserAgent() string {
	v := version.Version
	if v == "" {
		v = "unknown"
	}
	return "vllm_prober/" + v
}

// maxBucket bounds how many distinct configurations that marshal alike (they
// differ only in secrets, which marshal as "<secret>") a Pool compares
// against, so that acquiring stays linear in the number of targets.
const maxBucket = 16

// Pool shares one *http.Client between the holders of equal HTTP client
// configurations. Without it every target has a Transport of its own, and
// each keeps its own idle keep-alive connection with two goroutines and two
// 4 KiB buffers; with a Pool per package, every target had one per package.
// It is safe for concurrent use.
type Pool struct {
	red *redact.Redactor
	// idle is how long the clients built from now on keep an unused
	// keep-alive connection (SetIdleTimeout); 0: common/config's 5 min.
	idle atomic.Int64

	mu      sync.Mutex
	buckets map[string][]*shared // by the marshalled configuration
	byPtr   map[*http.Client]*shared
}

type shared struct {
	key    string
	cfg    commoncfg.HTTPClientConfig
	client *http.Client
	refs   int
	source string // the redactor source of its credential files ("": none)
}

// New returns a Pool whose clients teach red (nil: none) the credentials
// they obtain on the wire.
func New(red *redact.Redactor) *Pool {
	return &Pool{red: red, buckets: map[string][]*shared{}, byPtr: map[*http.Client]*shared{}}
}

// Redactor returns the redact.Redactor the Pool's clients teach (nil: none),
// so that the holders of its clients scrub what their targets send with it.
func (p *Pool) Redactor() *redact.Redactor {
	if p == nil {
		return nil
	}
	return p.red
}

// SetIdleTimeout sets how long the clients built from now on keep a
// keep-alive connection nobody used (0: common/config's 5 minutes). A client
// keeps the timeout it was built with; clients of equal configurations
// built under different timeouts are not shared.
//
// A target whose probe and scrape overlap opens a second connection, which
// then stays idle while the first one serves every request (net/http reuses
// the connection used last): a timeout of a few intervals closes it, where
// common/config's 5 minutes keep it with its goroutines and buffers.
func (p *Pool) SetIdleTimeout(d time.Duration) { p.idle.Store(int64(d)) }

// IdleTimeout returns the timeout SetIdleTimeout set last (0: none).
func (p *Pool) IdleTimeout() time.Duration { return time.Duration(p.idle.Load()) }

// IdleTimeoutFor is the keep-alive timeout SetIdleTimeout should be given
// for targets requested at most every longest: two of their intervals, so
// that a connection in use survives one missed request, within 1 and 5
// minutes.
func IdleTimeoutFor(longest time.Duration) time.Duration {
	return min(max(2*longest, time.Minute), 5*time.Minute)
}

// Acquire returns a client for cfg, shared with the other holders of an
// equal configuration. Each Acquire must be paired with a Release.
func (p *Pool) Acquire(cfg commoncfg.HTTPClientConfig) (*http.Client, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		data = nil // not shareable by key: compared in the "" bucket
	}
	idle := time.Duration(p.idle.Load())
	key := strconv.FormatInt(int64(idle), 10) + " " + string(data)
	p.mu.Lock()
	defer p.mu.Unlock()
	bucket := p.buckets[key]
	for _, s := range bucket {
		if reflect.DeepEqual(s.cfg, cfg) {
			s.refs++
			return s.client, nil
		}
	}
	client, err := p.build(cfg, idle)
	if err != nil {
		return nil, fmt.Errorf("building HTTP client: %w", err)
	}
	s := &shared{key: key, cfg: cfg, client: client, refs: 1}
	p.guard(s)
	p.byPtr[client] = s
	if len(bucket) < maxBucket {
		p.buckets[key] = append(bucket, s)
	}
	return client, nil
}

// build makes a client as common/config's NewClientFromConfig does. With
// OAuth2, the OAuth2 round tripper is put on top of the rest by hand, with a
// redact.Transport between them that learns the tokens it obtains.
func (p *Pool) build(cfg commoncfg.HTTPClientConfig, idle time.Duration) (*http.Client, error) {
	opts := []commoncfg.HTTPClientOption{commoncfg.WithUserAgent(UserAgent())}
	if idle > 0 {
		opts = append(opts, commoncfg.WithIdleConnTimeout(idle))
	}
	if cfg.OAuth2 == nil {
		return commoncfg.NewClientFromConfig(cfg, "vllm_prober", opts...)
	}
	inner := cfg
	inner.OAuth2 = nil
	rt, err := commoncfg.NewRoundTripperFromConfig(inner, "vllm_prober", opts...)
	if err != nil {
		return nil, err
	}
	o := cfg.OAuth2
	var cred commoncfg.SecretReader
	switch {
	case o.GrantType == "urn:ietf:params:oauth:grant-type:jwt-bearer" && o.ClientCertificateKeyFile != "":
		cred = commoncfg.NewFileSecret(o.ClientCertificateKeyFile)
	case o.GrantType == "urn:ietf:params:oauth:grant-type:jwt-bearer":
		cred = commoncfg.NewInlineSecret(string(o.ClientCertificateKey))
	case o.ClientSecretFile != "":
		cred = commoncfg.NewFileSecret(o.ClientSecretFile)
	default:
		cred = commoncfg.NewInlineSecret(string(o.ClientSecret))
	}
	client := &http.Client{Transport: &oauth2Switch{cred: cred, cfg: o, next: redact.Transport(rt, p.red), opts: opts}}
	if !cfg.FollowRedirects {
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return client, nil
}

// guard adds the policies every client of the Pool keeps: no response
// whose headers exceed MaxResponseHeaderBytes reaches its caller (headerCap), no credential
// follows a redirect to another origin (CheckRedirect), a client without
// credentials stops at net/http's 10 redirects with a RedirectError
// (LimitRedirects), and the redactor knows the current value of every
// credential file (refresher).
func (p *Pool) guard(s *shared) {
	switch {
	case s.cfg.FollowRedirects && sendsCredentials(&s.cfg):
		s.client.CheckRedirect = CheckRedirect
	case s.cfg.FollowRedirects:
		s.client.CheckRedirect = LimitRedirects
	}
	s.client.Transport = &headerCap{next: s.client.Transport}
	if p.red != nil && len(redact.ClientFiles(&s.cfg)) > 0 {
		s.source = fmt.Sprintf("client %p", s)
		s.client.Transport = &refresher{next: s.client.Transport, red: p.red, source: s.source, cfg: s.cfg}
	}
}

// Release drops one hold on client; the last one closes its idle
// connections, whose goroutines would otherwise linger until the idle timeout.
// A nil or unknown client is ignored.
func (p *Pool) Release(client *http.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byPtr[client]
	if s == nil {
		return
	}
	s.refs--
	if s.refs > 0 {
		return
	}
	delete(p.byPtr, client)
	if s.source != "" {
		p.red.Set(s.source, nil)
	}
	bucket := p.buckets[s.key]
	for i, b := range bucket {
		if b == s {
			bucket = append(bucket[:i:i], bucket[i+1:]...)
			break
		}
	}
	if len(bucket) == 0 {
		delete(p.buckets, s.key)
	} else {
		p.buckets[s.key] = bucket
	}
	client.CloseIdleConnections()
}

// Len returns how many distinct clients the Pool holds.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byPtr)
}

// MaxResponseHeaderBytes bounds the response headers a target may send: a
// response whose header names and values exceed it fails with
// ErrResponseHeaderTooLarge, so that no record, history or sample of a
// target keeps more. common/config builds the http.Transport itself, with
// net/http's 10 MiB read limit: that limit bounds one read, this one what is
// kept.
const MaxResponseHeaderBytes = 64 << 10

// ErrResponseHeaderTooLarge is the failure of a response whose headers
// exceed MaxResponseHeaderBytes.
var ErrResponseHeaderTooLarge = errors.New("response headers too large")

// headerCap fails the responses whose headers exceed MaxResponseHeaderBytes.
type headerCap struct{ next http.RoundTripper }

func (h *headerCap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	n := 0
	for k, vs := range resp.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4 // "k: v\r\n"
		}
	}
	if n > MaxResponseHeaderBytes {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes, more than %d (HTTP %d)", ErrResponseHeaderTooLarge, n, MaxResponseHeaderBytes, resp.StatusCode)
	}
	return resp, nil
}

func (h *headerCap) CloseIdleConnections() {
	if c, ok := h.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
