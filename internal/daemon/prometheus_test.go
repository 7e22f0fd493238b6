package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProbeScrapedByPrometheus: a real Prometheus (Debian's 2.x on $PATH, or
// $PROMETHEUS) scrapes /probe as a blackbox-style job does; the cross-site
// guard of /probe lets its scraper through (it sends no Sec-Fetch-Site and no
// Origin): up is 1 and the probe's vllm_probe_success 1 reaches Prometheus.
func TestProbeScrapedByPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	promBin := prometheusBin(t)
	f := newFixture(t)
	dir := t.TempDir()
	promCfg := filepath.Join(dir, "prometheus.yml")
	u, _ := url.Parse(f.srv.URL)
	writeConfig(t, promCfg, fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 900ms}
scrape_configs:
  - job_name: vllm_probe
    metrics_path: /probe
    params: {target: [sim], module: [short_completion]}
    static_configs: [{targets: [%q]}]
`, u.Host))
	promAddr := freeAddr(t)
	cmd := exec.CommandContext(t.Context(), promBin, "--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	query := func(q string) string {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		var r struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil || len(r.Data.Result) != 1 {
			return ""
		}
		v, _ := r.Data.Result[0].Value[1].(string)
		return v
	}
	deadline := time.Now().Add(60 * time.Second)
	for query(`up{job="vllm_probe"}`) != "1" || query(`vllm_probe_success{job="vllm_probe"}`) != "1" {
		if time.Now().After(deadline) {
			resp, err := http.Get("http://" + promAddr + "/api/v1/targets")
			var targets string
			if err == nil {
				var b strings.Builder
				_, _ = fmt.Fprint(&b, resp.Status)
				buf := make([]byte, 4096)
				n, _ := resp.Body.Read(buf)
				b.Write(buf[:n])
				resp.Body.Close()
				targets = b.String()
			}
			t.Fatalf("Prometheus did not scrape /probe successfully within 60s: up=%q success=%q\ntargets: %s\nlogs:\n%s",
				query(`up{job="vllm_probe"}`), query(`vllm_probe_success{job="vllm_probe"}`), targets, logs.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// prometheusBin is the Prometheus server the tests run: $PROMETHEUS, else
// prometheus on $PATH (Debian's 2.x).
func prometheusBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMETHEUS"); p != "" {
		return p
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("this test needs a Prometheus server and none is on $PATH (%v): install Debian's prometheus package, set $PROMETHEUS, or run go test -short", err)
	}
	return p
}
