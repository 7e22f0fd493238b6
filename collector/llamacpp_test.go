package collector

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeLlamaServer answers as llama-server does: /metrics (the v0.4.0
// fixture, or its counters from zero once restarted), /v1/models, /props,
// and 404 for /version. It counts the requests of each path.
type fakeLlamaServer struct {
	*httptest.Server
	mu        sync.Mutex
	hits      map[string]int
	restarted bool
}

func newFakeLlamaServer(t *testing.T) *fakeLlamaServer {
	t.Helper()
	metrics := readFixture(t, "llamacpp-0.4.0.prom")
	props := readFixture(t, "llamacpp-0.4.0-props.json")
	f := &fakeLlamaServer{hits: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits[r.URL.Path]++
		restarted := f.restarted
		f.mu.Unlock()
		switch r.URL.Path {
		case "/metrics":
			body := metrics
			if restarted {
				body = bytes.ReplaceAll(body, []byte("llamacpp:prompt_tokens_total 45"), []byte("llamacpp:prompt_tokens_total 12"))
				body = bytes.ReplaceAll(body, []byte("llamacpp:tokens_predicted_total 56"), []byte("llamacpp:tokens_predicted_total 8"))
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write(body)
		case "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"small","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":4096}}]}`))
		case "/props":
			_, _ = w.Write(props)
		default:
			http.Error(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeLlamaServer) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[path]
}

// TestLlamaCppProps: llama-server's /props gives the version (build_info),
// the context length (n_ctx of a slot) and the slots (total_slots, the
// max_num_seqs of the batch-slot headroom when none is configured). It is
// asked once per target and again when the server restarts; /version,
// which llama-server does not serve, is not asked every 30 s for ever.
func TestLlamaCppProps(t *testing.T) {
	srv := newFakeLlamaServer(t)
	reg := prometheus.NewRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(testConfig(t, fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 1s}
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - {name: a, url: %s}
`, srv.URL))); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	defer s.client.CloseIdleConnections()
	for range 3 {
		s.scrapeOnce(context.Background())
		s.mu.Lock()
		s.infoAt = s.infoAt.Add(-time.Hour) // every retry delay has passed
		s.mu.Unlock()
	}
	if n, v := srv.count("/props"), srv.count("/version"); n != 1 || v != 0 {
		t.Errorf("3 scrapes asked /props %d times and /version %d times, want once and never", n, v)
	}
	want := `
# HELP vllm_server_info Server facts from /version, /v1/models and the engine's /metrics (engine profile, vLLM's metrics schema and cache config); always 1.
# TYPE vllm_server_info gauge
vllm_server_info{block_size="",engine="llamacpp",kv_cache_size_tokens="",max_model_len="2048",metrics_schema="",model="small",target="a",ttft_includes_queue="true",version="b1-80fb11a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm_server_info"); err != nil {
		t.Error(err)
	}
	if v, ok := m.View("a"); !ok || v.MaxNumSeqs != 2 {
		t.Errorf("view max_num_seqs = %d (%v), want /props total_slots 2", v.MaxNumSeqs, ok)
	}

	srv.mu.Lock()
	srv.restarted = true
	srv.mu.Unlock()
	s.scrapeOnce(context.Background())
	s.scrapeOnce(context.Background())
	if n := srv.count("/props"); n != 2 {
		t.Errorf("/props asked %d times after a restart, want twice in all", n)
	}
}
