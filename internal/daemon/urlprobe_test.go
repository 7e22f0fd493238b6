package daemon

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
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
