package collector

import (
	"fmt"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/httpclient"
)

func TestManagerSharesClients(t *testing.T) {
	const base = `
modules:
  short: {prober: completions, prompt: hi}
targets:
  - {name: a, url: "http://127.0.0.1:1"}
`
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(testConfig(t, base+`  - {name: b, url: "http://127.0.0.1:2"}
  - name: c
    url: "http://127.0.0.1:3"
    http_client_config: {authorization: {credentials: secret}}
`)); err != nil {
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
	// Dropping b and c keeps a's client, held once; a itself keeps its scraper.
	if err := m.Apply(testConfig(t, base)); err != nil {
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

func TestScrapeOffset(t *testing.T) {
	const interval = 15 * time.Second
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		name := fmt.Sprintf("t%04d", i)
		off := scrapeOffset(name, interval)
		if off <= 0 || off > interval {
			t.Fatalf("scrapeOffset(%q) = %v, want in (0, %v]", name, off, interval)
		}
		if again := scrapeOffset(name, interval); again != off {
			t.Fatalf("scrapeOffset(%q) = %v then %v, want stable", name, off, again)
		}
		seen[off/(interval/100)] = true
	}
	// 1,000 targets over 100 slices of the interval: all of them get some.
	if len(seen) < 100 {
		t.Errorf("offsets of 1,000 targets fell in %d of 100 slices of the interval", len(seen))
	}
}
