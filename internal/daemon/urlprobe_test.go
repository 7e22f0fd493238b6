package daemon

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// authRecordingServer wraps a vllm_sim and records every request's Authorization.
type authRecordingServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func startAuthRecordingSim(t *testing.T, key string) *authRecordingServer {
	t.Helper()
	sim := startSim(t, key)
	target, _ := url.Parse(sim.URL)
	c := &authRecordingServer{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.auths = append(c.auths, r.Header.Get("Authorization"))
		c.mu.Unlock()
		r2 := r.Clone(r.Context())
		r2.URL.Scheme, r2.URL.Host, r2.RequestURI = target.Scheme, target.Host, ""
		resp, err := http.DefaultTransport.RoundTrip(r2)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				if fl, ok := w.(http.Flusher); ok {
					fl.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *authRecordingServer) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.auths...)
}

// TestURLProbes drives /probe?target=<URL> as a Prometheus Operator Probe
// does: an allowed URL is probed with url_probes' credentials only; a URL the
// anchored allow-list does not match gets 403 and no request; URL probes
// spend their own budget, and the scheduled probes never skip for them.
func TestURLProbes(t *testing.T) {
	const urlKey = "sk-url-probes-5e1d9a"
	allowed := startAuthRecordingSim(t, urlKey)
	other := startAuthRecordingSim(t, urlKey)
	f := &fixture{t: t, sim: startSim(t, simKey), echo: startEcho(t)}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, configText(f.sim.URL, f.echo.URL, fmt.Sprintf(`
url_probes:
  allowed_urls: [%q]
  modules: [short_completion]
  http_client_config:
    authorization: {credentials: %s}
  token_budget_per_hour: 150
`, regexp.QuoteMeta(allowed.URL), urlKey)))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5})

	probe := func(target string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/probe?module=short_completion&target="+url.QueryEscape(target), nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}

	// An allowed URL: probed, with url_probes' key and nothing else.
	code, body := probe(allowed.URL, "X-Prometheus-Scrape-Timeout-Seconds", "10")
	if code != http.StatusOK || !strings.Contains(body, "vllm_probe_success 1") {
		t.Fatalf("allowed URL: %d\n%s", code, body)
	}
	reqs := allowed.requests()
	if len(reqs) == 0 {
		t.Fatal("the allowed URL got no request")
	}
	for _, a := range reqs {
		if a != "Bearer "+urlKey {
			t.Errorf("the allowed URL got Authorization %q, want url_probes' key only", a)
		}
	}

	// Not matched by the anchored allow-list (the allowed URL is a substring
	// of this one): 403 naming the setting, and no request at all.
	for _, target := range []string{other.URL, other.URL + "/" + allowed.URL} {
		code, body = probe(target)
		if code != http.StatusForbidden || !strings.Contains(body, "url_probes.allowed_urls") {
			t.Errorf("target %s: %d %q, want 403 naming url_probes.allowed_urls", target, code, body)
		}
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("a URL outside the allow-list got %d requests", n)
	}
	// Malformed targets: 400, nothing sent.
	for _, target := range []string{strings.Replace(allowed.URL, "://", "://user:pw@", 1), allowed.URL + "/?x=1", "ftp://" + strings.TrimPrefix(allowed.URL, "http://")} {
		if code, body = probe(target); code != http.StatusBadRequest {
			t.Errorf("target %s: %d %q, want 400", target, code, body)
		}
	}
	if code, body = probe(allowed.URL, "X-Prometheus-Scrape-Timeout-Seconds", "soon"); code != http.StatusBadRequest {
		t.Errorf("bad scrape timeout header: %d %q, want 400", code, body)
	}

	// URL probes spend their own small budget: soon 429 ...
	limited := false
	for range 20 {
		if code, _ = probe(allowed.URL); code == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Error("20 URL probes within token_budget_per_hour 150: none refused")
	}
	// ... while the scheduled probes go on, never skipped for budget.
	before := attempts(f)
	waitFor(t, 10*time.Second, "scheduled probes after the URL probes' budget ran out", func() bool { return attempts(f) != before })
	if _, m := f.get("/metrics"); strings.Contains(m, `reason="budget"`) && regexp.MustCompile(`vllm_probe_skipped_total\{[^}]*reason="budget"[^}]*\} [1-9]`).MatchString(m) {
		t.Errorf("a scheduled probe was skipped for budget:\n%s", m)
	}
	// The static target's key never went to a URL probe.
	for _, a := range allowed.requests() {
		if strings.Contains(a, simKey) || strings.Contains(a, echoKey) {
			t.Errorf("a configured target's credential reached a URL probe: %q", a)
		}
	}
}

// TestURLProbesOff: without url_probes, a URL target is refused with 403
// naming the setting, and nothing is sent.
func TestURLProbesOff(t *testing.T) {
	other := startAuthRecordingSim(t, "")
	f := newFixture(t)
	code, body := f.get("/probe?module=short_completion&target=" + url.QueryEscape(other.URL))
	if code != http.StatusForbidden || !strings.Contains(body, "url_probes.allowed_urls") {
		t.Errorf("URL probe without url_probes: %d %q, want 403 naming url_probes.allowed_urls", code, body)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// requestLog is a listener that records every request it receives and
// answers 500 (a redirect that reaches it was followed).
type requestLog struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string
}

func startRequestLog(t *testing.T) *requestLog {
	t.Helper()
	l := &requestLog{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.Host+r.URL.Path)
		l.mu.Unlock()
		http.Error(w, "INTERNAL-ONLY-DATA", http.StatusInternalServerError)
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *requestLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// TestURLProbeRedirects: every hop of a URL probe is checked against
// url_probes.allowed_urls as its first URL is. An allowed URL that redirects
// (301, 302, 303, 307, 308) to a host outside the list (a real second
// listener), or to a link-local address, ends the probe with reason
// "redirect" and nothing is sent there; a redirect to an allowed host is
// followed. Every URL probe goes through a recording proxy on 127.0.0.1, so
// that the test sees every request the prober sends and none leaves the
// loopback network, the link-local one included.
func TestURLProbeRedirects(t *testing.T) {
	allowedSim := startAuthRecordingSim(t, "")
	disallowed := startRequestLog(t)
	const linkLocal = "http://169.254.169.254/latest/meta-data/iam"
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /r/<code>/<destination>/<what the prober appended>
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/r/"), "/", 3)
		if len(parts) < 3 {
			http.NotFound(w, r)
			return
		}
		code, _ := strconv.Atoi(parts[0])
		dest := map[string]string{"disallowed": disallowed.URL, "allowed": allowedSim.URL, "linklocal": linkLocal}[parts[1]]
		http.Redirect(w, r, dest+"/"+parts[2], code)
	}))
	defer redirector.Close()

	var (
		mu      sync.Mutex
		proxied []string
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proxied = append(proxied, r.Method+" "+r.URL.String())
		mu.Unlock()
		if h := r.URL.Hostname(); h != "127.0.0.1" {
			http.Error(w, "the test proxy forwards to 127.0.0.1 only", http.StatusBadGateway)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer proxy.Close()

	f := &fixture{t: t, sim: startSim(t, simKey), echo: startEcho(t)}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, configText(f.sim.URL, f.echo.URL, fmt.Sprintf(`
url_probes:
  allowed_urls: [%q, %q]
  modules: [short_completion]
  http_client_config: {proxy_url: %q}
  token_budget_per_hour: 100000
`, regexp.QuoteMeta(redirector.URL)+`/r/\d+/\w+`, regexp.QuoteMeta(allowedSim.URL), proxy.URL)))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5})

	const model = "meta-llama/Llama-3.1-8B-Instruct"
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, dest := range []string{"disallowed", "linklocal", "allowed"} {
			for _, withModel := range []bool{true, false} {
				name := fmt.Sprintf("%d to %s", code, dest)
				q := "/probe?debug=true&module=short_completion&target=" + url.QueryEscape(fmt.Sprintf("%s/r/%d/%s", redirector.URL, code, dest))
				if withModel {
					name += " (completion)"
					q += "&model=" + url.QueryEscape(model)
				} else {
					name += " (model list)"
				}
				t.Run(name, func(t *testing.T) {
					status, body := f.get(q)
					if status != http.StatusOK {
						t.Fatalf("%d\n%s", status, body)
					}
					if dest == "allowed" {
						// Followed: the allowed host answered (a 301, 302 or
						// 303 turns the completion POST into a GET, which it
						// refuses; 307 and 308 keep the POST and succeed).
						if strings.Contains(body, "(reason redirect)") || strings.Contains(body, "redirect not followed") {
							t.Errorf("a redirect to an allowed host was refused:\n%s", body)
						}
						if ok := strings.Contains(body, "Result: success"); ok != (code == 307 || code == 308) {
							t.Errorf("Result: success is %v for a %d to the allowed host:\n%s", ok, code, body)
						}
						return
					}
					for _, want := range []string{"Result: failure (reason redirect)", "redirect not followed", "url_probes.allowed_urls does not match its location"} {
						if !strings.Contains(body, want) {
							t.Errorf("the report lacks %q:\n%s", want, body)
						}
					}
					if strings.Contains(body, "INTERNAL-ONLY-DATA") || strings.Contains(body, "Result: success") {
						t.Errorf("the report shows what the other host answered:\n%s", body)
					}
				})
			}
		}
	}
	if reqs := disallowed.requests(); len(reqs) != 0 {
		t.Errorf("the host outside url_probes.allowed_urls received %d requests: %q", len(reqs), reqs)
	}
	if len(allowedSim.requests()) == 0 {
		t.Error("the allowed host received no request: redirects to it were not followed")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range proxied {
		if strings.Contains(p, "169.254.169.254") || strings.Contains(p, strings.TrimPrefix(disallowed.URL, "http://")) {
			t.Errorf("the prober sent %s", p)
		}
	}
	if len(proxied) == 0 {
		t.Error("no URL probe went through the proxy: the test sees nothing")
	}
}
