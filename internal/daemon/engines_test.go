package daemon

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// TestEnginesOnMetricsAndTargetPage runs the daemon on three targets: a
// vLLM simulator put to sleep (POST /sleep?level=1), an SGLang simulator,
// and a scrape-only server whose /metrics no profile reads. The sleep
// state is right on /metrics (vllm_server_sleep_level 1, probes failing
// with reason sleeping) and on the target page, and both go back after
// POST /wake_up; the SGLang one is read by its profile; the unrecognised
// one has vllm_server_engine_recognized{engine="unknown"} 0 and a line on
// its target page naming its families.
func TestEnginesOnMetricsAndTargetPage(t *testing.T) {
	startEngine := func(engine string) *httptest.Server {
		_, srv, _ := simtest.Start(t, func(c *simulator.Config) { c.Engine, c.TTFT, c.ITL = engine, 5*time.Millisecond, time.Millisecond })
		return srv
	}
	sleepy, sglang := startEngine(simulator.EngineVLLM), startEngine(simulator.EngineSGLang)
	tgi := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# HELP tgi_queue_size Current queue size\n# TYPE tgi_queue_size gauge\ntgi_queue_size 3\n"+
			"# HELP tgi_batch_current_size Current batch size\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 8\n")
	}))
	t.Cleanup(tgi.Close)
	post := func(url string) {
		t.Helper()
		resp, err := http.Post(url, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s", url, resp.Status)
		}
	}
	post(sleepy.URL + "/sleep?level=1")

	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "vllm_prober.yml")}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 300ms, scrape_interval: 500ms, scrape_timeout: 500ms, rate_window: 3s, stall_timeout: 5s}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 4}
targets:
  - {name: sleepy, url: %q}
  - {name: sg, url: %q}
  - {name: tgi, url: %q, probe: false}
`, sleepy.URL, sglang.URL, tgi.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5})

	page := func(target string) string {
		t.Helper()
		code, body := f.get("/target?name=" + target)
		if code != http.StatusOK {
			t.Fatalf("/target?name=%s: %d", target, code)
		}
		m := regexp.MustCompile(`<td id="last-scrape"><span class="([a-z]+)">([^<]*)</span>`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return m[1] + ": " + html.UnescapeString(m[2])
	}
	has := func(re string) func() bool {
		return func() bool {
			_, body := f.get("/metrics")
			return regexp.MustCompile(`(?m)^` + re + `$`).MatchString(body)
		}
	}
	waitFor(t, 20*time.Second, "the sleeping engine's level and a probe failing with reason sleeping",
		func() bool {
			return has(`vllm_server_sleep_level\{[^}]*target="sleepy"[^}]*\} 1`)() &&
				has(`vllm_probe_failures_total\{[^}]*reason="sleeping"[^}]*target="sleepy"[^}]*\} [1-9][0-9]*`)()
		})
	waitFor(t, 20*time.Second, "the unrecognised payload's series", has(`vllm_server_engine_recognized\{engine="unknown",target="tgi"\} 0`))
	waitFor(t, 20*time.Second, "the SGLang simulator read by its profile", has(`vllm_server_info\{[^}]*engine="sglang"[^}]*target="sg"[^}]*\} 1`))
	for _, tc := range []struct{ target, want string }{
		{"sleepy", `^ok: up at .*; engine vllm; sleeping \(level 1\)$`},
		{"sg", `^ok: up at .*; engine sglang$`},
		{"tgi", `^fail: up at .*; matches no engine profile, no engine signal read \(families tgi_queue_size, tgi_batch_current_size\)$`},
	} {
		// One scrape can time out on a loaded machine: the line of the next is checked.
		var got string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if got = page(tc.target); regexp.MustCompile(tc.want).MatchString(got) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("target page of %s: /metrics line %q, want %s", tc.target, got, tc.want)
				break
			}
		}
	}

	post(sleepy.URL + "/wake_up")
	waitFor(t, 20*time.Second, "the woken engine's level 0 and a successful probe", func() bool {
		return has(`vllm_server_sleep_level\{[^}]*target="sleepy"[^}]*\} 0`)() &&
			has(`vllm_probe_success\{[^}]*target="sleepy"[^}]*\} 1`)()
	})
	waitFor(t, 10*time.Second, "the target page of sleepy without sleeping after POST /wake_up", func() bool {
		got := page("sleepy")
		return strings.HasPrefix(got, "ok: ") && strings.HasSuffix(got, "; engine vllm")
	})
}
