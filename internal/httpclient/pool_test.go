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

// countingServer serves h and counts the connections it saw closed; it is
// closed when t ends.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	closed := new(atomic.Int32)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, closed
}

func TestPoolLastReleaseClosesIdleConnections(t *testing.T) {
	srv, closed := countingServer(t, func(http.ResponseWriter, *http.Request) {})
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

// TestIdleTimeoutClosesSpare: a target whose two requests overlapped holds
// two connections; under SetIdleTimeout the one left unused is closed, where
// common/config's 5 minutes would keep both.
func TestIdleTimeoutClosesSpare(t *testing.T) {
	both := make(chan struct{})
	var arrived atomic.Int32
	srv, closed := countingServer(t, func(http.ResponseWriter, *http.Request) {
		if arrived.Add(1) == 2 {
			close(both)
		}
		<-both // the two requests overlap: two connections
	})
	p := New(nil)
	p.SetIdleTimeout(200 * time.Millisecond)
	c, err := p.Acquire(commoncfg.HTTPClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(c)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := c.Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for closed.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the 2 idle connections closed 5 s after their last use, with a 200 ms idle timeout", closed.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := IdleTimeoutFor(15 * time.Second); got != time.Minute {
		t.Errorf("IdleTimeoutFor(15s) = %v, want 1m", got)
	}
	if got := IdleTimeoutFor(90 * time.Second); got != 3*time.Minute {
		t.Errorf("IdleTimeoutFor(90s) = %v, want 3m", got)
	}
	if got := IdleTimeoutFor(time.Hour); got != 5*time.Minute {
		t.Errorf("IdleTimeoutFor(1h) = %v, want 5m", got)
	}
}
