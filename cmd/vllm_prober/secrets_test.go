package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/internal/daemon"
	"github.com/vllm-prober/vllm_prober/internal/daemonweb"
	"github.com/vllm-prober/vllm_prober/internal/hostile"
)

// secretTail holds every character a JSON or URL encoder rewrites.
const secretTail = `"\<&>/+=? %`

// showing reports where text shows form: as it is, HTML-escaped, or
// JSON/logfmt-escaped.
func showing(text, form string) (string, bool) {
	noHTML := func(s string) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		out := strings.TrimSpace(b.String())
		return out[1 : len(out)-1]
	}
	for _, v := range []string{form, html.EscapeString(form), noHTML(form), hostile.JSONEscaped(form)} {
		if i := strings.Index(text, v); i >= 0 {
			return text[max(0, i-100):min(len(text), i+len(v)+40)], true
		}
	}
	return "", false
}

// checkRows runs one row per output × form: no output may show the form.
func checkRows(t *testing.T, outputs, forms map[string]string) int {
	t.Helper()
	var names, formNames []string
	for n := range outputs {
		names = append(names, n)
	}
	for f := range forms {
		formNames = append(formNames, f)
	}
	sort.Strings(names)
	sort.Strings(formNames)
	for _, n := range names {
		for _, f := range formNames {
			t.Run(n+"/"+f, func(t *testing.T) {
				if ctx, ok := showing(outputs[n], forms[f]); ok {
					t.Errorf("%s shows the %s form of the secret: ...%s...", n, f, ctx)
				}
			})
		}
	}
	return len(names) * len(formNames)
}

// TestBenchAgainstHostileTarget: bench sends its API key (--api-key-file)
// to a hostile target that echoes it in every guaranteed form, in each way
// it can answer; then `baseline import` reads what bench wrote. Rows are
// generated as answer × output (stdout, the log, every file bench writes,
// baseline import's output file and log) × form.
func TestBenchAgainstHostileTarget(t *testing.T) {
	key := "ZqBenchWm7x" + secretTail
	srv := hostile.New(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	forms := hostile.Forms(key)
	forms["cut"] = key[:8]
	for name, f := range hostile.Forms("Bearer " + key) {
		forms["wire "+name] = f
	}
	for _, mode := range []string{hostile.Mode401, hostile.Mode500, hostile.ModeEvent, hostile.ModeSplit} {
		t.Run("answer "+mode, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+mode)
			code, stdout, stderr := runBenchCLI(t, context.Background(), "bench", "--url", srv.URL+hostile.ModePrefix+mode,
				"--out", out, "--requests", "2", "--concurrency", "1", "--max-tokens", "4", "--name", "run",
				"--api-key-file", keyFile, "--save-detailed", "--force")
			outputs := map[string]string{"bench stdout": stdout, "bench log": stderr}
			if code != 0 && mode == hostile.ModeSplit {
				t.Fatalf("bench exit %d:\n%s", code, stderr)
			}
			files, _ := filepath.Glob(filepath.Join(out, "*"))
			var jsons []string
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				outputs["bench file "+filepath.Base(f)] = string(b)
				if strings.HasSuffix(f, ".json") {
					jsons = append(jsons, f)
				}
			}
			if len(jsons) == 0 {
				t.Fatalf("fixture: bench wrote no result JSON:\n%s", stderr)
			}
			imported := filepath.Join(dir, "imported-"+mode+".yaml")
			_, _, ierr := runBaselineCLI(t, append([]string{"baseline", "import", "--out", imported, "--name", "imp", "--force"}, jsons...)...)
			outputs["baseline import log"] = ierr
			if b, err := os.ReadFile(imported); err == nil {
				outputs["baseline import file"] = string(b)
			}
			// The key went on the wire and its echo came back.
			if !strings.Contains(strings.Join(srv.Seen(), "\n"), "Authorization: Bearer "+key) {
				t.Fatalf("fixture: the key was not sent: %q", srv.Seen())
			}
			echoed := 0
			for _, text := range outputs {
				echoed += strings.Count(text, "<secret>")
			}
			checkRows(t, outputs, forms)
			if echoed == 0 && !t.Failed() {
				t.Fatalf("fixture: no output shows a scrubbed echo")
			}
		})
	}
}

// TestConfigErrorsNeverShowSecrets: a configuration that fails to load
// because of a secret of the wrong shape, or a proxy URL whose password is
// right but whose port is malformed, shows no form of the secret (nor
// yaml's 7-character quote of it) in --config.check's output, the daemon's
// start-up log, the answer of POST /-/reload or the reload's log line.
func TestConfigErrorsNeverShowSecrets(t *testing.T) {
	for i, c := range []struct{ name, client string }{
		{"proxy_url malformed port", `proxy_url: "http://u:{psecret}@proxy.internal:80x"`},
		{"oauth2 proxy_url malformed port", `oauth2: {client_id: c, client_secret: okay-secret-1, token_url: "http://t/", proxy_url: "http://u:{psecret}@p:x"}`},
		{"basic_auth as a scalar", `basic_auth: {secret}`},
		{"authorization as a scalar", `authorization: {secret}`},
		{"http_headers secret as a scalar", `http_headers: {X-Api-Key: {secret}}`},
		{"http_client_config as a scalar", ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			secret := fmt.Sprintf("ZqC%02dWm7x", i) + secretTail
			quoted, _ := json.Marshal(secret)
			client := "{" + strings.NewReplacer("{secret}", string(quoted), "{psecret}", url.PathEscape(secret)).Replace(c.client) + "}"
			if c.client == "" {
				client = string(quoted)
			}
			const head = "global: {probe_interval: 1h, scrape_interval: 1h, rate_window: 3h}\nmodules: {m: {prober: completions, prompt: hi}}\n"
			good := head + "targets: [{name: t, url: \"http://127.0.0.1:1\"}]\n"
			bad := head + "targets:\n  - name: t\n    url: http://127.0.0.1:1\n    http_client_config: " + client + "\n"
			dir := t.TempDir()
			file := filepath.Join(dir, "vllm_prober.yml")
			write := func(s string) {
				if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			outputs := map[string]string{}
			write(bad)
			code, _, checkErr := runCLI(t, "--config.check", "--config.file="+file)
			if code != 1 {
				t.Fatalf("fixture: --config.check accepted the broken file:\n%s", checkErr)
			}
			outputs["--config.check"] = checkErr
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out, errb syncBuffer
			runArgs(ctx, []string{"--config.file=" + file, "--web.listen-address=127.0.0.1:0"}, &out, &errb)
			outputs["daemon start-up log"] = errb.String()

			// A running daemon reloads the broken file.
			write(good)
			var logs syncBuffer
			d, err := daemon.New(daemon.Options{ConfigFile: file}, level.NewFilter(log.NewLogfmtLogger(&logs), level.AllowAll()))
			if err != nil {
				t.Fatal(err)
			}
			web := httptest.NewServer(daemonweb.Handler(d))
			defer web.Close()
			write(bad)
			resp, err := http.Post(web.URL+"/-/reload", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("fixture: the broken file reloaded: %d %s", resp.StatusCode, body)
			}
			outputs["POST /-/reload answer"] = string(body)
			outputs["reload log"] = logs.String()

			forms := hostile.Forms(secret)
			forms["yaml quote"] = secret[:7]
			checkRows(t, outputs, forms)
		})
	}
}
