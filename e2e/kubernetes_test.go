package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"
)

// The Prometheus Operator whose CRDs (example/prometheus-operator-crd/) the
// chart's renderings must be accepted with; downloaded from the Go module
// proxy at test time, never committed.
const promOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

const (
	kubeNS      = "e2e-kube"
	kubeRelease = "r"
	kubeSA      = "r-vllm-prober" // the chart's ServiceAccount for release r
	chartPath   = "../deploy/helm/vllm-prober"
)

// TestKubernetesDiscovery runs vllm_prober's kubernetes_sd_configs, as the
// chart renders them and with the chart's RBAC, against a real kube-apiserver:
// the chart's renderings are accepted by the API server (with the Prometheus
// Operator's CRDs), its ServiceAccount may list and watch exactly the kinds
// discovered, and pods, Services and EndpointSlices that come, change labels
// and go are followed (roles pod, service and endpointslice).
func TestKubernetesDiscovery(t *testing.T) {
	start := time.Now()
	k := startKube(t, kubeNS, kubeSA)
	t.Logf("TIMING kube-apiserver and etcd ready in %.1fs", time.Since(start).Seconds())
	helm := helmBinary(t)
	proberBin, simBin := binaries(t)
	k.kubectlT(t, "", "create", "namespace", kubeNS)

	installPromOperatorCRDs(t, k)

	// Every rendering of the chart (defaults, sharded, each recipe) is
	// accepted by the API server, and its config passes --config.check.
	renderings := map[string][]string{
		"default": nil,
		"sharded": {"--set", "sharding.enabled=true"},
		"apiKeys": {"--set", "apiKeys.vllm=sk-e2e"},
		"static":  {"--set", "discovery.enabled=false", "--set-json", `config.targets=[{"name":"vllm","url":"http://vllm:8000"}]`},
	}
	recipes, err := filepath.Glob(filepath.Join(chartPath, "recipes", "*.yaml"))
	if err != nil || len(recipes) == 0 {
		t.Fatalf("no recipes in %s/recipes: %v", chartPath, err)
	}
	for _, r := range recipes {
		renderings["recipe "+strings.TrimSuffix(filepath.Base(r), ".yaml")] = []string{"-f", r}
	}
	names := make([]string, 0, len(renderings))
	for n := range renderings {
		names = append(names, n)
	}
	sort.Strings(names)
	rendered := map[string]string{}
	for _, n := range names {
		manifest := helmTemplateArgs(t, helm, renderings[n]...)
		rendered[n] = manifest
		if out, err := k.run(t.Context(), manifest, "apply", "--dry-run=server", "-f", "-"); err != nil {
			t.Errorf("rendering %s: the API server refuses it: %v", n, err)
		} else {
			t.Logf("rendering %s: accepted (%d objects)", n, strings.Count(out, "\n"))
		}
		cfgFile := filepath.Join(t.TempDir(), "config.yml")
		writeFile(t, cfgFile, chartConfig(t, manifest))
		if out, err := exec.CommandContext(t.Context(), proberBin, "--config.file="+cfgFile, "--config.check").CombinedOutput(); err != nil {
			t.Errorf("rendering %s: --config.check refuses its config.yml: %v\n%s", n, err, out)
		}
	}

	// The recipe with pods and Services is applied for real: its RBAC is
	// what vllm_prober runs with below.
	manifest := rendered["recipe service-and-pods"]
	k.kubectlT(t, manifest, "apply", "-f", "-")
	checkRBAC(t, k, map[string]bool{
		"list pods": true, "watch pods": true, "list services": true, "watch services": true,
		"get pods": false, "create pods": false, "delete pods": false, "patch pods": false,
		"list secrets": false, "get secrets": false, "list configmaps": false,
		"list endpointslices.discovery.k8s.io": false, "list nodes": false,
		"list pods -n default": false, "watch pods -n default": false,
	})

	// vllm_prober with that config, through a kubeconfig whose token is the
	// chart's ServiceAccount; probing every second.
	saKubeconfig := k.writeKubeconfig(t, "sa.kubeconfig", saToken)
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(chartConfig(t, manifest)), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["global"] = map[string]any{"probe_interval": "1s", "scrape_interval": "1s", "rate_window": "10s"}
	cfg["modules"] = map[string]any{"completions": map[string]any{"prober": "completions", "prompt": "Say hello.", "max_tokens": 4}}
	sds, _ := cfg["kubernetes_sd_configs"].([]any)
	if len(sds) != 2 {
		t.Fatalf("the service-and-pods recipe renders %d kubernetes_sd_configs, want 2 (pod, service)", len(sds))
	}
	for _, sd := range sds {
		sd.(map[any]any)["kubeconfig_file"] = saKubeconfig
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "prober.yml")
	writeFile(t, cfgFile, string(b))
	if out, err := exec.CommandContext(t.Context(), proberBin, "--config.file="+cfgFile, "--config.check").CombinedOutput(); err != nil {
		t.Fatalf("--config.check: %v\n%s", err, out)
	}

	simA, simB := freeAddr(t), freeAddr(t)
	for name, addr := range map[string]string{"sim-a": simA, "sim-b": simB} {
		startProcess(t, name, simBin, "--web.listen-address="+addr, "--model="+name, "--ttft=5ms", "--itl=2ms")
	}
	proberAddr := freeAddr(t)
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+cfgFile, "--web.listen-address="+proberAddr, "--log.level=debug")
	metricsURL := "http://" + proberAddr + "/metrics"
	if err := waitFor(t.Context(), 30*time.Second, 100*time.Millisecond, "vllm_prober to answer", func(ctx context.Context) (bool, error) {
		if err := prober.exited(); err != nil {
			t.Fatal(err)
		}
		c, err := httpStatus(ctx, metricsURL)
		return c == http.StatusOK, err
	}); err != nil {
		t.Fatal(err)
	}

	port := func(addr string) int {
		i := strings.LastIndex(addr, ":")
		p, _ := strconv.Atoi(addr[i+1:])
		return p
	}
	probed := func(target string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			m, err := scrapeText(ctx, metricsURL)
			return seriesValue(m, "vllm_probe_attempts_total", `target="`+target+`"`) >= 1, err
		}
	}
	notProbed := func(target string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			m, err := scrapeText(ctx, metricsURL)
			return err == nil && !hasSeries(m, "vllm_probe_attempts_total", `target="`+target+`"`), err
		}
	}
	timed := func(what string, cond func(context.Context) (bool, error)) time.Duration {
		t.Helper()
		t0 := time.Now()
		if err := waitFor(t.Context(), 30*time.Second, 50*time.Millisecond, what, cond); err != nil {
			t.Fatal(err)
		}
		d := time.Since(t0)
		t.Logf("TIMING %s: %.2fs", what, d.Seconds())
		return d
	}

	// A pod matching the selector, with the model label: probed, as sim-a.
	k.createPod(t, "vllm-a", map[string]string{"app.kubernetes.io/name": "vllm", "vllm-prober.io/model": "sim-a"}, "http", port(simA), true)
	timed("pod running -> first probe attempt", probed(kubeNS+".vllm-a"))
	timed("pod running -> first request served by its simulator", func(context.Context) (bool, error) { return simRequests(t, simA) >= 1, nil })
	if m, _ := scrapeText(t.Context(), metricsURL); !hasSeries(m, "vllm_probe_attempts_total", `target="`+kubeNS+`.vllm-a"`, `model="sim-a"`) {
		t.Errorf("vllm-a is not probed with the model of its label (sim-a)")
	}

	// Pods the chart must not probe: another app, another port name, not
	// running yet. And one it must: the second sim, under a label change.
	k.createPod(t, "vllm-b", map[string]string{"app.kubernetes.io/name": "other"}, "http", port(simB), true)
	k.createPod(t, "vllm-wrong-port", map[string]string{"app.kubernetes.io/name": "vllm"}, "metrics", port(simB), true)
	k.createPod(t, "vllm-pending", map[string]string{"app.kubernetes.io/name": "vllm"}, "http", port(simB), false)
	// A Service of the vllm app on its http port: one target per Service.
	k.kubectlT(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"vllm-svc","namespace":%q,"labels":{"app.kubernetes.io/name":"vllm"}},
"spec":{"selector":{"app.kubernetes.io/name":"vllm"},"ports":[{"name":"http","port":8000}]}}`, kubeNS), "apply", "-f", "-")
	timed("service added -> probing (its DNS name does not resolve here: the target exists, its probes fail)", probed(kubeNS+".vllm-svc"))
	time.Sleep(3 * time.Second) // three probe intervals
	m, err := scrapeText(t.Context(), metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vllm-b", "vllm-wrong-port", "vllm-pending"} {
		if hasSeries(m, "vllm_probe_attempts_total", `target="`+kubeNS+"."+name+`"`) {
			t.Errorf("%s is probed; the chart's rules must leave it out", name)
		}
	}

	// A label change brings vllm-b in ...
	k.kubectlT(t, "", "label", "pod", "-n", kubeNS, "vllm-b", "app.kubernetes.io/name=vllm", "--overwrite")
	timed("label changed to match -> probing", probed(kubeNS+".vllm-b"))
	// ... and takes vllm-a out.
	k.kubectlT(t, "", "label", "pod", "-n", kubeNS, "vllm-a", "app.kubernetes.io/name=retired", "--overwrite")
	timed("label changed to not match -> stopped", notProbed(kubeNS+".vllm-a"))
	// A deleted pod is no longer probed, and its simulator gets no more requests.
	k.kubectlT(t, "", "delete", "pod", "-n", kubeNS, "vllm-b", "--wait=false", "--grace-period=0", "--force")
	timed("pod deleted -> stopped", notProbed(kubeNS+".vllm-b"))
	before := simRequests(t, simB)
	time.Sleep(3 * time.Second)
	if after := simRequests(t, simB); after != before {
		t.Errorf("sim-b served %v requests after its pod was deleted (%v before)", after-before, before)
	}

	// role endpointslice, through a second vllm_prober with its own rules: an
	// FQDN slice (IPv4 slices refuse loopback addresses) of a headless Service,
	// its endpoint pointing at a pod. The name does not resolve here: the
	// target exists, its probes fail with reason dns.
	k.kubectlT(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"vllm-headless","namespace":%q},
"spec":{"clusterIP":"None","ipFamilyPolicy":"SingleStack","ports":[{"name":"http","port":%d}]}}`, kubeNS, port(simB)), "apply", "-f", "-")
	k.kubectlT(t, fmt.Sprintf(`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"vllm-fqdn","namespace":%q,
"labels":{"kubernetes.io/service-name":"vllm-headless"}},"addressType":"FQDN","ports":[{"name":"http","port":%d}],
"endpoints":[{"addresses":["vllm-es.e2e.invalid"],"conditions":{"ready":true},"targetRef":{"kind":"Pod","name":"vllm-es","namespace":%q}}]}`,
		kubeNS, port(simB), kubeNS), "apply", "-f", "-")
	esCfg := filepath.Join(t.TempDir(), "endpointslice.yml")
	writeFile(t, esCfg, fmt.Sprintf(`
global: {probe_interval: 1s, scrape_interval: 1s, rate_window: 10s}
modules: {completions: {prober: completions, prompt: "Say hello.", max_tokens: 4}}
kubernetes_sd_configs:
  - {role: endpointslice, kubeconfig_file: %q, namespaces: {names: [%s]}}
relabel_configs:
  - {source_labels: [__meta_kubernetes_service_name, __meta_kubernetes_endpointslice_port_name], regex: "vllm-headless;http", action: keep}
  - {source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_endpointslice_address_target_name], regex: "(.+);(.+)", target_label: __target_name__, replacement: "$1.$2"}
`, k.kubeconfig, kubeNS))
	esAddr := freeAddr(t)
	startProcess(t, "vllm_prober-endpointslice", proberBin, "--config.file="+esCfg, "--web.listen-address="+esAddr)
	esMetrics := "http://" + esAddr + "/metrics"
	timed("endpointslice -> probing (start included)", func(ctx context.Context) (bool, error) {
		m, err := scrapeText(ctx, esMetrics)
		return seriesValue(m, "vllm_probe_attempts_total", `target="`+kubeNS+`.vllm-es"`) >= 1, err
	})
	k.kubectlT(t, "", "delete", "endpointslice", "-n", kubeNS, "vllm-fqdn")
	timed("endpointslice deleted -> stopped", func(ctx context.Context) (bool, error) {
		m, err := scrapeText(ctx, esMetrics)
		return err == nil && !hasSeries(m, "vllm_probe_attempts_total", `target="`+kubeNS+`.vllm-es"`), err
	})

	// The discovery metrics of Prometheus' kubernetes SD are exported.
	m, _ = scrapeText(t.Context(), metricsURL)
	if !strings.Contains(m, "prometheus_sd_kubernetes_events_total{") {
		t.Errorf("no prometheus_sd_kubernetes_events_total on /metrics")
	}
	t.Logf("TIMING whole test: %.1fs", time.Since(start).Seconds())
}

// createPod creates a pod in kubeNS with one container port and, when
// running, gives it what a kubelet would (phase Running, IP 127.0.0.1, Ready)
// through the status subresource.
func (k *kubeCluster) createPod(t *testing.T, name string, labels map[string]string, portName string, port int, running bool) {
	t.Helper()
	ip := ""
	if running {
		ip = "127.0.0.1"
	}
	k.createPodIP(t, kubeNS, name, labels, portName, port, ip)
}

// createPodIP creates a pod in namespace ns with one container port and,
// when ip is not empty, makes it Running and Ready with that pod IP.
func (k *kubeCluster) createPodIP(t *testing.T, ns, name string, labels map[string]string, portName string, port int, ip string) {
	t.Helper()
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec": map[string]any{"containers": []any{map[string]any{
			"name": "vllm", "image": "vllm/vllm-openai:latest",
			"ports": []any{map[string]any{"name": portName, "containerPort": port}},
		}}},
	}
	b, _ := json.Marshal(pod)
	k.kubectlT(t, string(b), "apply", "-f", "-")
	if ip != "" {
		k.setPodReady(t, ns, name, ip, true)
	}
}

// setPodReady sets a pod's status as a kubelet would: Running with ip, its
// Ready condition ready.
func (k *kubeCluster) setPodReady(t *testing.T, ns, name, ip string, ready bool) {
	t.Helper()
	status := "False"
	if ready {
		status = "True"
	}
	k.kubectlT(t, "", "patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge", "-p",
		fmt.Sprintf(`{"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}],"conditions":[{"type":"Ready","status":%q}]}}`, ip, ip, status))
}

// checkRBAC asks the API server what the chart's ServiceAccount may do in
// kubeNS (or the namespace after -n).
func checkRBAC(t *testing.T, k *kubeCluster, want map[string]bool) {
	t.Helper()
	as := "--as=system:serviceaccount:" + kubeNS + ":" + kubeSA
	for q, allowed := range want {
		args := append([]string{"auth", "can-i"}, strings.Fields(q)...)
		if !strings.Contains(q, " -n ") {
			args = append(args, "-n", kubeNS)
		}
		out, err := k.run(t.Context(), "", append(args, as)...)
		got := strings.TrimSpace(out) == "yes"
		if err != nil && got {
			t.Fatalf("kubectl auth can-i %s: %v", q, err)
		}
		if got != allowed {
			t.Errorf("the chart's ServiceAccount can %s: %v, want %v", q, got, allowed)
		}
	}
}

// installPromOperatorCRDs applies the Prometheus Operator's CRDs from its Go
// module and waits until they are established.
func installPromOperatorCRDs(t *testing.T, k *kubeCluster) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", promOperatorModule)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", promOperatorModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: no directory in %s (%v)", promOperatorModule, out, err)
	}
	crds := filepath.Join(mod.Dir, "example", "prometheus-operator-crd")
	k.kubectlT(t, "", "apply", "--server-side", "-f", crds)
	k.kubectlT(t, "", "wait", "--for=condition=established", "--timeout=60s", "crd", "--all")
}

func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := exec.LookPath("helm")
	if err != nil {
		t.Fatalf("helm is needed to render the chart: %v", err)
	}
	return h
}

func helmTemplateArgs(t *testing.T, helm string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), helm, append([]string{"template", kubeRelease, chartPath, "--namespace", kubeNS}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("helm template %v: %v\n%s", args, err, stderr)
	}
	return string(out)
}

// chartConfig returns config.yml of the rendered chart's ConfigMap.
func chartConfig(t *testing.T, manifest string) string {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---") {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			continue
		}
		if obj.Kind == "ConfigMap" && obj.Data["config.yml"] != "" {
			return obj.Data["config.yml"]
		}
	}
	t.Fatal("the rendered chart has no ConfigMap with config.yml")
	return ""
}

func scrapeText(ctx context.Context, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// hasSeries reports whether text has a series of metric whose labels hold
// every one of parts.
func hasSeries(text, metric string, parts ...string) bool {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// seriesValue sums the values of the series hasSeries would match (0 if none).
func seriesValue(text, metric string, parts ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if f := strings.Fields(line); ok && len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// simRequests sums vllm:request_success_total of the simulator at addr.
func simRequests(t *testing.T, addr string) float64 {
	t.Helper()
	m, err := scrapeText(t.Context(), "http://"+addr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "vllm:request_success_total{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}
