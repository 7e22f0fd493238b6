package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestPrometheusScrapesProbe: a real Prometheus scrapes the vllm_prober
// binary's /probe, through the cross-site guard that refuses browser
// requests, in both shapes a Prometheus asks for it: a blackbox-style job
// naming a configured target (params target and module), and a Prometheus
// Operator Probe's job, whose relabelling puts a URL that
// url_probes.allowed_urls matches into the target parameter. Prometheus'
// scraper sends no Sec-Fetch-Site and no Origin, so both jobs have up 1 and
// the probes' vllm_probe_success 1; the same /probe with a browser's
// cross-site headers gets the guard's 403.
func TestPrometheusScrapesProbe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs vllm_sim, vllm_prober and a real Prometheus for about ten seconds; skipped with -short")
	}
	promBin := prometheusBinary(t)
	proberBin, simBin := binaries(t)
	ctx := t.Context()
	dir := t.TempDir()

	simAddr := freeAddr(t)
	simURL := "http://" + simAddr
	sim := startProcess(t, "vllm_sim", simBin, "--web.listen-address="+simAddr, "--model="+simModel,
		"--ttft=20ms", "--itl=5ms")
	if err := waitReady(ctx, sim, simURL+"/health", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// The schedule is hourly: the probes Prometheus sees are its own.
	proberCfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(proberCfg, []byte(fmt.Sprintf(`global: {probe_interval: 1h}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 4}
targets:
  - {name: sim, url: %q, model: %q, scrape_metrics: false}
url_probes:
  allowed_urls: [%q]
  modules: [short]
`, simURL, simModel, regexp.QuoteMeta(simURL))), 0o644); err != nil {
		t.Fatal(err)
	}
	proberAddr := freeAddr(t)
	proberURL := "http://" + proberAddr
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+proberCfg, "--web.listen-address="+proberAddr)
	if err := waitReady(ctx, prober, proberURL+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// The jobs: blackbox_exporter's multi-target pattern, and what the
	// Prometheus Operator renders for a Probe with a static URL list.
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global: {scrape_interval: 2s, scrape_timeout: 2s}
scrape_configs:
  - job_name: probe_target
    metrics_path: /probe
    params: {target: [sim], module: [short]}
    static_configs: [{targets: [%[1]q]}]
  - job_name: probe_url
    metrics_path: /probe
    params: {module: [short]}
    static_configs: [{targets: [%[2]q]}]
    relabel_configs:
      - {source_labels: [__address__], target_label: __param_target}
      - {source_labels: [__param_target], target_label: instance}
      - {target_label: __address__, replacement: %[1]q}
`, proberAddr, simURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	prom, promURL := startPrometheusFile(t, promBin, dir, promCfg)

	for _, job := range []string{"probe_target", "probe_url"} {
		if err := waitFor(ctx, 60*time.Second, 500*time.Millisecond, "Prometheus' scrape of /probe by job "+job, func(ctx context.Context) (bool, error) {
			for _, p := range []*process{sim, prober, prom} {
				if err := p.exited(); err != nil {
					return false, err
				}
			}
			for _, q := range []string{`up{job="` + job + `"} == 1`, `vllm_probe_success{job="` + job + `"} == 1`} {
				s, err := queryValues(ctx, promURL, q)
				if err != nil {
					return false, err
				}
				if len(s) != 1 {
					return false, fmt.Errorf("%s: %v", q, s)
				}
			}
			return true, nil
		}); err != nil {
			s, _ := queryValues(ctx, promURL, `{__name__=~"up|vllm_probe_success|vllm_probe_failures_total"}`)
			t.Fatalf("%v\nseries: %v", err, s)
		}
	}
	if s, err := queryValues(ctx, promURL, `vllm_probe_success{job="probe_url", instance=`+fmt.Sprintf("%q", simURL)+`}`); err != nil || len(s) != 1 {
		t.Errorf("the URL probe's series is not the URL's (%v): %v", err, s)
	}

	// The guard Prometheus passed is on: an <img> of another site, asking
	// the same binary for the same probe, is refused.
	for _, target := range []string{"sim", simURL} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, proberURL+"/probe?"+url.Values{"module": {"short"}, "target": {target}}.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Sec-Fetch-Dest", "image")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "cross-site request refused: /probe sends requests to targets\n"; resp.StatusCode != http.StatusForbidden || string(body) != want {
			t.Errorf("cross-site /probe of %s = %d %q, want 403 %q", target, resp.StatusCode, body, want)
		}
	}
}
