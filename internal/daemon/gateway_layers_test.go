package daemon

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// haproxyDelayLua is an HAProxy action that holds every request for 700 ms
// before it is balanced: a gateway slow on its own, in front of healthy members.
const haproxyDelayLua = `core.register_action("delay", { "http-req" }, function(txn) core.msleep(700) end)
`

// TestGatewayLayerAlertsOnPrometheus: real HAProxy in front of vllm_sim
// members, the daemon probing gateways and members, and a real Prometheus
// evaluating the mixin's alerts (their for and windows scaled down). gw
// balances s1, s2 and s3, s3 four times slower: VLLMGatewayMemberSlow fires
// naming s3, and no alert of gw says layer endpoint but the member page. gw2,
// HAProxy holding each request 700 ms in front of the healthy h1 and h2,
// fires VLLMGatewayOverheadHigh at layer gateway.
func TestGatewayLayerAlertsOnPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts HAProxy and a Prometheus server")
	}
	promBin := prometheusBin(t)
	const base = 50 * time.Millisecond
	sims := map[string]string{}
	for name, ttft := range map[string]time.Duration{"s1": base, "s2": base, "s3": 4 * base, "h1": base, "h2": base} {
		sims[name] = hostPort(t, startPlainSim(t, func(c *simulator.Config) { c.TTFT, c.ITL = ttft, time.Millisecond }))
	}
	balancer := func(global, frontend string, names ...string) int {
		var list []string
		for _, n := range names {
			list = append(list, n+" "+sims[n])
		}
		return testtool.HAProxyBalancerGlobal(t, global, list, frontend, "")
	}
	gw := balancer("", "", "s1", "s2", "s3")
	lua := filepath.Join(t.TempDir(), "delay.lua")
	if err := os.WriteFile(lua, []byte(haproxyDelayLua), 0o644); err != nil {
		t.Fatal(err)
	}
	gw2 := balancer("  lua-load "+lua+"\n", "  http-request lua.delay\n", "h1", "h2")

	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "vllm_prober.yml")}
	var targets strings.Builder
	for _, n := range []string{"s1", "s2", "s3", "h1", "h2"} {
		fmt.Fprintf(&targets, "  - {name: %s, url: \"http://%s\", scrape_metrics: false}\n", n, sims[n])
	}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 1s}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 4}
targets:
%s  - name: gw
    url: http://127.0.0.1:%d
    scrape_metrics: false
    gateway: {members: [s1, s2, s3], member_header: X-Served-By}
  - name: gw2
    url: http://127.0.0.1:%d
    scrape_metrics: false
    gateway: {members: [h1, h2], member_header: X-Served-By}
`, targets.String(), gw, gw2))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5, ProbeWindow: 15 * time.Second})

	// The mixin's rules, every for and window scaled by 0.01 (10m: 6s).
	dir := t.TempDir()
	sloFile := "../../mixin/slo.yml"
	spec, err := mixin.LoadSpec(sloFile)
	if err != nil {
		t.Fatal(err)
	}
	ruleFiles, err := mixin.Generate(mixin.Options{SLOFile: sloFile, OutDir: filepath.Join(dir, "rules"), ForScale: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mixin.PrometheusConfig(spec, []string{u.Host}, time.Second, ruleFiles)
	if err != nil {
		t.Fatal(err)
	}
	promCfg := filepath.Join(dir, "prometheus.yml")
	writeConfig(t, promCfg, string(cfg))
	promAddr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promBin, "--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	prom := &mixin.Client{BaseURL: "http://" + promAddr}

	slow, err := prom.WaitForAlert(ctx, "VLLMGatewayMemberSlow", map[string]string{"target": "gw", "member": "s3", "layer": mixin.LayerEndpoint}, 500*time.Millisecond)
	if err != nil {
		t.Fatalf("VLLMGatewayMemberSlow naming s3: %v\nprometheus:\n%s", err, logs.String())
	}
	t.Logf("VLLMGatewayMemberSlow %v value %s: %s", slow.Labels, slow.Value, slow.Annotations["description"])
	over, err := prom.WaitForAlert(ctx, "VLLMGatewayOverheadHigh", map[string]string{"target": "gw2", "layer": mixin.LayerGateway}, 500*time.Millisecond)
	if err != nil {
		_, body := f.get("/metrics")
		var gwLines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.Contains(l, `target="gw2"`) && !strings.Contains(l, "_bucket") {
				gwLines = append(gwLines, l)
			}
		}
		t.Fatalf("VLLMGatewayOverheadHigh of gw2: %v\nthe daemon's gw2 series:\n%s", err, strings.Join(gwLines, "\n"))
	}
	t.Logf("VLLMGatewayOverheadHigh %v value %ss", over.Labels, over.Value)

	alerts, err := prom.Alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		switch {
		case a.Labels["target"] == "gw" && a.Labels["layer"] == mixin.LayerEndpoint && a.Labels["alertname"] != "VLLMGatewayMemberSlow":
			t.Errorf("an endpoint page for the gateway: %s %v", a.State, a.Labels)
		case a.Labels["alertname"] == "VLLMGatewayMemberSlow" && a.Labels["member"] != "s3":
			t.Errorf("VLLMGatewayMemberSlow names %s, not s3: %v", a.Labels["member"], a.Labels)
		case a.Labels["alertname"] == "VLLMGatewayOverheadHigh" && a.Labels["target"] != "gw2":
			t.Errorf("VLLMGatewayOverheadHigh for %s, whose gateway adds nothing: %v", a.Labels["target"], a.Labels)
		case a.Labels["alertname"] == "VLLMGatewayMemberFailing":
			t.Errorf("VLLMGatewayMemberFailing with every member answering: %v", a.Labels)
		}
	}
}
