package prober

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// countingSim is a vllm_sim behind a log of the requests it received, by
// method and path. With list, its /v1/models lists list instead of the
// model it serves.
func countingSim(t *testing.T, list string) (url string, count func(string) int) {
	t.Helper()
	sim, _, _ := simtest.Start(t, nil)
	var mu sync.Mutex
	hits := map[string]int{}
	h := sim.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		if list != "" && r.URL.Path == "/v1/models" {
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, list)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func(k string) int {
		mu.Lock()
		defer mu.Unlock()
		return hits[k]
	}
}

// TestModelsListedAtTheirOwnInterval counts the requests a probed target
// receives: /health at every check, but /v1/models once per
// models_refresh_interval while the probes' model is served, and again at
// every check once a probe's model is refused (model_not_found). With the
// default intervals the model list cost 2 requests per target per minute (one
// per probe_interval), now 0.2.
func TestModelsListedAtTheirOwnInterval(t *testing.T) {
	url, count := countingSim(t, "")
	cfg := loadConfig(t, `
global: {probe_interval: 40ms, models_refresh_interval: 1h}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 2}
targets:
  - {name: served, url: `+url+`}
`)
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	stop := running(t, m)
	waitFor(t, "ten health checks", func() bool { return count("GET /health") >= 10 })
	stop()
	health, models := count("GET /health"), count("GET /v1/models")
	// The first check lists the models; a probe that starts before it
	// resolves the model itself: at most two reads in all.
	if models > 2 {
		t.Errorf("%d /v1/models beside %d /health in an hour of models_refresh_interval: the model list is read at every check again", models, health)
	}
	if v, ok := m.testMetrics().modelsUp.lookup([]string{"served", "sim-model"}); !ok || v != 1 {
		t.Errorf("vllm_probe_models_up{model=sim-model} = %v (present %v), want 1", v, ok)
	}

	// A target that lists the probes' model but refuses it (404, as after
	// the model was unloaded between two reads of the list): every probe is
	// refused, and every check reads the list again.
	url2, count2 := countingSim(t, "gone")
	cfg2 := loadConfig(t, `
global: {probe_interval: 40ms, models_refresh_interval: 1h}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 2}
targets:
  - {name: renamed, url: `+url2+`, model: gone}
`)
	m2 := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m2.Apply(cfg2); err != nil {
		t.Fatal(err)
	}
	stop2 := running(t, m2)
	waitFor(t, "ten health checks", func() bool { return count2("GET /health") >= 10 })
	stop2()
	// Every check after a refused probe reads the list: about one per check.
	// On a loaded machine probes and checks of 40 ms interleave unevenly, so
	// the bound is a third of the checks; without the refusal trigger the
	// list is read once.
	if h, l := count2("GET /health"), count2("GET /v1/models"); 3*l < h {
		t.Errorf("%d /v1/models beside %d /health with the probes' model refused: want about one per check", l, h)
	}
}
