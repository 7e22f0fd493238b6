package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/testutil"
)

// The two API keys of the tests: one given as authorization credentials, one as
// bearer_token. Neither may appear anywhere the daemon writes.
const (
	simKey  = "sk-sim-credentials-7f3a9c1e5b"
	echoKey = "sk-echo-bearer-2d8e4b6a0c"
)

// syncBuffer is a log sink safe for concurrent writers and readers.
type syncBuffer struct{ testutil.LogBuffer }

// debugLogger logs everything, debug included, to the returned buffer.
func debugLogger() (log.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	l := log.NewLogfmtLogger(buf)
	return level.NewFilter(l, level.AllowAll()), buf
}

// startSim runs an in-process vllm_sim that requires key.
func startSim(t *testing.T, key string) *httptest.Server {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.APIKey = key
	cfg.TTFT = 5 * time.Millisecond
	cfg.ITL = time.Millisecond
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	return srv
}

// startEcho is a vLLM-shaped endpoint that rejects every completion with a 401
// whose error message echoes the bearer token it received, as some gateways do.
func startEcho(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(http.StatusOK)
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"echo-model","object":"model"}]}`)
		case "/metrics":
			fmt.Fprintln(w, "# nothing")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Www-Authenticate", "Bearer realm="+r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"invalid api key %s","type":"AuthenticationError","code":401}}`,
				strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func configText(simURL, echoURL string, extraTarget string) string {
	return fmt.Sprintf(`
global:
  probe_interval: 300ms
  scrape_interval: 1s
  scrape_timeout: 500ms
  rate_window: 3s
  stall_timeout: 5s
modules:
  short_completion:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
    max_tokens: 8
  short_chat:
    prober: chat
    messages: [{role: user, content: "Name three prime numbers."}]
    max_tokens: 4
targets:
  - name: sim
    url: %s
    labels: {preset: test}
    http_client_config:
      authorization:
        credentials: %s
  - name: echo
    url: %s
    modules: [short_completion]
    http_client_config:
      bearer_token: %s
%s`, simURL, simKey, echoURL, echoKey, extraTarget)
}

func writeConfig(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

type fixture struct {
	t      *testing.T
	d      *Daemon
	srv    *httptest.Server
	path   string
	logs   *syncBuffer
	sim    *httptest.Server
	echo   *httptest.Server
	cancel context.CancelFunc
	done   chan error
}

// newFixture starts a daemon (Run with no listener) on a config probing an
// in-process vllm_sim and the echo endpoint, and serves its Handler.
func newFixture(t *testing.T) *fixture { t.Helper(); return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with options changed by change (when not nil).
func newFixtureWith(t *testing.T, change func(*Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, sim: startSim(t, simKey), echo: startEcho(t)}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, configText(f.sim.URL, f.echo.URL, ""))
	opts := Options{ConfigFile: f.path, HistoryLimit: 5}
	if change != nil {
		change(&opts)
	}
	f.start(opts)
	return f
}

// start runs a daemon with opts (Run with no listener) and serves its Handler.
func (f *fixture) start(opts Options) {
	t := f.t
	t.Helper()
	var logger log.Logger
	logger, f.logs = debugLogger()
	d, err := New(opts, logger)
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	f.srv = httptest.NewServer(d.Handler())
	t.Cleanup(f.srv.Close)

	if code, body := f.get("/-/ready"); code != http.StatusServiceUnavailable || body != "Not ready\n" {
		t.Errorf("/-/ready before Run = %d %q, want 503 Not ready", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan error, 1)
	go func() { f.done <- d.Run(ctx, d.Handler()) }()
	t.Cleanup(f.stop)
	waitFor(t, 5*time.Second, "the daemon to be ready", func() bool {
		code, _ := f.get("/-/ready")
		return code == http.StatusOK
	})
}

// stop cancels Run and checks that it returns and leaves no goroutine of ours.
func (f *fixture) stop() {
	t := f.t
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.cancel = nil
	select {
	case err := <-f.done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of its context being cancelled")
	}
	checkNoGoroutines(t)
}

// checkNoGoroutines fails if a goroutine is still running code of our packages
// (prober, collector, internal/: daemon, discovery, compare, ...) or of
// Prometheus' discovery manager and discoverers, other than the test itself.
// goleak (TestMain) checks the whole package at its end; this checks each
// daemon as its Run returns, while the test's simulators still serve, which
// goleak cannot tell apart from a leak without a list of net/http internals.
func checkNoGoroutines(t *testing.T) {
	t.Helper()
	var leaked string
	// Stacks of goroutines that are just finishing need a moment to disappear.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = ""
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			// Test code (fake servers) is not what this checks.
			if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "_test.go") {
				continue
			}
			for _, pkg := range []string{"vllm_prober/prober.", "vllm_prober/collector.", "vllm_prober/internal/",
				"prometheus/prometheus/discovery"} {
				if strings.Contains(g, pkg) {
					leaked += g + "\n\n"
					break
				}
			}
		}
		if leaked == "" {
			return
		}
	}
	t.Errorf("goroutines left running after Run returned:\n%s", leaked)
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) do(method, path string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, string(body)
}

func (f *fixture) get(path string) (int, string) { return f.do(http.MethodGet, path) }

// historyLen is how many probes of (target, module) the prober remembers.
func (f *fixture) historyLen(target, module string) int {
	for _, ts := range f.d.probes.Status() {
		if ts.Name != target {
			continue
		}
		for _, ms := range ts.Modules {
			if ms.Module == module {
				return len(ms.History)
			}
		}
	}
	return 0
}

// secretFree fails if text carries either API key.
func secretFree(t *testing.T, where, text string) {
	t.Helper()
	for _, k := range []string{simKey, echoKey} {
		if strings.Contains(text, k) {
			i := strings.Index(text, k)
			t.Errorf("%s leaks the API key %q: ...%s...", where, k, text[max(0, i-200):min(len(text), i+100)])
		}
	}
}

func TestDaemonServesProbes(t *testing.T) {
	f := newFixture(t)
	waitFor(t, 20*time.Second, "three probes of every pair", func() bool {
		return f.historyLen("sim", "short_completion") >= 3 && f.historyLen("sim", "short_chat") >= 3 &&
			f.historyLen("echo", "short_completion") >= 3
	})

	t.Run("landing page", func(t *testing.T) {
		code, body := f.get("/")
		if code != http.StatusOK {
			t.Fatalf("/ = %d", code)
		}
		for _, want := range []string{
			`<tr class="failing"><td class="st">failing<td><a href="target?name=echo#module-short_completion">echo</a><td>short_completion<td>unauthorized (HTTP 401)`,
			`<tr class="healthy"><td class="st">healthy<td><a href="target?name=sim#module-short_chat">sim</a><td>short_chat<td`,
			`<span class="failing">1 failing</span>`, `<span class="healthy">2 healthy</span>`,
			"failing for ", "last success ", `href="probe/record?id=`,
			`<a href="metrics">Metrics</a>`, `<a href="config">Configuration</a>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("landing page lacks %q", want)
			}
		}
		if strings.Contains(body, "<summary>timeline (") {
			t.Error("the landing page carries timelines; they belong on the targets' pages")
		}
		secretFree(t, "the landing page", body)
		if code, _ := f.get("/nope"); code != http.StatusNotFound {
			t.Errorf("/nope = %d, want 404", code)
		}
	})

	t.Run("target page", func(t *testing.T) {
		code, body := f.get("/target?name=sim")
		if code != http.StatusOK {
			t.Fatalf("/target = %d", code)
		}
		for _, want := range []string{
			`<h2 id="target-sim">sim</h2>`, f.sim.URL, "meta-llama/Llama-3.1-8B-Instruct", `<span class="ok">up</span>`,
			"<tr><td>short_completion</td>", "<tr><td>short_chat</td>",
			`<span class="ok">success</span> (HTTP 200)`, `<h3 id="module-short_completion">short_completion</h3>`,
			"request_sent", "content", "spends tokens and can block",
			`<a href="probe?module=short_chat&amp;target=sim">metrics</a>`,
			`<a href="probe?debug=true&amp;module=short_chat&amp;target=sim">debug report</a>`,
			`<a href="probe/record?id=1&amp;module=short_chat&amp;target=sim">record</a>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("target page lacks %q", want)
			}
		}
		// The history is bounded by the history limit (5 recent probes plus up
		// to 5 older failures per pair); each probe has its timeline.
		if n := strings.Count(body, "<summary>timeline ("); n < 2*3 || n > 2*10 {
			t.Errorf("target page shows %d probe timelines, want 6 to 20 (2 pairs with 3 to 10 each)", n)
		}
		_, echo := f.get("/target?name=echo")
		secretFree(t, "the target pages", body+echo)
		if code, _ := f.get("/target?name=nope"); code != http.StatusNotFound {
			t.Errorf("/target?name=nope = %d, want 404", code)
		}
	})

	t.Run("record", func(t *testing.T) {
		code, body := f.get("/probe/record?target=echo&module=short_completion&id=1")
		if code != http.StatusOK {
			t.Fatalf("/probe/record = %d: %s", code, body)
		}
		for _, want := range []string{
			`Stored record 1 of target "echo" module "short_completion" (no new probe was run)`,
			"Result: failure (reason unauthorized)\n", "Failed during the response status: POST /v1/completions\n",
			"Authorization: <secret>  (added by the HTTP client from http_client_config)\n",
			"\nError response body (excerpt):\n", "\nRequest:\n  POST /v1/completions\n  {",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/probe/record lacks %q:\n%s", want, body)
			}
		}
		secretFree(t, "/probe/record", body)
		for q, want := range map[string]int{
			"target=echo&module=short_completion&id=999999": http.StatusNotFound,
			"target=echo&module=short_completion&id=x":      http.StatusBadRequest,
			"target=nope&module=short_completion&id=1":      http.StatusNotFound,
		} {
			if code, _ := f.get("/probe/record?" + q); code != want {
				t.Errorf("/probe/record?%s = %d, want %d", q, code, want)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		code, body := f.get("/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics = %d", code)
		}
		for _, want := range []string{
			`vllm_probe_success{model="meta-llama/Llama-3.1-8B-Instruct",module="short_chat",preset="test",target="sim"} 1`,
			`vllm_probe_success{model="echo-model",module="short_completion",preset="",target="echo"} 0`,
			`vllm_probe_failures_total{model="echo-model",module="short_completion",preset="",reason="unauthorized",target="echo"} `,
			"vllm_prober_config_last_reload_successful 1\n",
			"vllm_prober_config_last_reload_success_timestamp_seconds ",
			`vllm_prober_build_info{branch="",goarch="` + runtime.GOARCH + `"`,
			"go_goroutines ", "process_start_time_seconds ",
			`promhttp_metric_handler_requests_total{code="200"} `,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		secretFree(t, "/metrics", body)
	})

	t.Run("probe", func(t *testing.T) {
		code, body := f.get("/probe?target=sim&module=short_completion")
		if code != http.StatusOK {
			t.Fatalf("/probe = %d: %s", code, body)
		}
		for _, want := range []string{"vllm_probe_success 1\n", "vllm_probe_attempts_total 1\n", `vllm_probe_tokens_total{kind="output"} 8`} {
			if !strings.Contains(body, want) {
				t.Errorf("/probe lacks %q:\n%s", want, body)
			}
		}
		// A target with a single module needs no module parameter.
		code, body = f.get("/probe?target=echo")
		if code != http.StatusOK || !strings.Contains(body, "vllm_probe_success 0\n") ||
			!strings.Contains(body, `vllm_probe_failures_total{reason="unauthorized"} 1`) {
			t.Errorf("/probe?target=echo = %d:\n%s", code, body)
		}
		secretFree(t, "/probe", body)
	})

	t.Run("probe debug", func(t *testing.T) {
		code, body := f.get("/probe?target=sim&module=short_chat&debug=true")
		if code != http.StatusOK {
			t.Fatalf("/probe debug = %d: %s", code, body)
		}
		for _, want := range []string{
			`Probe of target "sim" module "short_chat"`, "Result: success\n", "HTTP status: 200\n",
			"Output tokens: 4 (from usage)\n", "\nTimeline:\n", "s  request_sent\n", "s  done",
			"\nRequest headers:\n", "X-Request-Id: vllm-prober-sim-short_chat-",
			"\nResponse headers:\n", "Content-Type: text/event-stream",
			"\nMetrics that would have been returned:\n", "vllm_probe_success 1\n",
			"\nModule configuration:\nprober: chat\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/probe debug lacks %q:\n%s", want, body)
			}
		}
		secretFree(t, "/probe?debug=true", body)

		// The echo endpoint puts the key in its error message and in a header.
		code, body = f.get("/probe?target=echo&module=short_completion&debug=true")
		if code != http.StatusOK || !strings.Contains(body, "Result: failure (reason unauthorized)\n") ||
			!strings.Contains(body, "Error: ") || !strings.Contains(body, "Www-Authenticate: ") {
			t.Errorf("/probe debug of echo = %d:\n%s", code, body)
		}
		secretFree(t, "/probe?debug=true of the echo target", body)
	})

	t.Run("probe errors", func(t *testing.T) {
		for _, c := range []struct {
			query, want string
		}{
			{"", "target parameter is missing; targets: sim, echo\n"},
			{"?target=nope&module=short_chat", `unknown target "nope"; targets: sim, echo` + "\n"},
			{"?target=sim", `module parameter is missing; modules of target "sim": short_chat, short_completion` + "\n"},
			{"?target=sim&module=long", `module "long" is not configured for target "sim"; modules: short_chat, short_completion` + "\n"},
			{"?target=echo&module=short_chat", `module "short_chat" is not configured for target "echo"; modules: short_completion` + "\n"},
		} {
			code, body := f.get("/probe" + c.query)
			if code != http.StatusBadRequest || body != c.want {
				t.Errorf("/probe%s = %d %q, want 400 %q", c.query, code, body, c.want)
			}
		}
	})

	t.Run("config", func(t *testing.T) {
		code, body := f.get("/config")
		if code != http.StatusOK {
			t.Fatalf("/config = %d", code)
		}
		if !strings.Contains(body, "credentials: <secret>") || !strings.Contains(body, "- name: echo") {
			t.Errorf("/config does not show the redacted config:\n%s", body)
		}
		secretFree(t, "/config", body)
	})

	t.Run("healthy", func(t *testing.T) {
		if code, body := f.get("/-/healthy"); code != http.StatusOK || body != "Healthy\n" {
			t.Errorf("/-/healthy = %d %q", code, body)
		}
	})

	f.stop()
	secretFree(t, "the debug log", f.logs.String())
	if !strings.Contains(f.logs.String(), "level=debug") {
		t.Error("the log has no debug lines: the leak check proved nothing")
	}
}

func gauge(t *testing.T, f *fixture, name string) string {
	t.Helper()
	_, body := f.get("/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("/metrics lacks %s", name)
	return ""
}

func attempts(f *fixture) string {
	_, body := f.get("/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "vllm_probe_attempts_total{") && strings.Contains(line, `module="short_chat"`) && strings.Contains(line, `target="sim"`) {
			return line
		}
	}
	return ""
}

func TestReloadOverHTTP(t *testing.T) {
	f := newFixture(t)
	good := configText(f.sim.URL, f.echo.URL, "")

	if code, body := f.get("/-/reload"); code != http.StatusMethodNotAllowed || body != "This endpoint requires a POST request.\n" {
		t.Errorf("GET /-/reload = %d %q", code, body)
	}
	// Unchanged file.
	if code, body := f.do(http.MethodPost, "/-/reload"); code != http.StatusOK || body != "Config reloaded\n" {
		t.Errorf("POST /-/reload (unchanged) = %d %q", code, body)
	}

	// A bad file: 500 with the error, gauge 0, the old config keeps probing.
	bad := strings.Replace(good, "max_tokens: 4", "max_tokens: 0", 1)
	writeConfig(t, f.path, bad)
	code, body := f.do(http.MethodPost, "/-/reload")
	want := `failed to reload config: error parsing config file "` + f.path + `": module "short_chat": max_tokens must be at least 1, got 0` + "\n"
	if code != http.StatusInternalServerError || body != want {
		t.Errorf("POST /-/reload (bad) = %d %q, want 500 %q", code, body, want)
	}
	if v := gauge(t, f, "vllm_prober_config_last_reload_successful"); v != "0" {
		t.Errorf("reload gauge after a bad reload = %s, want 0", v)
	}
	before := attempts(f)
	waitFor(t, 10*time.Second, "the old config to keep probing", func() bool {
		a := attempts(f)
		return a != "" && a != before
	})
	if _, body := f.get("/config"); !strings.Contains(body, "max_tokens: 4") {
		t.Error("/config does not show the old config after a bad reload")
	}

	// A secret in a wrong place is rejected without being echoed.
	leaky := strings.Replace(good, "    max_tokens: 4\n", "    max_tokens: 4\n    headers: {Authorization: \"Bearer "+simKey+"\"}\n", 1)
	writeConfig(t, f.path, leaky)
	code, body = f.do(http.MethodPost, "/-/reload")
	if code != http.StatusInternalServerError || !strings.Contains(body, `header \"Authorization\" carries a secret`) && !strings.Contains(body, `header "Authorization" carries a secret`) {
		t.Errorf("POST /-/reload (secret header) = %d %q", code, body)
	}
	secretFree(t, "the reload error", body)

	// A good change: 200, gauge 1, the new target is probed and shown.
	writeConfig(t, f.path, configText(f.sim.URL, f.echo.URL, fmt.Sprintf(`
  - name: sim2
    url: %s
    modules: [short_chat]
    http_client_config:
      authorization: {credentials: %s}
`, f.sim.URL, simKey)))
	if code, body := f.do(http.MethodPost, "/-/reload"); code != http.StatusOK || body != "Config reloaded\n" {
		t.Errorf("POST /-/reload (good) = %d %q", code, body)
	}
	if v := gauge(t, f, "vllm_prober_config_last_reload_successful"); v != "1" {
		t.Errorf("reload gauge after a good reload = %s, want 1", v)
	}
	waitFor(t, 10*time.Second, "the new target to be probed", func() bool { return f.historyLen("sim2", "short_chat") > 0 })
	if _, body := f.get("/"); !strings.Contains(body, `<a href="target?name=sim2#module-short_chat">sim2</a>`) {
		t.Error("landing page does not show the new target")
	}
	if code, _ := f.get("/probe?target=sim2&module=short_chat"); code != http.StatusOK {
		t.Errorf("/probe of the new target = %d", code)
	}
	f.stop()
	secretFree(t, "the debug log", f.logs.String())
}

func TestReloadMethodAndSIGHUP(t *testing.T) {
	f := newFixture(t)
	good := configText(f.sim.URL, f.echo.URL, "")

	// Reload(): bad keeps the old config.
	writeConfig(t, f.path, "modules: {}\n")
	err := f.d.Reload()
	want := `error parsing config file "` + f.path + `": no modules and no targets defined`
	if err == nil || err.Error() != want {
		t.Errorf("Reload() = %v, want %q", err, want)
	}
	if n := len(f.d.Config().Targets); n != 2 {
		t.Errorf("after a bad Reload the config has %d targets, want the old 2", n)
	}
	if v := gauge(t, f, "vllm_prober_config_last_reload_successful"); v != "0" {
		t.Errorf("reload gauge = %s, want 0", v)
	}

	// SIGHUP reloads a good file.
	writeConfig(t, f.path, strings.Replace(good, "  - name: echo", "  - name: echo2", 1))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "SIGHUP to reload the config", func() bool {
		_, ok := f.d.Config().Target("echo2")
		return ok
	})
	if v := gauge(t, f, "vllm_prober_config_last_reload_successful"); v != "1" {
		t.Errorf("reload gauge after SIGHUP = %s, want 1", v)
	}
	if !strings.Contains(f.logs.String(), `msg="Received SIGHUP, reloading config"`) {
		t.Error("SIGHUP was not logged")
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yml")
	writeConfig(t, path, configText("http://127.0.0.1:1", "http://127.0.0.1:2", ""))
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{}, "no configuration file given"},
		{Options{ConfigFile: filepath.Join(dir, "missing.yml")}, "error reading config file: open " + filepath.Join(dir, "missing.yml") + ": no such file or directory"},
		{Options{ConfigFile: path, TelemetryPath: "metrics"}, `telemetry path "metrics" must start with /`},
		{Options{ConfigFile: path, TelemetryPath: "/probe"}, `telemetry path "/probe" collides with another endpoint`},
	} {
		_, err := New(c.opts, nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("New(%+v) = %v, want %q", c.opts, err, c.want)
		}
	}
	d, err := New(Options{ConfigFile: path, TelemetryPath: "/internal/metrics"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/internal/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("custom telemetry path = %d", resp.StatusCode)
	}
}

// freeAddr returns a loopback address nothing listens on (a tiny race with other
// processes is acceptable in a test).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Run serves HTTP itself and, on shutdown, cancels a probe in flight against a
// target that never answers instead of waiting for its 60s timeout.
func TestRunServesAndShutsDown(t *testing.T) {
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	hang := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" {
			// Read the body: only then does the server notice the client going away.
			_, _ = io.Copy(io.Discard, r.Body)
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		}
	}))
	hang.Start()
	defer hang.Close()
	defer close(release)

	path := filepath.Join(t.TempDir(), "c.yml")
	writeConfig(t, path, fmt.Sprintf(`
global: {probe_interval: 1h, probe_timeout: 60s, stall_timeout: 60s}
modules:
  m: {prober: completions, prompt: hi, max_tokens: 2}
targets:
  - {name: hang, url: %q, scrape_metrics: false}
`, hang.URL))
	addr := freeAddr(t)
	addrs := []string{addr}
	systemd := false
	webCfg := ""
	d, err := New(Options{
		ConfigFile: path, ShutdownTimeout: 30 * time.Second,
		WebFlags: &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &webCfg},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, d.Handler()) }()
	waitFor(t, 5*time.Second, "the listener", func() bool {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err := d.Run(ctx, d.Handler()); err == nil || err.Error() != "daemon is already running" {
		t.Errorf("second Run = %v", err)
	}

	probeDone := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/probe?target=hang&module=m")
		if err != nil {
			probeDone <- -1
			return
		}
		resp.Body.Close()
		probeDone <- resp.StatusCode
	}()
	// Wait for the /probe request and the scheduled probe (interval 1h, started
	// at a stable offset that may be far away: only the /probe one is certain).
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe never reached the target")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return: the probe in flight was not cancelled")
	}
	// Far below the 60s probe timeout and the 30s shutdown timeout.
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("shutdown took %s", el)
	}
	select {
	case code := <-probeDone:
		t.Logf("/probe in flight ended with %d", code)
	case <-time.After(10 * time.Second):
		t.Error("the /probe request in flight never ended")
	}
	if _, err := http.Get("http://" + addr + "/-/healthy"); err == nil {
		t.Error("the listener is still open after Run returned")
	}
	checkNoGoroutines(t)
}

// A listener that cannot be opened makes Run return an error instead of running
// without HTTP.
func TestRunListenError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	path := filepath.Join(t.TempDir(), "c.yml")
	writeConfig(t, path, configText("http://127.0.0.1:1", "http://127.0.0.1:2", ""))
	addrs := []string{l.Addr().String()}
	systemd := false
	webCfg := ""
	d, err := New(Options{ConfigFile: path, WebFlags: &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &webCfg}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = d.Run(ctx, d.Handler())
	if err == nil || !strings.Contains(err.Error(), "http server: listen tcp "+l.Addr().String()+": bind: address already in use") {
		t.Errorf("Run = %v, want an address-in-use error", err)
	}
	if ctx.Err() != nil {
		t.Error("Run waited for its context instead of returning the listen error")
	}
	checkNoGoroutines(t)
}

// /probe honours Prometheus' scrape timeout: a probe of a target that never
// answers ends as a timeout shortly after X-Prometheus-Scrape-Timeout-Seconds
// minus the offset, not after the module's 60s.
func TestProbeScrapeTimeout(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer hang.Close()
	path := filepath.Join(t.TempDir(), "c.yml")
	writeConfig(t, path, fmt.Sprintf(`
global: {probe_interval: 1h, probe_timeout: 60s, stall_timeout: 60s}
modules:
  m: {prober: completions, prompt: hi, max_tokens: 2}
targets:
  - {name: hang, url: %q, model: m, scrape_metrics: false}
`, hang.URL))
	d, err := New(Options{ConfigFile: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()

	probe := func(timeout string) (int, string, time.Duration) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/probe?target=hang", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", timeout)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	code, body, took := probe("1.5")
	if code != http.StatusOK || !strings.Contains(body, "vllm_probe_success 0\n") ||
		!strings.Contains(body, `vllm_probe_failures_total{reason="timeout"} 1`) {
		t.Errorf("/probe of a hanging target = %d:\n%s", code, body)
	}
	// 1s of budget; generous for a loaded machine, far below the 60s probe timeout.
	if took < time.Second || took > 20*time.Second {
		t.Errorf("/probe took %s, want about 1s", took)
	}
	for _, c := range []struct{ header, want string }{
		{"soon", "X-Prometheus-Scrape-Timeout-Seconds \"soon\" is not a positive number\n"},
		{"-1", "X-Prometheus-Scrape-Timeout-Seconds \"-1\" is not a positive number\n"},
		{"NaN", "X-Prometheus-Scrape-Timeout-Seconds \"NaN\" is not a positive number\n"},
		{"-Inf", "X-Prometheus-Scrape-Timeout-Seconds \"-Inf\" is not a positive number\n"},
		{"Inf", "X-Prometheus-Scrape-Timeout-Seconds \"Inf\" is out of range: at most 9223372036 seconds\n"},
		{"1e308", "X-Prometheus-Scrape-Timeout-Seconds \"1e308\" is out of range: at most 9223372036 seconds\n"},
		{"1e400", "X-Prometheus-Scrape-Timeout-Seconds \"1e400\" is out of range: at most 9223372036 seconds\n"},
	} {
		if code, body, _ = probe(c.header); code != http.StatusBadRequest || body != c.want {
			t.Errorf("/probe with scrape timeout header %q = %d %q, want 400 %q", c.header, code, body, c.want)
		}
	}
}

// TestLogCallerIsTheLoggingLine: New's logger names, as "caller", the line
// that logged, not the redaction wrapper every value passes through.
func TestLogCallerIsTheLoggingLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, path, `
modules:
  m: {prober: completions, prompt: hi, max_tokens: 4}
targets:
  - {name: a, url: "http://127.0.0.1:1", model: x}
`)
	var buf bytes.Buffer
	if _, err := New(Options{ConfigFile: path}, log.NewLogfmtLogger(log.NewSyncWriter(&buf))); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `msg="Loaded config file"`) {
		t.Fatalf("no load line logged:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(line, "caller=daemon.go:") {
			t.Errorf("caller is not the daemon's logging line: %s", line)
		}
	}
}

// TestConfigCheckMissingCredentialsFile: a credentials_file that does not
// exist fails the check (CheckConfig, --config.check) with the sentence the
// daemon's probes fail with; the daemon itself loads the file (a mounted
// secret may appear later) and reports it at probe time.
func TestConfigCheckMissingCredentialsFile(t *testing.T) {
	sim := startSim(t, simKey)
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-key")
	path := filepath.Join(dir, "vllm_prober.yml")
	writeConfig(t, path, fmt.Sprintf(`
modules:
  m: {prober: completions, prompt: hi, max_tokens: 2}
targets:
  - name: sim
    url: %s
    model: meta-llama/Llama-3.1-8B-Instruct
    http_client_config: {authorization: {credentials_file: no-such-key}}
`, sim.URL))
	sentence := "unable to read file " + missing + ": open " + missing + ": no such file or directory"
	err := CheckConfig(Options{ConfigFile: path}, nil)
	if want := `target "sim": http_client_config: ` + sentence; err == nil || err.Error() != want {
		t.Fatalf("CheckConfig = %v, want %q", err, want)
	}
	d, err := New(Options{ConfigFile: path}, nil)
	if err != nil {
		t.Fatalf("the daemon refused the file: %v", err)
	}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/probe?target=sim&debug=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), sentence) {
		t.Errorf("the probe's report lacks %q:\n%s", sentence, body)
	}
}
