package reliability

import (
	"runtime"
	"testing"
	"time"
)

// TestCollectorClosesIdleConnections is the regression test of a bug this
// package found: the collector did not close the idle keep-alive connections
// of an HTTP client it dropped (on a reload that changes a target, and when
// Run returns), unlike the prober. Each reload of a changed target left one
// idle connection (three goroutines: the client's read and write loops and
// the server's conn.serve) for the transport's idle timeout, and Run left
// every scraped target's connection behind. The fault matrix counts busy
// goroutines and so does not see it; this test counts all.
func TestCollectorClosesIdleConnections(t *testing.T) {
	m := newMatrix(t)
	defer m.stop()
	floor := func() int {
		n := runtime.NumGoroutine()
		for range 10 {
			time.Sleep(20 * time.Millisecond)
			n = min(n, runtime.NumGoroutine())
		}
		return n
	}
	g0 := floor()
	for range 3 {
		m.setVictimURL("https://vllm-victim.invalid:8443")
		time.Sleep(time.Second)
		m.setVictimURL(m.sw.URL())
		if !waitFor(15*time.Second, func() bool { return m.recovered(time.Now().Add(-500*time.Millisecond), true) }) {
			t.Fatal("the victim did not recover")
		}
	}
	var g int
	// One connection (three goroutines) more than at the start is allowed: the
	// prober, the collector and the health checks share one pool per client
	// configuration (internal/httpclient), and two of their requests that
	// overlap on a loaded machine open a second keep-alive connection, idle
	// afterwards. The bug leaked one connection per reload: nine goroutines here.
	if !waitFor(5*time.Second, func() bool { g = floor(); return g <= g0+3 }) {
		t.Errorf("3 reloads changing the victim's URL and back: goroutines %d -> %d:\n%s", g0, g, goroutineDump())
	}
	m.stop()
	if !waitFor(5*time.Second, func() bool { g = floor(); return g <= m.before+2 }) {
		t.Errorf("%d goroutines before Run, %d after it returned:\n%s", m.before, g, goroutineDump())
	}
}
