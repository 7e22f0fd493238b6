package discovery

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/vllm-prober/vllm_prober/config"
)

// sdServer is an http_sd endpoint whose answer the test changes as it goes.
type sdServer struct {
	mu          sync.Mutex
	status      int
	contentType string
	body        string
	header      http.Header // of the last request
	query       string
}

func (s *sdServer) set(status int, contentType, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.contentType, s.body = status, contentType, body
}

func (s *sdServer) lastRequest() (http.Header, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header.Clone(), s.query
}

func (s *sdServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header, s.query = r.Header.Clone(), r.URL.RawQuery
	if r.URL.Path != "/sd" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", s.contentType)
	w.WriteHeader(s.status)
	fmt.Fprint(w, s.body)
}

func TestHTTPSD(t *testing.T) {
	sd := &sdServer{}
	// The first refresh fails: startup must not wait for the endpoint.
	sd.set(http.StatusServiceUnavailable, "text/plain", "warming up")
	srv := httptest.NewServer(sd)
	defer srv.Close()

	cfg := loadConfig(t, fmt.Sprintf(`
http_sd_configs:
  - url: %s/sd?pool=gpu
    refresh_interval: 100ms
    authorization: {credentials: bearer-secret}
relabel_configs:
  - {source_labels: [__meta_url], regex: '.*/sd\?pool=gpu', target_label: from_sd, replacement: "yes"}
  - {source_labels: [model], target_label: __model__}
  - {regex: model, action: labeldrop}
target_defaults:
  modules: [short]
`, srv.URL))
	static := config.DefaultTarget
	static.Name, static.URL = "static", "http://127.0.0.1:8000"
	logs := &logBuffer{}
	m := run(t, cfg, []config.Target{static}, logs.logger())
	if got := m.targets(); !hasNames("static")(got) {
		t.Errorf("before discovery: %v, want the static target", names(got))
	}
	logs.waitLog(t, "level=error", `msg="Unable to refresh target groups"`, "config=http_sd_configs[0]",
		`err="server returned HTTP status 503 Service Unavailable"`)

	sd.set(http.StatusOK, "application/json; charset=utf-8",
		`[{"targets": ["10.0.0.1:8000", "10.0.0.2:8000"], "labels": {"model": "llama", "rack": "r1"}}]`)
	ts := waitTargets(t, m, "the discovered targets", hasNames("10.0.0.1:8000", "10.0.0.2:8000", "static"))
	if got := ts[0]; got.Model != "llama" || got.URL != "http://10.0.0.1:8000" || got.Labels["rack"] != "r1" ||
		got.Labels["from_sd"] != "yes" || len(got.Labels) != 2 || len(got.Modules) != 1 || got.Modules[0] != "short" {
		t.Errorf("discovered target = %+v", got)
	}
	h, q := sd.lastRequest()
	for k, want := range map[string]string{
		"Authorization":                         "Bearer bearer-secret",
		"X-Prometheus-Refresh-Interval-Seconds": "0.1",
		"Accept":                                "application/json",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("request header %s = %q, want %q", k, got, want)
		}
	}
	if q != "pool=gpu" {
		t.Errorf("query = %q", q)
	}

	// Each failure keeps the last good targets and says why.
	for _, tc := range []struct {
		status      int
		contentType string
		body        string
		err         string
	}{
		{http.StatusInternalServerError, "application/json", `[]`, `err="server returned HTTP status 500 Internal Server Error"`},
		{http.StatusOK, "text/plain", `[]`, `err="unsupported content type \"text/plain\""`},
		{http.StatusOK, "application/json", `[{"targets": [`, `err="unexpected end of JSON input"`},
		{http.StatusOK, "application/json", `[null]`, `err="nil target group item found"`},
	} {
		sd.set(tc.status, tc.contentType, tc.body)
		logs.waitLog(t, `msg="Unable to refresh target groups"`, tc.err)
		if got := m.targets(); !hasNames("10.0.0.1:8000", "10.0.0.2:8000", "static")(got) {
			t.Errorf("after %s: targets %v, want the last good ones", tc.err, names(got))
		}
	}

	// Recovery applies the new list; an empty list removes every discovered target.
	sd.set(http.StatusOK, "application/json", `[{"targets": ["10.0.0.3:8000"]}]`)
	waitTargets(t, m, "the changed list", hasNames("10.0.0.3:8000", "static"))
	sd.set(http.StatusOK, "application/json", `[]`)
	waitTargets(t, m, "the emptied list", hasNames("static"))

	if s := logs.String(); strings.Contains(s, "bearer-secret") {
		t.Errorf("a secret reached the log:\n%s", s)
	}
}

func TestHTTPSDBadClientConfig(t *testing.T) {
	cfg := loadConfig(t, `
http_sd_configs:
  - url: http://127.0.0.1:1/sd
    tls_config: {ca_file: /nonexistent/ca.pem}
`)
	err := Check(cfg)
	want := "http_sd_configs[0]: unable to read CA cert: unable to read file /nonexistent/ca.pem: open /nonexistent/ca.pem: no such file or directory"
	if err == nil || err.Error() != want {
		t.Errorf("Check: err = %v, want %s", err, want)
	}
}
