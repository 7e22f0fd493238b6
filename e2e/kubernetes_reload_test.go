package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKubernetesDiscoveryReload reloads a vllm_prober running
// kubernetes_sd_configs against a real kube-apiserver. Its one discovery
// manager keeps a discoverer across a reload that changes only
// relabel_configs (no new list of the pods: the pod role's add events stay
// where they were) and the unchanged target's series run on; a reload that
// fails (a file that does not load, a baseline file that does not exist)
// leaves the old discoverer watching; a reload that changes the
// discoverer's configuration (its selector) swaps it for one that lists the
// pods again under the new selector.
func TestKubernetesDiscoveryReload(t *testing.T) {
	k := startKube(t, kubeNS, kubeSA)
	proberBin, simBin := binaries(t)
	k.kubectlT(t, "", "create", "namespace", kubeNS)

	simA, simB := freeAddr(t), freeAddr(t)
	for name, addr := range map[string]string{"sim-a": simA, "sim-b": simB} {
		startProcess(t, name, simBin, "--web.listen-address="+addr, "--model="+name, "--ttft=5ms", "--itl=2ms")
	}
	port := func(addr string) int {
		p, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
		return p
	}
	k.createPod(t, "vllm-a", map[string]string{"app.kubernetes.io/name": "vllm"}, "http", port(simA), true)
	k.createPod(t, "vllm-b", map[string]string{"app.kubernetes.io/name": "vllm", "pick": "yes"}, "http", port(simB), true)

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "prober.yml")
	configFor := func(selector, tier, extra string) string {
		return fmt.Sprintf(`
global: {probe_interval: 1s, scrape_interval: 1s, rate_window: 10s}
modules: {completions: {prober: completions, prompt: "Say hello.", max_tokens: 4}}
kubernetes_sd_configs:
  - role: pod
    kubeconfig_file: %q
    namespaces: {names: [%s]}
    selectors: [{role: pod, label: %q}]
relabel_configs:
  - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: http, action: keep}
  - {source_labels: [__meta_kubernetes_pod_phase], regex: Running, action: keep}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: __target_name__}
  - {source_labels: [__meta_kubernetes_pod_name], regex: vllm-b, target_label: tier, replacement: %s}
%s`, k.kubeconfig, kubeNS, selector, tier, extra)
	}
	writeFile(t, cfgFile, configFor("app.kubernetes.io/name=vllm", "gold", ""))
	proberAddr := freeAddr(t)
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+cfgFile, "--web.listen-address="+proberAddr, "--log.level=debug")
	metricsURL := "http://" + proberAddr + "/metrics"
	scrape := func() string {
		t.Helper()
		if err := prober.exited(); err != nil {
			t.Fatal(err)
		}
		m, err := scrapeText(t.Context(), metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	wait := func(what string, cond func(m string) bool) {
		t.Helper()
		if err := waitFor(t.Context(), 60*time.Second, 100*time.Millisecond, what, func(ctx context.Context) (bool, error) {
			m, err := scrapeText(ctx, metricsURL)
			return err == nil && cond(m), err
		}); err != nil {
			t.Fatalf("%v; vllm_prober's log:\n%s", err, prober.logTail())
		}
	}
	attempts := func(m, target string) float64 {
		return seriesValue(m, "vllm_probe_attempts_total", `target="`+target+`"`)
	}
	// Pods listed by the pod discoverers: each new discoverer lists them
	// all again.
	podAdds := func(m string) float64 {
		return seriesValue(m, "prometheus_sd_kubernetes_events_total", `event="add"`, `role="pod"`)
	}
	reload := func(config string) (int, string) {
		t.Helper()
		writeFile(t, cfgFile, config)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+proberAddr+"/-/reload", nil)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	wait("both pods probed, vllm-b with tier gold", func(m string) bool {
		return attempts(m, "vllm-a") >= 2 && hasSeries(m, "vllm_probe_attempts_total", `target="vllm-b"`, `tier="gold"`)
	})
	m := scrape()
	if v := seriesValue(m, "prometheus_sd_discovered_targets", `config="kubernetes_sd_configs[0]"`, `name="vllm_prober"`); v != 2 {
		t.Errorf(`prometheus_sd_discovered_targets{config="kubernetes_sd_configs[0]"} = %v, want 2 (the two pods' ports)`, v)
	}
	adds := podAdds(m)
	if adds < 2 {
		t.Fatalf("%v pod add events after the first list, want at least 2", adds)
	}

	// (a) Only relabel_configs change: the discoverer stays, vllm-a's series
	// run on, vllm-b's label follows.
	before := attempts(m, "vllm-a")
	if code, body := reload(configFor("app.kubernetes.io/name=vllm", "silver", "")); code != http.StatusOK {
		t.Fatalf("reload with new relabel_configs: %d %s", code, body)
	}
	wait("vllm-b probed with tier silver", func(m string) bool {
		return hasSeries(m, "vllm_probe_attempts_total", `target="vllm-b"`, `tier="silver"`) &&
			!hasSeries(m, "vllm_probe_attempts_total", `target="vllm-b"`, `tier="gold"`)
	})
	m = scrape()
	if n := attempts(m, "vllm-a"); n < before {
		t.Errorf("vllm-a's vllm_probe_attempts_total went from %v to %v across a relabel-only reload: its series restarted", before, n)
	}
	if n := podAdds(m); n != adds {
		t.Errorf("%v pod add events after a relabel-only reload, want still %v: a new discoverer listed the pods", n, adds)
	}

	// (c) Failed reloads keep the old discoverer: no new list, and it still
	// follows the cluster.
	for _, bad := range []struct{ what, config string }{
		{"an invalid file", "kubernetes_sd_configs: [{role: pod\n"},
		{"a missing baseline file", configFor("pick=yes", "silver", "baselines: [{name: b, file: missing-baseline.yml}]")},
	} {
		if code, body := reload(bad.config); code != http.StatusInternalServerError {
			t.Errorf("reload with %s: %d %s, want 500", bad.what, code, body)
		}
		m = scrape()
		if n := podAdds(m); n != adds {
			t.Errorf("%v pod add events after a reload with %s, want still %v", n, bad.what, adds)
		}
		before := attempts(m, "vllm-a")
		wait("vllm-a probed on after a reload with "+bad.what, func(m string) bool { return attempts(m, "vllm-a") > before })
	}
	k.createPod(t, "vllm-c", map[string]string{"app.kubernetes.io/name": "vllm"}, "http", port(simA), true)
	wait("vllm-c, created after the failed reloads, probed", func(m string) bool { return attempts(m, "vllm-c") >= 1 })
	adds = podAdds(scrape())

	// (b) The selector changes: a new discoverer lists the pods under it;
	// only vllm-b matches.
	if code, body := reload(configFor("pick=yes", "silver", "")); code != http.StatusOK {
		t.Fatalf("reload with a new selector: %d %s", code, body)
	}
	wait("only vllm-b probed under the new selector", func(m string) bool {
		return attempts(m, "vllm-b") >= 1 && !hasSeries(m, "vllm_probe_attempts_total", `target="vllm-a"`) &&
			!hasSeries(m, "vllm_probe_attempts_total", `target="vllm-c"`)
	})
	if n := podAdds(scrape()); n <= adds {
		t.Errorf("%v pod add events after the selector changed, want more than %v: no new discoverer listed the pods", n, adds)
	}
}
