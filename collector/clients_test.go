package collector

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
)

func bearer(token string) commoncfg.HTTPClientConfig {
	return commoncfg.HTTPClientConfig{Authorization: &commoncfg.Authorization{Type: "Bearer", Credentials: commoncfg.Secret(token)}}
}

func TestClientCacheSharesEqualConfigs(t *testing.T) {
	c := newClientCache()
	a, err := c.acquire(bearer("one"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.acquire(bearer("one"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("equal configurations got different clients")
	}
	// Secrets marshal alike; the clients must still differ.
	other, err := c.acquire(bearer("two"))
	if err != nil {
		t.Fatal(err)
	}
	if other == a {
		t.Error("configurations differing in their credentials share a client")
	}
	plain, err := c.acquire(commoncfg.HTTPClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if plain == a || plain == other {
		t.Error("different configurations share a client")
	}
	c.release(a)
	if again, _ := c.acquire(bearer("one")); again != a {
		t.Error("a client still held was dropped")
	} else {
		c.release(again)
	}
	c.release(b)
	if _, ok := c.byPtr[a]; ok {
		t.Error("the last release kept the client")
	}
	if fresh, _ := c.acquire(bearer("one")); fresh == a {
		t.Error("a released client was handed out again")
	}
	c.release(other)
	c.release(plain)
	if len(c.buckets) != 1 || len(c.byPtr) != 1 {
		t.Errorf("after releasing all but one: %d buckets, %d clients; want 1, 1", len(c.buckets), len(c.byPtr))
	}
}

func TestClientCacheLastReleaseClosesIdleConnections(t *testing.T) {
	var closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClientCache()
	a, _ := c.acquire(commoncfg.HTTPClientConfig{})
	b, _ := c.acquire(commoncfg.HTTPClientConfig{})
	resp, err := a.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.release(a)
	// Another holder remains: its idle connection stays open. The server
	// would see a close within milliseconds; allow for a slow machine below.
	if n := closed.Load(); n != 0 {
		t.Fatalf("%d connections closed while the client was still held", n)
	}
	c.release(b)
	for deadline := time.Now().Add(10 * time.Second); closed.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the last release did not close the idle connection")
		}
	}
}

func TestManagerSharesClients(t *testing.T) {
	const base = `
modules:
  short: {prober: completions, prompt: hi}
targets:
  - {name: a, url: "http://127.0.0.1:1"}
`
	m := NewManager(nil, nil, nil, nil)
	if err := m.Apply(testConfig(t, base+`  - {name: b, url: "http://127.0.0.1:2"}
  - name: c
    url: "http://127.0.0.1:3"
    http_client_config: {authorization: {credentials: secret}}
`)); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	a, b, c := m.targets["a"].client, m.targets["b"].client, m.targets["c"].client
	m.mu.Unlock()
	if a != b {
		t.Error("targets a and b, of equal HTTP client config, have different clients")
	}
	if c == a {
		t.Error("target c, with credentials, shares the client of a")
	}
	// Dropping b and c keeps a's client, held once; a itself keeps its scraper.
	if err := m.Apply(testConfig(t, base)); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.targets["a"].client != a {
		t.Error("the unchanged target a got a new client")
	}
	if s := m.clients.byPtr[a]; s == nil || s.refs != 1 {
		t.Errorf("a's client after dropping b and c: %+v, want 1 holder", s)
	}
	if len(m.clients.byPtr) != 1 {
		t.Errorf("%d clients held, want 1", len(m.clients.byPtr))
	}
}

func TestScrapeOffset(t *testing.T) {
	const interval = 15 * time.Second
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		name := fmt.Sprintf("t%04d", i)
		off := scrapeOffset(name, interval)
		if off <= 0 || off > interval {
			t.Fatalf("scrapeOffset(%q) = %v, want in (0, %v]", name, off, interval)
		}
		if again := scrapeOffset(name, interval); again != off {
			t.Fatalf("scrapeOffset(%q) = %v then %v, want stable", name, off, again)
		}
		seen[off/(interval/100)] = true
	}
	// 1,000 targets over 100 slices of the interval: all of them get some.
	if len(seen) < 100 {
		t.Errorf("offsets of 1,000 targets fell in %d of 100 slices of the interval", len(seen))
	}
}
