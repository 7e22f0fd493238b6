package prober

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// TestShedOnlyFromDeclaredGateways: the same refusal (the Endpoint Picker's
// 429 ResourceExhausted with the llm-d dropped-reason header) is shed from a
// target declared a gateway and rate_limited from an ordinary one: the
// manager tells the probe which targets are gateways.
func TestShedOnlyFromDeclaredGateways(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Llm-D-Request-Dropped-Reason", "rejected-saturated")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, "inference error: ResourceExhausted - system saturated, sheddable request dropped")
	}))
	defer srv.Close()
	cfg, err := config.Load(fmt.Appendf(nil, `
modules:
  m: {prober: completions, prompt: hi, max_tokens: 2}
targets:
  - {name: plain, url: %q, model: m, scrape_metrics: false, labels: {pool: p}}
  - name: gw
    url: %q
    model: m
    scrape_metrics: false
    labels: {pool: p}
    gateway: {member_label: pool}
`, srv.URL, srv.URL), "")
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]probe.Reason{"plain": probe.ReasonRateLimited, "gw": probe.ReasonShed} {
		res, _, err := m.ProbeNow(context.Background(), target, "m")
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if res.Reason != want {
			t.Errorf("%s: reason %q, want %q (%s)", target, res.Reason, want, res.Err)
		}
	}
}
