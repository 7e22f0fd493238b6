package daemon

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReloadDisabled: with --no-web.enable-reload, POST /-/reload is
// refused and reloads nothing.
func TestReloadDisabled(t *testing.T) {
	f := newFixtureWith(t, func(o *Options) { o.DisableReload = true })
	code, body := f.do(http.MethodPost, "/-/reload")
	if code != http.StatusForbidden || body != "Reloading over HTTP is not enabled (--no-web.enable-reload); send SIGHUP.\n" {
		t.Errorf("POST /-/reload = %d %q", code, body)
	}
}

// TestProbeRefusesCrossSite: /probe sends requests to targets, so a page on
// another site must not start it through a visitor's browser (an <img>, a
// form, a fetch): Sec-Fetch-Site cross-site or same-site, or an Origin of
// another host, get 403 and no probe runs. A same-origin page and a plain
// scraper (Prometheus sends neither header) are served.
func TestProbeRefusesCrossSite(t *testing.T) {
	f := newFixture(t)
	const path = "/probe?target=sim&module=short_completion"
	for _, c := range []struct {
		name, method string
		header       map[string]string
		want         int
	}{
		{"img from another site", http.MethodGet, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"}, http.StatusForbidden},
		{"same-site other origin", http.MethodGet, map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"fetch with a foreign Origin", http.MethodGet, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"form POST from another site", http.MethodPost, map[string]string{"Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"form GET from another site", http.MethodGet, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, http.StatusForbidden},
		{"same-origin page", http.MethodGet, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": f.srv.URL}, http.StatusOK},
		{"typed into the address bar", http.MethodGet, map[string]string{"Sec-Fetch-Site": "none"}, http.StatusOK},
		{"plain scraper", http.MethodGet, map[string]string{"User-Agent": "Prometheus/2.53.0", "X-Prometheus-Scrape-Timeout-Seconds": "10"}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, f.srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("%s = %d %q, want %d", c.name, resp.StatusCode, body, c.want)
			}
			if c.want == http.StatusForbidden {
				// The guard's answer, not the probe handler's.
				if want := "cross-site request refused: /probe sends requests to targets\n"; string(body) != want {
					t.Errorf("body %q, want %q", body, want)
				}
				return
			}
			if !strings.Contains(string(body), "vllm_probe_success 1") {
				t.Errorf("not probed:\n%s", body)
			}
		})
	}
}
