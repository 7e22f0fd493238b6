package daemon

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDiscoverySecretsNotShown: the credentials of kubernetes_sd_configs and
// http_sd_configs, and of target_defaults (the client of every discovered
// target), reach neither /config nor the log, even while the discoverers fail
// against an API server and an endpoint that refuse connections.
func TestDiscoverySecretsNotShown(t *testing.T) {
	const (
		kubeSecret = "sk-kube-api-token-91c2"
		httpSecret = "sk-http-sd-token-4b7e"
		tdSecret   = "sk-target-defaults-0d3f"
	)
	f := &fixture{t: t, sim: startSim(t, simKey), echo: startEcho(t)}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	dead := "127.0.0.1:" + strings.Split(freeAddr(t), ":")[1]
	// An API server that refuses this client: client-go gives up a refused
	// list at once, where a connection error would make its reflector sleep
	// through a backoff that ignores cancellation (up to 30 s).
	var apiAuth atomic.Value
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
	}))
	t.Cleanup(api.Close)
	writeConfig(t, f.path, configText(f.sim.URL, f.echo.URL, fmt.Sprintf(`
kubernetes_sd_configs:
  - role: pod
    api_server: %s
    authorization: {credentials: %s}
    tls_config: {insecure_skip_verify: true}
http_sd_configs:
  - url: http://%s/sd
    refresh_interval: 100ms
    authorization: {credentials: %s}
target_defaults:
  http_client_config:
    authorization: {credentials: %s}
`, api.URL, kubeSecret, dead, httpSecret, tdSecret)))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5})
	waitFor(t, 10*time.Second, "the http_sd failure in the log", func() bool {
		return strings.Contains(f.logs.String(), "Unable to refresh target groups")
	})
	code, body := f.get("/config")
	if code != http.StatusOK {
		t.Fatalf("/config: %d", code)
	}
	waitFor(t, 10*time.Second, "the API server to have been asked", func() bool { return apiAuth.Load() != nil })
	if got := apiAuth.Load(); got != "Bearer "+kubeSecret {
		t.Errorf("the API server got Authorization %q, want kubernetes_sd_configs' credentials", got)
	}
	for _, s := range []string{kubeSecret, httpSecret, tdSecret} {
		if strings.Contains(body, s) {
			t.Errorf("/config shows %s:\n%s", s, body)
		}
		if strings.Contains(f.logs.String(), s) {
			t.Errorf("the log shows %s", s)
		}
	}
	if !strings.Contains(body, "kubernetes_sd_configs") || !strings.Contains(body, "<secret>") {
		t.Errorf("/config lacks the discovery sections or their <secret> placeholders:\n%s", body)
	}
	if _, m := f.get("/metrics"); !strings.Contains(m, "prometheus_sd_http_failures_total") || !strings.Contains(m, "prometheus_sd_kubernetes_events_total") {
		t.Errorf("/metrics lacks the prometheus_sd_* metrics")
	}
}
