package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// alertmanagerBinary finds Alertmanager (Debian's prometheus-alertmanager
// package installs it as prometheus-alertmanager). make e2e
// (VLLM_PROBER_E2E=1) requires it; elsewhere the test skips, saying so.
func alertmanagerBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"alertmanager", "prometheus-alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("VLLM_PROBER_E2E") != "" {
		t.Fatal("the vantage proof needs Alertmanager (apt-get install prometheus-alertmanager)")
	}
	testtool.Skip(t, "alertmanager", "Debian: apt-get install prometheus-alertmanager")
	return ""
}

// pathProxy is a TCP proxy with one listener per vantage: each vantage's
// prober reaches the simulator through its own path, and cut drops every
// connection of one path (those open and those to come), as a regional
// network fault would.
type pathProxy struct {
	upstream string
	mu       sync.Mutex
	cut      map[string]bool
	conns    map[string][]net.Conn
	wg       sync.WaitGroup
	ls       []net.Listener
}

func newPathProxy(t *testing.T, upstream string, paths ...string) (*pathProxy, map[string]string) {
	t.Helper()
	p := &pathProxy{upstream: upstream, cut: map[string]bool{}, conns: map[string][]net.Conn{}}
	addrs := map[string]string{}
	for _, path := range paths {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p.ls = append(p.ls, l)
		addrs[path] = l.Addr().String()
		p.wg.Add(1)
		go p.accept(path, l)
	}
	t.Cleanup(p.close)
	return p, addrs
}

func (p *pathProxy) accept(path string, l net.Listener) {
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.cut[path] {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[path] = append(p.conns[path], c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// drop cuts path: its open connections are closed, new ones refused.
func (p *pathProxy) drop(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut[path] = true
	for _, c := range p.conns[path] {
		c.Close()
	}
	p.conns[path] = nil
}

func (p *pathProxy) close() {
	for _, l := range p.ls {
		l.Close()
	}
	p.mu.Lock()
	for path, cs := range p.conns {
		for _, c := range cs {
			c.Close()
		}
		delete(p.conns, path)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// amAlert is one alert of Alertmanager's /api/v2/alerts.
type amAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

func alertmanagerAlerts(ctx context.Context, amURL string) ([]amAlert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, amURL+"/api/v2/alerts?active=true&inhibited=true&silenced=true", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("alertmanager /api/v2/alerts: %s", resp.Status)
	}
	var out []amAlert
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// TestVantages proves the vantage rules end to end: two vllm_prober processes
// with different vantages (eu by global.vantage, probe-only; us by --vantage,
// scraping) probe one vllm_sim, each through its own path of a TCP proxy; a
// real Prometheus scrapes both and evaluates the generated rules
// (--for-scale) and sends its alerts to a real Alertmanager running
// examples/alertmanager/inhibit.yml.
//
//  1. The proxy drops eu's connections: VLLMEndpointUnreachableFromVantage
//     fires for eu, VLLMEndpointDown is never even pending.
//  2. The simulator stops: VLLMEndpointDown fires, once for the target, and
//     of the critical alerts Alertmanager holds only it is not inhibited: one
//     page.
func TestVantages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs vllm_sim, two vllm_prober, Prometheus and Alertmanager for about a minute; skipped with -short")
	}
	amBin := alertmanagerBinary(t)
	promBin := prometheusBinary(t)
	proberBin, simBin := binaries(t)
	ctx := t.Context()
	dir := t.TempDir()
	tl := newTimeline()
	t.Cleanup(func() { t.Logf("timeline (seconds since the simulator was up):\n%s", tl) })

	simAddr := freeAddr(t)
	sim := startProcess(t, "vllm_sim", simBin, "--web.listen-address="+simAddr, "--model="+simModel, "--ttft=20ms", "--itl=5ms")
	if err := waitReady(ctx, sim, "http://"+simAddr+"/health", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	tl.add("vllm_sim up on %s", simAddr)
	proxy, paths := newPathProxy(t, simAddr, "eu", "us")

	// eu names its vantage in the file and probes only; us names it with
	// --vantage and scrapes the simulator's /metrics.
	proberCfg := func(vantage, path string, probeOnly bool) string {
		f := filepath.Join(dir, "vllm_prober-"+path+".yml")
		global := ""
		if vantage != "" {
			global += "  vantage: " + vantage + "\n"
		}
		if probeOnly {
			global += "  probe_only: true\n"
		}
		if err := os.WriteFile(f, []byte(fmt.Sprintf(`global:
  probe_interval: 1s
  probe_timeout: 900ms
  scrape_interval: 1s
  scrape_timeout: 900ms
  rate_window: 10s
%smodules:
  completion:
    prober: completions
    prompt: %q
    max_tokens: 4
targets:
  - name: sim
    url: http://%s
    model: %s
`, global, probePrompt, paths[path], simModel)), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	var proberAddrs []string
	var probers []*process
	for _, p := range []struct {
		path string
		args []string
	}{
		{"eu", []string{"--config.file=" + proberCfg("eu", "eu", true)}},
		{"us", []string{"--config.file=" + proberCfg("", "us", false), "--vantage=us"}},
	} {
		addr := freeAddr(t)
		pr := startProcess(t, "vllm_prober-"+p.path, proberBin, append(p.args, "--web.listen-address="+addr)...)
		if err := waitReady(ctx, pr, "http://"+addr+"/-/ready", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		proberAddrs = append(proberAddrs, addr)
		probers = append(probers, pr)
	}
	tl.add("vllm_prober eu (probe-only) on %s, us on %s", proberAddrs[0], proberAddrs[1])

	// Alertmanager with the example inhibit rule.
	amAddr := freeAddr(t)
	amURL := "http://" + amAddr
	inhibit, err := filepath.Abs("../examples/alertmanager/inhibit.yml")
	if err != nil {
		t.Fatal(err)
	}
	am := startProcess(t, "alertmanager", amBin, "--config.file="+inhibit, "--storage.path="+filepath.Join(dir, "am"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=")
	if err := waitReady(ctx, am, amURL+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Prometheus: the generated rules, every `for` scaled down, alerts to
	// Alertmanager.
	spec, err := mixin.LoadSpec(sloFile)
	if err != nil {
		t.Fatal(err)
	}
	ruleFiles, err := mixin.Generate(mixin.Options{SLOFile: sloFile, OutDir: filepath.Join(dir, "rules"), ForScale: forScale})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mixin.PrometheusConfig(spec, proberAddrs, interval, ruleFiles)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, fmt.Sprintf("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", amAddr)...)
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	prom, promURL := startPrometheusFile(t, promBin, dir, promCfg)
	promAddr := strings.TrimPrefix(promURL, "http://")
	tl.add("prometheus up on %s, alertmanager on %s", promAddr, amAddr)
	client := &mixin.Client{BaseURL: promURL, HTTP: httpClient}
	up := func() error {
		for _, p := range append([]*process{prom, am}, probers...) {
			if err := p.exited(); err != nil {
				return err
			}
		}
		return nil
	}

	// Both vantages reach the endpoint; only us exports server series.
	if err := waitFor(ctx, 60*time.Second, 500*time.Millisecond, "both vantages healthy", func(ctx context.Context) (bool, error) {
		if err := up(); err != nil {
			return false, err
		}
		n, err := client.Query(ctx, `vllm_probe_health_up{target="sim"} == 1`)
		return n == 2, err
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Query(ctx, `vllm_server_up{vantage="eu"}`); err != nil || n != 0 {
		t.Errorf("the probe-only vantage eu exports vllm_server_up: %d series, %v", n, err)
	}
	if n, err := client.Query(ctx, `vllm_server_up{vantage="us"} == 1`); err != nil || n != 1 {
		t.Errorf("the scraping vantage us: %d vllm_server_up series, %v; want 1", n, err)
	}
	tl.add("both vantages healthy")

	// 1. eu's path is cut.
	proxy.drop("eu")
	tl.add("(1) the proxy drops eu's connections")
	endpointDown := func(ctx context.Context) ([]string, error) {
		alerts, err := client.Alerts(ctx)
		var out []string
		for _, a := range alerts {
			if a.Labels["alertname"] == "VLLMEndpointDown" {
				out = append(out, a.State+" "+alertKey(a.Labels))
			}
		}
		return out, err
	}
	var down []string // VLLMEndpointDown seen while us reaches the endpoint
	if err := waitFor(ctx, 60*time.Second, 250*time.Millisecond, "VLLMEndpointUnreachableFromVantage for eu", func(ctx context.Context) (bool, error) {
		if err := up(); err != nil {
			return false, err
		}
		if down, _ = endpointDown(ctx); len(down) > 0 {
			return true, nil
		}
		alerts, err := client.Alerts(ctx)
		for _, a := range alerts {
			if a.State == "firing" && a.Labels["alertname"] == "VLLMEndpointUnreachableFromVantage" {
				if a.Labels["vantage"] != "eu" || a.Labels["target"] != "sim" {
					return false, fmt.Errorf("unexpected ticket %s", alertKey(a.Labels))
				}
				return true, nil
			}
		}
		return false, err
	}); err != nil {
		t.Fatal(err)
	}
	if len(down) > 0 {
		t.Fatalf("VLLMEndpointDown while only eu's path is cut: %v", down)
	}
	tl.add("VLLMEndpointUnreachableFromVantage fires for eu")
	// The page stays silent while us reaches the endpoint, for longer than
	// VLLMEndpointDown's scaled `for`.
	quiet := time.Now().Add(5 * time.Second)
	for time.Now().Before(quiet) {
		if d, err := endpointDown(ctx); err != nil || len(d) > 0 {
			t.Fatalf("VLLMEndpointDown while us reaches the endpoint: %v %v", d, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	tl.add("VLLMEndpointDown silent for 5s after the ticket")

	// 2. The simulator stops.
	sim.halt(t)
	tl.add("(2) vllm_sim stopped")
	if _, err := client.WaitForAlert(withTimeout(t, ctx, 60*time.Second), "VLLMEndpointDown", map[string]string{"target": "sim"}, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	tl.add("VLLMEndpointDown fires")
	if d, _ := endpointDown(ctx); len(d) != 1 {
		t.Errorf("VLLMEndpointDown alerts %v, want one for the target", d)
	}
	// Alertmanager: every critical alert but VLLMEndpointDown is inhibited.
	// Wait until it holds the page, then give the burn-rate alerts that
	// follow a few evaluations to arrive (and be inhibited).
	var pages []string
	settled := time.Time{}
	if err := waitFor(ctx, 60*time.Second, 500*time.Millisecond, "one page in Alertmanager", func(ctx context.Context) (bool, error) {
		alerts, err := alertmanagerAlerts(ctx, amURL)
		if err != nil {
			return false, err
		}
		pages = pages[:0]
		for _, a := range alerts {
			if a.Labels["severity"] == "critical" && len(a.Status.InhibitedBy) == 0 {
				pages = append(pages, alertKey(a.Labels))
			}
		}
		sort.Strings(pages)
		if len(pages) != 1 || !strings.Contains(pages[0], "VLLMEndpointDown") {
			settled = time.Time{}
			return false, fmt.Errorf("pages %v", pages)
		}
		if settled.IsZero() {
			settled = time.Now()
		}
		return time.Since(settled) > 5*time.Second, nil
	}); err != nil {
		t.Fatal(err)
	}
	alerts, err := alertmanagerAlerts(ctx, amURL)
	if err != nil {
		t.Fatal(err)
	}
	inhibited := 0
	for _, a := range alerts {
		if len(a.Status.InhibitedBy) > 0 {
			inhibited++
			t.Logf("inhibited: %s", alertKey(a.Labels))
		}
	}
	tl.add("Alertmanager: one page (%s), %d alerts inhibited", strings.Join(pages, ", "), inhibited)
}

// withTimeout is ctx with a timeout that ends with the test.
func withTimeout(t *testing.T, ctx context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}
