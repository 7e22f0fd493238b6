package prober

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
)

// TestSleepCheckWithinTheProbeDeadline: a probe that fails with an HTTP
// error near its deadline asks GET /is_sleeping within what is left of that
// deadline, not for up to 2 s more: a target that is slow to answer it
// cannot hold the pair past the probe's timeout.
func TestSleepCheckWithinTheProbeDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/is_sleeping":
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, `{"is_sleeping": true}`)
		default:
			time.Sleep(300 * time.Millisecond)
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"boom"}}`)
		}
	}))
	defer srv.Close()
	cfg, err := config.Load(fmt.Appendf(nil, `
global: {probe_timeout: 600ms}
modules:
  m: {prober: completions, prompt: hi, max_tokens: 2}
targets:
  - {name: t, url: %q, model: m, scrape_metrics: false}
`, srv.URL), "")
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, _, err := m.ProbeNow(context.Background(), "t", "m")
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took > 900*time.Millisecond {
		t.Errorf("the probe (timeout 600ms) and its sleep check took %v", took)
	}
	t.Logf("reason %s, took %v", res.Reason, took)
}
