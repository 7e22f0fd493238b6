package httpclient

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	commoncfg "github.com/prometheus/common/config"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// TestNoCredentialOnCrossHostRedirect: a target that redirects to another
// host (another host name, or another port of the same host, or https to
// http) gets the request refused for every configuration that sends a
// credential, http_headers entries included: the other host receives
// nothing. A redirect to the same origin is followed with the credential; a
// configuration without credentials follows any redirect.
func TestNoCredentialOnCrossHostRedirect(t *testing.T) {
	var mu sync.Mutex
	var stolen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		stolen = append(stolen, r.URL.Path+" "+r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")+r.Header.Get("X-Gateway-Token"))
		mu.Unlock()
	}))
	defer other.Close()
	otherPort := other.URL // 127.0.0.1, another port
	otherHost := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	var target *httptest.Server
	target = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-host":
			http.Redirect(w, r, otherHost+"/steal", http.StatusFound)
		case "/to-port":
			http.Redirect(w, r, otherPort+"/steal", http.StatusTemporaryRedirect)
		case "/same":
			http.Redirect(w, r, target.URL+"/landed", http.StatusFound)
		case "/landed":
			w.Header().Set("X-Got", r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")+r.Header.Get("X-Gateway-Token"))
		}
	}))
	defer target.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hdr"), []byte("hdr-file-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, yaml string }{
		{"bearer_token", `bearer_token: tok-secret-1`},
		{"authorization", `authorization: {credentials: cred-secret-1}`},
		{"basic_auth", `basic_auth: {username: u, password: pw-secret-1}`},
		{"http_headers secret", `http_headers: {X-Api-Key: {secrets: [hdr-secret-1]}}`},
		{"http_headers file", `http_headers: {X-Gateway-Token: {files: [` + filepath.Join(dir, "hdr") + `]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := commoncfg.DefaultHTTPClientConfig
			if err := yaml.UnmarshalStrict([]byte(c.yaml), &cfg); err != nil {
				t.Fatal(err)
			}
			pool := New(redact.New())
			client, err := pool.Acquire(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Release(client)
			for _, path := range []string{"/to-host", "/to-port"} {
				resp, err := client.Get(target.URL + path)
				if err == nil {
					resp.Body.Close()
				}
				if !errors.Is(err, ErrCrossHostRedirect) {
					t.Errorf("GET %s: err = %v, want ErrCrossHostRedirect", path, err)
				}
			}
			mu.Lock()
			if len(stolen) > 0 {
				t.Errorf("the other host received %q", stolen)
			}
			stolen = nil
			mu.Unlock()
			resp, err := client.Get(target.URL + "/same")
			if err != nil {
				t.Fatalf("same-origin redirect: %v", err)
			}
			resp.Body.Close()
			if resp.Header.Get("X-Got") == "" {
				t.Error("the same-origin redirect lost the credential")
			}
		})
	}
	t.Run("no credentials", func(t *testing.T) {
		pool := New(redact.New())
		client, err := pool.Acquire(commoncfg.DefaultHTTPClientConfig)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Release(client)
		resp, err := client.Get(target.URL + "/to-host")
		if err != nil {
			t.Fatalf("a client without credentials refused a redirect: %v", err)
		}
		resp.Body.Close()
	})
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{"http://a:80/x", "http://a/y", true},
		{"http://A:8000/x", "http://a:8000/y", true},
		{"http://a:8000/x", "https://a:8000/y", true},
		{"https://a/x", "http://a:443/y", false},
		{"http://a:8000/x", "http://a:8001/y", false},
		{"http://a/x", "http://b/y", false},
		{"http://a/x", "http://sub.a/y", false},
	} {
		from, _ := http.NewRequest(http.MethodGet, c.from, nil)
		to, _ := http.NewRequest(http.MethodGet, c.to, nil)
		if got := sameOrigin(from.URL, to.URL); got != c.want {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

// TestRotatedCredentialFileTaughtAtOnce: a credential file rewritten while
// its client is in use: the redactor scrubs the new value as soon as a
// request has carried it, with no reload.
func TestRotatedCredentialFileTaughtAtOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "cred")
	write := func(v string) {
		if err := os.WriteFile(file, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first-secret-1")
	red := redact.New()
	pool := New(red)
	client, err := pool.Acquire(commoncfg.HTTPClientConfig{Authorization: &commoncfg.Authorization{Type: "Bearer", CredentialsFile: file}})
	if err != nil {
		t.Fatal(err)
	}
	get := func() {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	write("second-secret-2")
	get()
	for _, s := range []string{"second-secret-2", "Bearer second-secret-2"} {
		if got := red.String("echo " + s); got != "echo <secret>" {
			t.Errorf("after the rotation the redactor makes %q of %q", got, s)
		}
	}
	pool.Release(client)
	if got := red.String("second-secret-2"); got == "<secret>" {
		t.Error("the released client's secrets stay registered")
	}
}
