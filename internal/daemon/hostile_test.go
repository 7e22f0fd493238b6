package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/hostile"
)

// secretTail holds every character a JSON encoder or a URL encoder
// rewrites, so that each form of a secret is a different string.
const secretTail = `"\<&>/+=? %`

// hostileSecret is a secret for a field: a distinctive alphanumeric head
// (the "cut" rows look for its first 8 characters: any part of a secret
// left by a cut starts with it) and secretTail.
func hostileSecret(tag string) string { return "Zq" + tag + "Wm7x" + secretTail }

// secretField is one secret-bearing field of an HTTP client configuration.
type secretField struct {
	name string
	// client is the http_client_config (flow YAML); {dir} is the directory
	// of the credential files, {host} the hostile server's host:port,
	// {url} its URL, {secret} the inline secret (YAML-quoted), {psecret}
	// the secret escaped for a URL's user information.
	client string
	// file names the credential file, which holds the secret; it is
	// rotated (rewritten with a second secret) while the daemon runs.
	file  string
	proxy bool // the target is reached through the hostile server as a proxy
	oauth bool // the hostile server's access tokens carry the secret
}

var secretFields = []secretField{
	{name: "basic_auth password", client: `basic_auth: {username: alice, password: {secret}}`},
	{name: "basic_auth password_file", client: `basic_auth: {username: bob, password_file: {dir}/cred}`, file: "cred"},
	{name: "authorization credentials", client: `authorization: {credentials: {secret}}`},
	{name: "authorization credentials_file", client: `authorization: {credentials_file: {dir}/cred}`, file: "cred"},
	{name: "bearer_token", client: `bearer_token: {secret}`},
	{name: "bearer_token_file", client: `bearer_token_file: {dir}/cred`, file: "cred"},
	{name: "oauth2 client_secret", client: `oauth2: {client_id: probe, client_secret: {secret}, token_url: "{url}/token"}`, oauth: true},
	{name: "oauth2 client_secret_file", client: `oauth2: {client_id: probe, client_secret_file: {dir}/cred, token_url: "{url}/token"}`, file: "cred", oauth: true},
	{name: "http_headers secret", client: `http_headers: {X-Api-Key: {secrets: [{secret}]}}`},
	{name: "http_headers file", client: `http_headers: {X-Gateway-Token: {files: [{dir}/cred]}}`, file: "cred"},
	{name: "proxy_url password", client: `proxy_url: "http://puser:{psecret}@{host}"`, proxy: true},
}

// hostileModules: one module per way the hostile server answers (module
// m<mode>); "text" is the split stream without an output check, whose
// generated text the stream reader itself keeps (the split module's check
// keeps it instead).
var hostileModules = []string{hostile.Mode401, hostile.Mode500, hostile.ModeEvent, hostile.ModeSplit, hostile.ModeRedirect, "text"}

// runHostile runs a daemon against a hostile server with field's secret,
// rotates its file (if any) once every module has been probed, and returns
// every output by name, and the secrets in force during the run.
func runHostile(t *testing.T, field secretField, tag string) (outputs map[string]string, secrets []string, srv *hostile.Server) {
	srv = hostile.New(t)
	dir := t.TempDir()
	first := hostileSecret(tag + "A")
	secrets = []string{first}
	if field.file != "" {
		writeConfig(t, filepath.Join(dir, field.file), first+"\n")
	}
	quoted, _ := json.Marshal(first)
	host := strings.TrimPrefix(srv.URL, "http://")
	client := strings.NewReplacer("{dir}", dir, "{host}", host, "{url}", srv.URL,
		"{secret}", string(quoted), "{psecret}", url.PathEscape(first)).Replace(field.client)
	target := srv.URL
	if field.proxy {
		target = "http://vllm.internal:8000" // only the proxy knows the way
	}
	var mods strings.Builder
	for _, m := range hostileModules {
		mode := m
		if m == "text" {
			mode = hostile.ModeSplit
		}
		fmt.Fprintf(&mods, "  m%s: {prober: completions, prompt: hi, max_tokens: 4, headers: {X-Mode: %q}", m, mode)
		if m == hostile.ModeSplit {
			mods.WriteString(", expect: {regex: never-matches-zz}")
		}
		mods.WriteString("}\n")
	}
	path := filepath.Join(dir, "vllm_prober.yml")
	writeConfig(t, path, fmt.Sprintf(`
global: {probe_interval: 250ms, scrape_interval: 250ms, scrape_timeout: 200ms, stall_timeout: 5s}
modules:
%stargets:
  - name: hostile
    url: %s
    models: all
    http_client_config: {%s}
  - name: deny
    url: %s%s
    scrape_metrics: false
    modules: [m401]
    http_client_config: {%s}
`, mods.String(), target, client, target, hostile.DenyPrefix, client))

	logger, logs := debugLogger()
	d, err := New(Options{ConfigFile: path, HistoryLimit: 5}, logger)
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(d.Handler())
	defer web.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, d.Handler()) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	defer stop()
	browser := &http.Client{Transport: &http.Transport{}}
	defer browser.CloseIdleConnections()
	get := func(p string) string {
		method := http.MethodGet
		if p == "/-/reload" {
			method = http.MethodPost
		}
		req, err := http.NewRequest(method, web.URL+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return string(b)
	}
	// Every module of both models of the hostile target, and the deny
	// target, probed at least n times, the last after since.
	probed := func(n int, since time.Time) func() bool {
		return func() bool {
			count := 0
			for _, s := range d.probes.AllStats() {
				if s.Probes >= n && s.LastProbe.After(since) {
					count++
				}
			}
			return count >= 2*len(hostileModules)+1
		}
	}
	waitFor(t, 20*time.Second, "two probes of every module and model", probed(2, time.Time{}))
	waitFor(t, 10*time.Second, "a scrape of the hostile target", func() bool {
		s, ok := d.coll.LastScrape("hostile")
		return ok && s.Up
	})
	if field.file != "" {
		second := hostileSecret(tag + "B")
		secrets = append(secrets, second)
		writeConfig(t, filepath.Join(dir, field.file), second+"\n")
		waitFor(t, 10*time.Second, "the rotated secret on the wire", func() bool {
			return slices.ContainsFunc(srv.Seen(), func(v string) bool {
				_, value, _ := strings.Cut(v, ": ")
				return slices.Contains(hostile.Candidates(value), second)
			})
		})
		rotated := time.Now()
		waitFor(t, 20*time.Second, "a probe of every module and model after the rotation", probed(1, rotated))
		waitFor(t, 20*time.Second, "a second one", probed(1, time.Now()))
		if body := get("/-/reload"); body != "Config reloaded\n" {
			t.Fatalf("POST /-/reload after the rotation = %q", body)
		}
		if !strings.Contains(logs.String(), "Reloaded config file") {
			t.Errorf("the reload after a rotation of %s was skipped:\n%s", field.file, logs.String())
		}
	}
	if field.oauth {
		for _, s := range slices.Clone(secrets) {
			secrets = append(secrets, hostile.TokenPrefix+s)
		}
	}

	outputs = map[string]string{}
	outputs["/"] = get("/")
	for _, name := range []string{"hostile", "deny"} {
		outputs["/target?name="+name] = get("/target?name=" + name)
	}
	links := map[string]bool{}
	for _, page := range []string{"/", "/target?name=hostile", "/target?name=deny"} {
		for _, l := range recordLink.FindAllString(outputs[page], -1) {
			links["/"+html.UnescapeString(l)] = true
		}
	}
	if len(links) < len(hostileModules) {
		t.Fatalf("fixture: %d probe records linked, want one per module at least", len(links))
	}
	for l := range links {
		outputs[l] = get(l)
	}
	for _, m := range hostileModules {
		outputs["/probe module m"+m] = get("/probe?target=hostile&module=m" + m)
		outputs["/probe debug=true module m"+m] = get("/probe?target=hostile&module=m" + m + "&debug=true")
	}
	outputs["/probe debug=true target deny"] = get("/probe?target=deny&module=m401&debug=true")
	outputs["/config"] = get("/config")
	outputs["/metrics"] = get("/metrics")
	stop()
	outputs["the debug log"] = logs.String()
	return outputs, secrets, srv
}

// noJSONHTML is s JSON-escaped without HTML escaping (as logfmt and the
// Prometheus text format escape quotes and backslashes).
func noJSONHTML(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSpace(b.String())
	return out[1 : len(out)-1]
}

// secretForms are the guaranteed forms of secret c, by name: hostile.Forms,
// "cut" (any part a cut could leave: the head every part starts with), and
// each form of each wire value the server saw that carries c (Bearer …,
// Basic base64(user:password), the access token).
func secretForms(c string, seen []string) map[string]string {
	forms := hostile.Forms(c)
	forms["cut"] = c[:8]
	wires := map[string]bool{}
	for _, v := range seen {
		_, value, _ := strings.Cut(v, ": ")
		if value != c && slices.Contains(hostile.Candidates(value), c) {
			wires[value] = true
		}
	}
	for w := range wires {
		for name, f := range hostile.Forms(w) {
			forms["wire "+strings.Fields(w)[0]+" "+name] = f
		}
	}
	return forms
}

// showing reports the first way text shows form: as it is, HTML-escaped
// (pages), or JSON/logfmt/label-escaped.
func showing(text, form string) (string, bool) {
	for _, v := range []string{form, html.EscapeString(form), noJSONHTML(form), hostile.JSONEscaped(form)} {
		if i := strings.Index(text, v); i >= 0 {
			return text[max(0, i-100):min(len(text), i+len(v)+40)], true
		}
	}
	return "", false
}

// TestHostileTargetSecretsTable is the secrets table: for every secret field
// of an HTTP client configuration, a daemon probes and scrapes a hostile
// target (internal/hostile) that echoes the credential in every guaranteed
// form into everything it sends; credential files rotate while the daemon
// runs. Every output (/, every /target, every stored /probe/record, /probe
// and its debug report per module, /config, /metrics, the debug log) is
// searched for every form of every secret in force: rows are generated as
// field × output × secret × form.
func TestHostileTargetSecretsTable(t *testing.T) {
	var mu sync.Mutex
	rows := 0
	for i, field := range secretFields {
		t.Run(field.name, func(t *testing.T) {
			t.Parallel()
			outputs, secrets, srv := runHostile(t, field, fmt.Sprintf("F%02d", i))
			seen := srv.Seen()
			// The fixture must have put the secret on the wire and the echo
			// in front of the daemon, or the rows prove nothing.
			for _, s := range secrets {
				if !slices.ContainsFunc(seen, func(v string) bool {
					_, value, _ := strings.Cut(v, ": ")
					return slices.Contains(hostile.Candidates(value), s)
				}) {
					t.Fatalf("fixture: secret %q never went on the wire; seen: %q", s, seen)
				}
			}
			if !strings.Contains(outputs["/probe debug=true module m401"], "<secret>") {
				t.Fatalf("fixture: the debug report shows no scrubbed echo:\n%s", outputs["/probe debug=true module m401"])
			}
			if stolen := srv.Stolen(); len(stolen) > 0 {
				t.Errorf("requests reached the redirect's other host: %q", stolen)
			}
			names := make([]string, 0, len(outputs))
			for name := range outputs {
				names = append(names, name)
			}
			sort.Strings(names)
			n := 0
			for _, name := range names {
				for si, s := range secrets {
					forms := secretForms(s, seen)
					formNames := make([]string, 0, len(forms))
					for f := range forms {
						formNames = append(formNames, f)
					}
					sort.Strings(formNames)
					for _, form := range formNames {
						n++
						t.Run(fmt.Sprintf("%s/secret %d/%s", name, si, form), func(t *testing.T) {
							if ctx, ok := showing(outputs[name], forms[form]); ok {
								t.Errorf("%s shows the %s form of a secret of %s: ...%s...", name, form, field.name, ctx)
							}
						})
					}
				}
			}
			mu.Lock()
			rows += n
			mu.Unlock()
		})
	}
	t.Cleanup(func() { t.Logf("%d rows (field × output × secret × form)", rows) })
}

// TestProbeCallsNeverSilenceScheduledProbes: 100 calls of /probe (anyone who
// reaches the port may make them) do not make a single scheduled probe skip
// for the budget: /probe draws on its own on-demand pool, and says so when
// that pool is spent (429).
func TestProbeCallsNeverSilenceScheduledProbes(t *testing.T) {
	srv := hostile.New(t)
	path := filepath.Join(t.TempDir(), "vllm_prober.yml")
	// A probe costs at most 9+4 tokens (it spends 5+1): 400 tokens an
	// hour fit the scheduled probes of the test; 100 on-demand ones would
	// not, had they drawn on the same budget.
	writeConfig(t, path, fmt.Sprintf(`
global: {probe_interval: 100ms, scrape_interval: 1s, stall_timeout: 5s}
modules:
  m: {prober: completions, prompt: hi, max_tokens: 4}
targets:
  - {name: t, url: %q, model: hostile-model, scrape_metrics: false, token_budget_per_hour: 400}
`, srv.URL))
	f := &fixture{t: t, path: path}
	f.start(Options{ConfigFile: path, HistoryLimit: 5})
	ok, refused := 0, 0
	for range 100 {
		code, body := f.get("/probe?target=t&module=m")
		switch {
		case code == http.StatusOK:
			ok++
		case code == http.StatusTooManyRequests && strings.Contains(body, "on-demand probe budget spent"):
			refused++
		default:
			t.Fatalf("/probe = %d %q", code, body)
		}
	}
	if ok == 0 || refused == 0 {
		t.Errorf("/probe: %d ran, %d refused; want both (the on-demand pool is a tenth of the budget)", ok, refused)
	}
	value := func(metrics, prefix, must string) float64 {
		for line := range strings.SplitSeq(metrics, "\n") {
			if strings.HasPrefix(line, prefix) && strings.Contains(line, must) {
				v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
				return v
			}
		}
		return 0
	}
	var skipped float64
	waitFor(t, 10*time.Second, "5 scheduled probes, or one skipped for the budget", func() bool {
		_, metrics := f.get("/metrics")
		skipped = value(metrics, "vllm_probe_skipped_total{", `reason="budget"`)
		return skipped > 0 || value(metrics, "vllm_probe_attempts_total{", `target="t"`) >= 5
	})
	if skipped != 0 {
		t.Errorf("vllm_probe_skipped_total{reason=\"budget\"} = %v after 100 /probe calls, want 0", skipped)
	}
}
