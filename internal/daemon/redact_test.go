package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
)

func TestScrubberCoversEverySecretKind(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("sk-from-file-1111\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]byte(`
modules:
  m: {prober: completions, prompt: hi}
targets:
  - name: a
    url: http://127.0.0.1:8000
    http_client_config:
      authorization: {credentials: sk-credentials-2222}
      proxy_url: http://user:sk-proxy-3333@127.0.0.1:3128
  - name: b
    url: http://127.0.0.1:8001
    http_client_config:
      bearer_token_file: token
      http_headers:
        X-Gateway-Key: {secrets: [sk-header-4444]}
  - name: c
    url: http://127.0.0.1:8002
    http_client_config:
      basic_auth: {username: u, password: sk-basic-5555}
  - name: d
    url: http://127.0.0.1:8003
    http_client_config:
      oauth2: {client_id: x, client_secret: sk-oauth-6666, token_url: "http://127.0.0.1:9/t"}
  - name: e
    url: http://127.0.0.1:8004
    http_client_config:
      bearer_token: sk-bearer-7777
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	s := redact.New(configSecrets(cfg)...)
	in := "a sk-from-file-1111 b sk-credentials-2222 c sk-proxy-3333 d sk-header-4444 e sk-basic-5555 f sk-oauth-6666 g sk-bearer-7777 h"
	want := "a <secret> b <secret> c <secret> d <secret> e <secret> f <secret> g <secret> h"
	if got := s.String(in); got != want {
		t.Errorf("scrub:\n got %q\nwant %q", got, want)
	}
	if got := redact.New(configSecrets(nil)...).String(in); got != in {
		t.Errorf("a scrubber without config changed the text: %q", got)
	}

}

// A secret that contains another is replaced whole.
func TestScrubberLongestFirst(t *testing.T) {
	cfg, err := config.Load([]byte(`
modules:
  m: {prober: completions, prompt: hi}
targets:
  - {name: a, url: "http://127.0.0.1:1", http_client_config: {bearer_token: abcd}}
  - {name: b, url: "http://127.0.0.1:2", http_client_config: {bearer_token: xxabcdyy}}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := redact.New(configSecrets(cfg)...).String("1 xxabcdyy 2 abcd"); got != "1 <secret> 2 <secret>" || strings.Contains(got, "xx") {
		t.Errorf("scrub = %q", got)
	}
}
