package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadErrorsNeverQuoteSecrets: a configuration that fails to load
// because of a secret of the wrong shape, a proxy_url whose password is
// right but whose port or host is malformed, or any other error next to a
// secret, never quotes the secret (not even yaml's 7-character prefix),
// whether it is inline or in a credential file.
func TestLoadErrorsNeverQuoteSecrets(t *testing.T) {
	const secret = "s3cr3t-Value-8412"
	dir := t.TempDir()
	for _, c := range []struct{ name, client string }{
		{"proxy_url malformed port", `proxy_url: "http://u:` + secret + `@proxy.internal:80x"`},
		{"proxy_url malformed host", `proxy_url: "http://u:` + secret + `@[::1"`},
		{"oauth2 proxy_url malformed port", `oauth2: {client_id: c, client_secret: ok-secret-1, token_url: "http://t/", proxy_url: "http://u:` + secret + `@p:x"}`},
		{"basic_auth as a scalar", `basic_auth: ` + secret},
		{"authorization as a scalar", `authorization: ` + secret},
		{"http_headers secret as a scalar", `http_headers: {X-Api-Key: ` + secret + `}`},
		{"http_client_config as a scalar", ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := "{" + c.client + "}"
			if c.client == "" {
				client = secret
			}
			data := fmt.Sprintf("modules:\n  m: {prober: completions, prompt: hi}\ntargets:\n  - name: a\n    url: http://127.0.0.1:8000\n    http_client_config: %s\n", client)
			path := filepath.Join(dir, "c.yml")
			writeFile(t, path, data)
			_, err := LoadFile(path)
			if err == nil {
				t.Fatal("the configuration loaded")
			}
			for _, form := range []string{secret, secret[:7]} {
				if strings.Contains(err.Error(), form) {
					t.Errorf("the error quotes %q: %v", form, err)
				}
			}
		})
	}
}

// TestShortSecretsRefused: a credential shorter than the redactor's minimum
// is refused at load, naming its key, inline or in a file.
func TestShortSecretsRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "short"), "abc\n")
	for _, c := range []struct{ client, key string }{
		{`bearer_token: abc`, "authorization.credentials"},
		{`basic_auth: {username: u, password: ab}`, "basic_auth.password"},
		{`basic_auth: {username: u, password_file: short}`, "basic_auth.password_file"},
		{`authorization: {credentials: xyz}`, "authorization.credentials"},
		{`http_headers: {X-Api-Key: {secrets: [k1]}}`, "http_headers.X-Api-Key.secrets"},
		{`proxy_url: "http://u:pw@127.0.0.1:3128"`, "proxy_url password"},
	} {
		data := fmt.Sprintf("modules:\n  m: {prober: completions, prompt: hi}\ntargets:\n  - {name: a, url: 'http://127.0.0.1:8000', http_client_config: {%s}}\n", c.client)
		_, err := Load([]byte(data), dir)
		if err == nil || !strings.Contains(err.Error(), c.key+" is shorter than 4 characters") {
			t.Errorf("%s: err = %v, want the key named and the minimum", c.client, err)
		}
	}
}

// TestReloadAfterCredentialRotation: a reload after a credential file
// changed is not skipped as "unchanged".
func TestReloadAfterCredentialRotation(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, client string }{
		{"credentials_file", `authorization: {credentials_file: cred}`},
		{"password_file", `basic_auth: {username: u, password_file: cred}`},
		{"http_headers file", `http_headers: {X-Api-Key: {files: [cred]}}`},
		{"oauth2 client_secret_file", `oauth2: {client_id: c, client_secret_file: cred, token_url: "http://127.0.0.1:1/t"}`},
		{"bearer_token_file", `bearer_token_file: cred`},
		{"target_defaults", ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			writeFile(t, filepath.Join(dir, "cred"), "first-secret-1\n")
			data := fmt.Sprintf("modules:\n  m: {prober: completions, prompt: hi}\ntargets:\n  - {name: a, url: 'http://127.0.0.1:8000', http_client_config: {%s}}\n", c.client)
			if c.client == "" {
				data = "modules:\n  m: {prober: completions, prompt: hi}\nfile_sd_configs: [{files: [sd.json]}]\ntarget_defaults: {http_client_config: {authorization: {credentials_file: cred}}}\n"
			}
			path := filepath.Join(dir, "c.yml")
			writeFile(t, path, data)
			sc := NewSafeConfig(nil, nil)
			if changed, err := sc.ReloadConfig(path); err != nil || !changed {
				t.Fatalf("first load: changed=%v err=%v", changed, err)
			}
			if changed, err := sc.ReloadConfig(path); err != nil || changed {
				t.Fatalf("reload of the same files: changed=%v err=%v, want skipped", changed, err)
			}
			writeFile(t, filepath.Join(dir, "cred"), "second-secret-2\n")
			if changed, err := sc.ReloadConfig(path); err != nil || !changed {
				t.Fatalf("reload after the rotation: changed=%v err=%v, want not skipped", changed, err)
			}
		})
	}
}
