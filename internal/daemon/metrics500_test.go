package daemon

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMetricsFailingWhileServing: a vLLM whose /metrics answers 500 while
// inference works (its multiprocess metrics directory on a network volume):
// the prober keeps probing, vllm_server_up is 0 while the probes succeed,
// and the target page says the engine itself serves and only /metrics
// fails. Before, the page said only that the scrape was down.
func TestMetricsFailingWhileServing(t *testing.T) {
	sim := startWrappedSim(t, nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/metrics" {
				http.Error(w, "Internal Server Error", http.StatusInternalServerError)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "vllm_prober.yml")}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 300ms, scrape_interval: 300ms, scrape_timeout: 250ms}
modules:
  m: {prober: completions, prompt: "Say hello.", max_tokens: 4}
targets:
  - {name: sim, url: %q}
`, sim.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 10})
	var page string
	waitFor(t, 15*time.Second, "the target page to say the engine serves", func() bool {
		page = f.page("/target?name=sim")
		return strings.Contains(page, "the engine itself serves")
	})
	if !strings.Contains(page, "HTTP 500") && !strings.Contains(page, "500") {
		t.Errorf("the page does not name the 500:\n%s", page)
	}
	_, body := f.get("/metrics")
	for _, want := range []string{`vllm_server_up{target="sim"} 0`, `vllm_probe_success{model="meta-llama/Llama-3.1-8B-Instruct",module="m",target="sim"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
