package prober

import (
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/httpclient"
)

func TestManagerSharesClients(t *testing.T) {
	cfg := loadConfig(t, `
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: a, url: "http://127.0.0.1:1"}
  - {name: b, url: "http://127.0.0.1:2"}
  - name: c
    url: "http://127.0.0.1:3"
    http_client_config: {authorization: {credentials: secret}}
`)
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	a, b, c := m.targets["a"].client, m.targets["b"].client, m.targets["c"].client
	m.mu.Unlock()
	if a != b {
		t.Error("targets a and b, of equal HTTP client config, have different clients")
	}
	if c == a {
		t.Error("target c, with credentials, shares the client of a")
	}
	// Dropping b keeps a's client; dropping a too releases it.
	cfg2 := loadConfig(t, `
modules:
  short: {prober: completions, prompt: hi, max_tokens: 5}
targets:
  - {name: a, url: "http://127.0.0.1:1"}
`)
	if err := m.Apply(cfg2); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.targets["a"].client != a {
		t.Error("the unchanged target a got a new client")
	}
	if n := m.clients.(*httpclient.Pool).Len(); n != 1 {
		t.Errorf("%d clients held, want 1", n)
	}
}
