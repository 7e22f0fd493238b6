package reliability

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	stdlog "log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/testutil"
)

// testClient sends the test's own requests. It keeps no idle connection, so
// that the goroutine counts of the fault matrix see only the daemon's.
var testClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// syncBuffer is a log sink safe for concurrent writers and readers.
type syncBuffer struct{ testutil.LogBuffer }

// debugLogger logs everything, debug included, to the returned buffer.
func debugLogger() (log.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return level.NewFilter(log.NewLogfmtLogger(buf), level.AllowAll()), buf
}

// startSim runs an in-process vllm_sim that requires key on /v1/*.
func startSim(t *testing.T, key string) (*simulator.Simulator, *httptest.Server) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.APIKey = key
	cfg.TTFT = 5 * time.Millisecond
	cfg.ITL = time.Millisecond
	cfg.BatchSlowdown = 0
	// Over the prober's 1 MiB line bound, so that huge_line is malformed.
	cfg.HugeLineBytes = 2 << 20
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		_ = sim.Close() // ends stalled and hung streams first
		srv.Close()
	})
	return sim, srv
}

// adminConfig POSTs settings to a simulator's /admin/config.
func adminConfig(t *testing.T, simURL string, settings map[string]any) {
	t.Helper()
	body, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := testClient.Post(simURL+"/admin/config", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST /admin/config %s: %v", body, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /admin/config %s = %d %s", body, resp.StatusCode, b)
	}
}

// startHostile is a vLLM-shaped endpoint that answers every /v1/* request other
// than /v1/models, and /metrics, with status and an error that echoes the
// Authorization header it received, in the body and in response headers, as
// some gateways do.
func hostile(status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		key := strings.TrimPrefix(auth, "Bearer ")
		switch r.URL.Path {
		case "/health", "/ping":
			w.WriteHeader(http.StatusOK)
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model"}]}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Www-Authenticate", "Bearer realm="+auth)
			w.Header().Set("X-Echo-Authorization", auth)
			w.Header().Set("Retry-After", "1")
			if status == http.StatusTooManyRequests {
				// A key refused by its quota, as OpenAI-style APIs say it: a 429
				// with Retry-After alone would read as a gateway shedding load.
				w.Header().Set("X-Ratelimit-Limit-Requests", "1")
			}
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":"key %s rejected (Authorization: %s)","type":"HostileError","param":null,"code":%d}}`,
				key, auth, status)
		}
	})
}

// slowHeaders accepts requests and never answers /v1/* (headers included)
// until the client leaves or done is closed.
func slowHeaders(done <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health", "/ping":
			w.WriteHeader(http.StatusOK)
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model"}]}`)
		default:
			// Reading the body lets net/http notice the client leaving (it only
			// watches the connection once the body is consumed).
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-done:
			}
		}
	})
}

// switchable is one loopback address serving HTTPS whose behaviour a test
// switches: it serves a handler with httptest's certificate (which the victim
// trusts), serves with a fresh self-signed certificate nobody trusts, or refuses
// connections (nothing listens). Every switch closes every connection of the
// previous mode, so no idle connection survives a fault.
type switchable struct {
	t    *testing.T
	addr string
	ca   []byte // PEM of the trusted certificate

	mu  sync.Mutex
	h   http.Handler
	srv *httptest.Server // nil while refusing

	connMu sync.Mutex
	conns  map[string]string // open connection (remote address) -> X-Generation of its last request
}

func newSwitchable(t *testing.T, h http.Handler) *switchable {
	t.Helper()
	s := &switchable{t: t, h: h}
	s.start(nil)
	s.addr = s.srv.Listener.Addr().String()
	s.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	t.Cleanup(func() {
		if s.srv != nil {
			s.srv.CloseClientConnections()
			s.srv.Close()
		}
	})
	return s
}

// URL is the address's URL, whatever the mode.
func (s *switchable) URL() string { return "https://" + s.addr }

func (s *switchable) serve(w http.ResponseWriter, r *http.Request) {
	s.connMu.Lock()
	if s.conns == nil {
		s.conns = map[string]string{}
	}
	s.conns[r.RemoteAddr] = r.Header.Get("X-Generation")
	s.connMu.Unlock()
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// connState forgets a connection when it closes.
func (s *switchable) connState(c net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		s.connMu.Lock()
		delete(s.conns, c.RemoteAddr().String())
		s.connMu.Unlock()
	}
}

// openConns counts the open connections that have served a request, by the
// X-Generation header of their last request ("" when it had none).
func (s *switchable) openConns() map[string]int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	out := map[string]int{}
	for _, gen := range s.conns {
		out[gen]++
	}
	return out
}

// start listens on s.addr (any port when empty) with cert (httptest's when nil).
func (s *switchable) start(cert *tls.Certificate) {
	s.t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // TLS handshake errors are the point
	srv.Config.ConnState = s.connState
	if cert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	if s.addr != "" {
		// The port was just freed; binding it again may need a moment.
		var l net.Listener
		var err error
		for range 50 {
			if l, err = net.Listen("tcp", s.addr); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			s.t.Fatalf("listening on %s again: %v", s.addr, err)
		}
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.StartTLS()
	s.srv = srv
}

// Set switches the mode: serve h with cert (the trusted one when nil), or
// refuse connections.
func (s *switchable) Set(h http.Handler, cert *tls.Certificate, refuse bool) {
	s.t.Helper()
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
		s.srv = nil
	}
	if !refuse {
		s.start(cert)
	}
}

// selfSigned returns a certificate for 127.0.0.1 signed by itself.
func selfSigned(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "hostile"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// metrics is one gathering of a registry, indexed for lookups.
type metrics []*dto.MetricFamily

func gather(t *testing.T, g prometheus.Gatherer) metrics {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	return mfs
}

// value sums the samples of family name whose labels include every pair of want
// (counters, gauges and untyped); ok is false when no sample matched.
func (m metrics) value(name string, want map[string]string) (sum float64, ok bool) {
	for _, mf := range m {
		if mf.GetName() != name {
			continue
		}
	samples:
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range s.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue samples
				}
			}
			ok = true
			switch {
			case s.Counter != nil:
				sum += s.GetCounter().GetValue()
			case s.Gauge != nil:
				sum += s.GetGauge().GetValue()
			case s.Untyped != nil:
				sum += s.GetUntyped().GetValue()
			}
		}
	}
	return sum, ok
}

// get fetches path from srv and returns the status and body.
func get(ctx context.Context, t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
