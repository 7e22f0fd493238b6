package reliability

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestCollectorClosesIdleConnections is the regression test of a bug this
// package found: the collector did not close the idle keep-alive connections
// of an HTTP client it dropped (on a reload that changes a target, and when
// Run returns), unlike the prober. Each reload left one idle connection for
// the transport's idle timeout (90s), and Run left every scraped target's
// connection behind.
//
// Clients now come from one pool per client configuration (internal/httpclient),
// shared by the prober, the collector and the health checks. Each reload here
// gives the victim a new client configuration (an X-Generation header), so the
// previous pool loses its last user and must close its connections; requests
// still running on it end on a connection that closes instead of going idle.
// The victim's server knows which generation each open connection served, so
// the test asserts exactly that no older generation's connection stays open,
// not a goroutine count that a loaded machine makes noisy (two requests that
// overlap open a second, legitimate, connection in the current pool).
func TestCollectorClosesIdleConnections(t *testing.T) {
	m := newMatrix(t)
	defer m.stop()
	const gens = 3
	for gen := 1; gen <= gens; gen++ {
		m.setVictimGeneration(gen)
		reloaded := time.Now()
		if !waitFor(15*time.Second, func() bool { return m.recovered(reloaded, true) }) {
			t.Fatalf("generation %d: the victim did not succeed a probe and a scrape after the reload", gen)
		}
	}
	current := fmt.Sprint(gens)
	stale := func() map[string]int {
		out := map[string]int{}
		for gen, n := range m.sw.openConns() {
			if gen != current {
				out[gen] = n
			}
		}
		return out
	}
	// A request of an older generation that was running at its reload may
	// still be finishing: within a probe timeout (here 500ms).
	if !waitFor(5*time.Second, func() bool { return len(stale()) == 0 }) {
		t.Errorf("after %d reloads, connections of older client configurations still open (generation: count, \"\" is the first): %v; all open: %v",
			gens, stale(), m.sw.openConns())
	}
	if n := m.sw.openConns()[current]; n == 0 {
		t.Errorf("no open connection of the current generation %s: the test saw nothing (open: %v)", current, m.sw.openConns())
	}
	m.stop()
	// After Run, nothing of the daemon is left: every goroutine counts, idle
	// connections' included (the control targets' too).
	floor := func() int {
		n := runtime.NumGoroutine()
		for range 10 {
			time.Sleep(20 * time.Millisecond)
			n = min(n, runtime.NumGoroutine())
		}
		return n
	}
	var g int
	if !waitFor(5*time.Second, func() bool { g = floor(); return g <= m.before+2 }) {
		t.Errorf("%d goroutines before Run, %d after it returned:\n%s", m.before, g, goroutineDump())
	}
	if open := m.sw.openConns(); len(open) != 0 {
		t.Errorf("connections to the victim still open after Run returned: %v", open)
	}
}
