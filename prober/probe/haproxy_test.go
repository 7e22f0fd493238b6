package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// TestHAProxyShedAndQueueTimeout puts a real HAProxy (Debian's, with
// `option http-no-delay` so that SSE streams through) in front of one slow
// streaming backend with one slot: while a probe holds the slot, probes that
// wait in HAProxy's queue past `timeout queue` get its 503 page (http_5xx,
// answered by the gateway: no x-served-by), and a probe arriving while two
// wait gets its 429 with Retry-After (shed). The probe that holds the slot
// succeeds and names its server.
func TestHAProxyShedAndQueueTimeout(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		testtool.Skip(t, "haproxy", "apt-get install haproxy")
	}
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, tok1)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Second):
		}
		_, _ = io.WriteString(w, tok2+done)
	}))
	defer backend.Close()
	defer close(release)
	port := testtool.HAProxy(t, func(port int) string {
		return fmt.Sprintf(`global
  maxconn 200
defaults
  mode http
  option http-no-delay
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout queue 1500ms
frontend llm
  bind 127.0.0.1:%d
  http-request return status 429 content-type application/json hdr retry-after 1 string "{\"error\":{\"message\":\"gateway queue full\",\"type\":\"overloaded\"}}" if { queue(vllm) ge 2 }
  default_backend vllm
backend vllm
  http-response set-header x-served-by %%s
  server b1 %s maxconn 1
`, port, backend.Listener.Addr())
	})

	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	probe := func() Result {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return Stream(ctx, &http.Client{Transport: &http.Transport{}}, StreamRequest{Gateway: true,
			BaseURL: url, Kind: config.ProberCompletions,
			Body: map[string]any{"model": "m", "prompt": "p", "max_tokens": 2},
		})
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results []Result
	)
	launch := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := probe()
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		}()
	}
	launch() // holds the only slot
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the first probe never reached the backend")
	}
	launch() // queued
	launch() // queued
	time.Sleep(300 * time.Millisecond)
	shed := probe() // two wait: refused at once
	wg.Add(1)
	go func() { // the holder ends once the queued ones have timed out
		defer wg.Done()
		time.Sleep(2500 * time.Millisecond)
		release <- struct{}{}
	}()
	wg.Wait()

	if shed.Reason != ReasonShed || shed.StatusCode != http.StatusTooManyRequests {
		t.Errorf("429 with Retry-After through HAProxy: reason %q status %d (%s), want shed", shed.Reason, shed.StatusCode, shed.Err)
	}
	var ok, timedOut int
	for _, r := range results {
		switch {
		case r.Success:
			ok++
			if m := Member(&r, "X-Served-By"); m != "b1" {
				t.Errorf("successful probe: member %q, want b1", m)
			}
		case r.Reason == ReasonHTTP5xx && r.StatusCode == http.StatusServiceUnavailable:
			timedOut++
			if m := Member(&r, "X-Served-By"); m != "" {
				t.Errorf("queue-timeout 503 attributed to backend %q, want the gateway's own answer", m)
			}
		default:
			t.Errorf("unexpected probe result: reason %q status %d (%s)", r.Reason, r.StatusCode, r.Err)
		}
	}
	if ok != 1 || timedOut != 2 {
		t.Errorf("%d successes and %d queue timeouts, want 1 and 2", ok, timedOut)
	}
}
