package httpclient

import (
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

func TestPoolSharesEqualConfigs(t *testing.T) {
	c := New(nil)
	a, err := c.Acquire(bearer("one"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(bearer("one"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("equal configurations got different clients")
	}
	// Secrets marshal alike; the clients must still differ.
	other, err := c.Acquire(bearer("two"))
	if err != nil {
		t.Fatal(err)
	}
	if other == a {
		t.Error("configurations differing in their credentials share a client")
	}
	plain, err := c.Acquire(commoncfg.HTTPClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if plain == a || plain == other {
		t.Error("different configurations share a client")
	}
	c.Release(a)
	if again, _ := c.Acquire(bearer("one")); again != a {
		t.Error("a client still held was dropped")
	} else {
		c.Release(again)
	}
	c.Release(b)
	if _, ok := c.byPtr[a]; ok {
		t.Error("the last release kept the client")
	}
	if fresh, _ := c.Acquire(bearer("one")); fresh == a {
		t.Error("a released client was handed out again")
	}
	c.Release(other)
	c.Release(plain)
	if len(c.buckets) != 1 || len(c.byPtr) != 1 {
		t.Errorf("after releasing all but one: %d buckets, %d clients; want 1, 1", len(c.buckets), len(c.byPtr))
	}
}

func TestPoolLastReleaseClosesIdleConnections(t *testing.T) {
	var closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := New(nil)
	a, _ := c.Acquire(commoncfg.HTTPClientConfig{})
	b, _ := c.Acquire(commoncfg.HTTPClientConfig{})
	resp, err := a.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.Release(a)
	// Another holder remains: its idle connection stays open. The server
	// would see a close within milliseconds; allow for a slow machine below.
	if n := closed.Load(); n != 0 {
		t.Fatalf("%d connections closed while the client was still held", n)
	}
	c.Release(b)
	for deadline := time.Now().Add(10 * time.Second); closed.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the last release did not close the idle connection")
		}
	}
}
