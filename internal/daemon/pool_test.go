package daemon

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestOnePoolForProberAndCollector: the prober (its probes and its /v1/models
// check) and the collector (its scrapes) reach a target over one connection
// pool (internal/httpclient), not one pool each. With a pool per package the
// connections that carried a completion never carry a scrape; with one pool an
// idle connection left by one is taken by the other. The target is a vllm_sim
// that records which client connection (remote address) each request came on.
func TestOnePoolForProberAndCollector(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.TTFT, cfg.ITL = time.Millisecond, time.Millisecond
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	handler := sim.Handler()
	var mu sync.Mutex
	byPath := map[string]map[string]bool{} // path → remote addresses
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if byPath[r.URL.Path] == nil {
			byPath[r.URL.Path] = map[string]bool{}
		}
		byPath[r.URL.Path][r.RemoteAddr] = true
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	shared := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		// /metrics (and /version) only the collector asks for; /health and
		// the completions only the prober (both ask for /v1/models).
		for addr := range byPath["/metrics"] {
			if byPath["/v1/completions"][addr] || byPath["/health"][addr] {
				return addr, true
			}
		}
		return "", false
	}

	path := filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, path, fmt.Sprintf(`
global: {probe_interval: 150ms, scrape_interval: 200ms, scrape_timeout: 150ms, stall_timeout: 5s}
modules:
  m: {prober: completions, prompt: hi, max_tokens: 2}
targets:
  - {name: sim, url: %s}
`, srv.URL))
	f := &fixture{t: t, path: path}
	f.start(Options{ConfigFile: path, HistoryLimit: 5})
	waitFor(t, 10*time.Second, "a connection that carried both a scrape and a prober request", func() bool {
		_, ok := shared()
		return ok
	})
	f.stop()
}
