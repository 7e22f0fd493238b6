package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/percentile"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/mixin"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// The Endpoint Picker's world: one namespace, one InferencePool of three
// vllm_sim pods, the objectives that give requests a priority.
const (
	eppNS    = "e2e-epp"
	eppPool  = "vllm-pool"
	eppModel = "e2e/epp-model"
	// eppSheddable is the InferenceObjective of priority -1: the EPP drops
	// its requests while the pool is saturated.
	eppSheddable = "sheddable"
	eppObjective = "x-gateway-inference-objective"
)

// eppTool returns the Endpoint Picker binary and its CRDs that `make e2e`
// builds and caches (scripts/e2e-tools.sh epp) and names in E2E_EPP_DIR, or
// skips, saying so where make test shows it.
func eppTool(t *testing.T) (bin, crds string) {
	t.Helper()
	dir := os.Getenv("E2E_EPP_DIR")
	if dir == "" {
		testtool.Skip(t, "the inference extension's Endpoint Picker (E2E_EPP_DIR)",
			"make e2e builds and caches it with scripts/e2e-tools.sh epp")
	}
	bin, crds = filepath.Join(dir, "epp"), filepath.Join(dir, "crds")
	for _, p := range []string{bin, crds} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("E2E_EPP_DIR: %v", err)
		}
	}
	return bin, crds
}

// eppPod is one member of the pool: a vllm_sim on its own loopback address.
type eppPod struct {
	name string
	ip   string
	addr string // ip:port, as the EPP names it in x-gateway-destination-endpoint
	sim  *process
}

func (p *eppPod) url() string { return "http://" + p.addr }

// eppStack is a kube-apiserver with the inference extension's CRDs, an
// InferencePool of vllm_sim pods, the Endpoint Picker watching it, and the
// test's data plane in front of it.
type eppStack struct {
	k      *kubeCluster
	eppBin string
	pods   []*eppPod
	epp    *eppPicker
}

// startEPPStack starts everything; simArgs holds the extra vllm_sim flags of
// each pod (one entry a pod), pod i listening on 127.0.0.(i+2).
func startEPPStack(t *testing.T, simBin string, simArgs [][]string) *eppStack {
	t.Helper()
	eppBin, crds := eppTool(t)
	start := time.Now()
	k := startKube(t, eppNS, "unused")
	t.Logf("TIMING kube-apiserver and etcd ready in %.1fs", time.Since(start).Seconds())
	s := &eppStack{k: k, eppBin: eppBin}
	k.kubectlT(t, "", "create", "namespace", eppNS)
	k.kubectlT(t, "", "create", "-f", crds)
	k.kubectlT(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

	var ips []string
	for i := range simArgs {
		ips = append(ips, fmt.Sprintf("127.0.0.%d", i+2))
	}
	port := freePortOn(t, ips)
	for i, extra := range simArgs {
		p := &eppPod{name: fmt.Sprintf("sim-%d", i+1), ip: ips[i], addr: net.JoinHostPort(ips[i], strconv.Itoa(port))}
		args := append([]string{"--web.listen-address=" + p.addr, "--model=" + eppModel}, extra...)
		p.sim = startProcess(t, p.name, simBin, args...)
		if err := waitReady(t.Context(), p.sim, p.url()+"/health", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		k.createPodIP(t, eppNS, p.name, map[string]string{"app": "vllm-sim"}, "http", port, p.ip)
		s.pods = append(s.pods, p)
	}
	k.kubectlT(t, fmt.Sprintf(`{"apiVersion":"inference.networking.k8s.io/v1","kind":"InferencePool",
"metadata":{"name":%q,"namespace":%q},
"spec":{"targetPorts":[{"number":%d}],"selector":{"matchLabels":{"app":"vllm-sim"}},
"endpointPickerRef":{"name":"epp","port":{"number":9002}}}}`, eppPool, eppNS, port), "apply", "-f", "-")
	for name, prio := range map[string]int{eppSheddable: -1, "critical": 1} {
		k.kubectlT(t, fmt.Sprintf(`{"apiVersion":"inference.networking.x-k8s.io/v1alpha2","kind":"InferenceObjective",
"metadata":{"name":%q,"namespace":%q},
"spec":{"priority":%d,"poolRef":{"group":"inference.networking.k8s.io","name":%q}}}`, name, eppNS, prio, eppPool), "apply", "-f", "-")
	}

	t.Setenv("KUBECONFIG", k.kubeconfig)
	s.epp = s.startPicker(t, "epp")
	t.Logf("TIMING EPP up with %d ready pods %.1fs after start", len(s.pods), time.Since(start).Seconds())
	return s
}

// eppPicker is one Endpoint Picker process of the pool and the data plane
// in front of it.
type eppPicker struct {
	proc       *process
	metricsURL string // the EPP's /metrics
	gatewayURL string // the data plane
}

// startPicker starts an Endpoint Picker of the pool with the extra flags,
// waits until it sees every pod Ready, and puts a data plane in front of it.
// The EPP binds its three ports on every interface (it has no host flag);
// the ports are free ones of 127.0.0.1. It reads the API server through
// $KUBECONFIG (it has no --kubeconfig flag).
func (s *eppStack) startPicker(t *testing.T, name string, extra ...string) *eppPicker {
	t.Helper()
	grpcAddr, healthAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	args := append([]string{
		"--pool-name=" + eppPool, "--pool-namespace=" + eppNS,
		"--grpc-port=" + portOfAddr(grpcAddr), "--grpc-health-port=" + portOfAddr(healthAddr), "--metrics-port=" + portOfAddr(metricsAddr),
		"--metrics-endpoint-auth=false", "--secure-serving=false", "--tracing=false",
		"--refresh-prometheus-metrics-interval=1s", "--zap-log-level=info",
	}, extra...)
	p := &eppPicker{proc: startProcess(t, name, s.eppBin, args...), metricsURL: "http://" + metricsAddr + "/metrics"}
	if err := p.waitReadyPods(t, len(s.pods)); err != nil {
		t.Fatal(err)
	}
	gw, closeGW, err := newEPPGateway(grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeGW)
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.gatewayURL = "http://" + l.Addr().String()
	return p
}

// waitReadyPods waits until the EPP reports n ready pods in the pool.
func (p *eppPicker) waitReadyPods(t *testing.T, n int) error {
	t.Helper()
	return waitFor(t.Context(), 60*time.Second, 200*time.Millisecond, fmt.Sprintf("the EPP to report %d ready pods", n), func(ctx context.Context) (bool, error) {
		if err := p.proc.exited(); err != nil {
			t.Fatal(err)
		}
		m, err := scrapeText(ctx, p.metricsURL)
		if err != nil {
			return false, err
		}
		got := seriesValue(m, "inference_pool_ready_pods", `name="`+eppPool+`"`)
		return got == float64(n) && hasSeries(m, "inference_pool_ready_pods"), fmt.Errorf("inference_pool_ready_pods %v", got)
	})
}

// freePortOn returns a port free on every one of ips a moment ago.
func freePortOn(t *testing.T, ips []string) int {
	t.Helper()
	for range 50 {
		port, _ := strconv.Atoi(portOfAddr(freeAddr(t)))
		free := true
		for _, ip := range ips {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", ips)
	return 0
}

func portOfAddr(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// probeOnce sends one streaming completion as the prober does, with the
// objective header when objective is not empty.
func probeOnce(ctx context.Context, client *http.Client, baseURL, prompt, objective string, gateway bool) probe.Result {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	h := http.Header{}
	if objective != "" {
		h.Set(eppObjective, objective)
	}
	return probe.Stream(ctx, client, probe.StreamRequest{
		BaseURL: baseURL, Kind: config.ProberCompletions, Header: h,
		Body: map[string]any{"model": eppModel, "prompt": prompt, "max_tokens": 4, "ignore_eos": true},
		// Only a declared gateway sheds, as the prober's configuration
		// below declares the EPP.
		Gateway: gateway,
	})
}

// TestEPP runs the Gateway API Inference Extension's Endpoint Picker v1.5.0
// (the picker llm-d, KServe and GKE deploy) on a real kube-apiserver, with an
// InferencePool of three vllm_sim pods (sim-3 with twice the others' time to
// first token), behind the test's ext_proc data plane. vllm_prober probes the
// gateway (modules completion and sheddable, the second with the sheddable
// objective) and each pod directly; a Prometheus 3 scrapes it with the
// mixin's rules, scaled as in TestPrometheusEndToEnd. On that one stack:
//
//	routing:  probes through the gateway succeed, the spread names sim-3 and
//	          the gateway's overhead is within the measured difference;
//	shedding: the pool saturated, sheddable probes report shed, the
//	          availability SLI leaves them out (shed_is_failure: false) and
//	          VLLMGatewayShedding fires;
//	notready: sim-3 turned not Ready, the gateway sends it no probe and its
//	          direct probes still succeed, twice as slow as the others.
func TestEPP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a kube-apiserver, the EPP, three simulators and Prometheus; skipped with -short")
	}
	eppTool(t)
	kubeTools(t)
	promBin := prometheusBinary(t)
	proberBin, simBin := binaries(t)
	ctx := t.Context()
	dir := t.TempDir()
	s := startEPPStack(t, simBin, [][]string{
		{"--ttft=" + eppFastTTFT.String(), "--itl=10ms"},
		{"--ttft=" + eppFastTTFT.String(), "--itl=10ms"},
		{"--ttft=" + (2 * eppFastTTFT).String(), "--itl=10ms"},
	})
	slow := s.pods[2]
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)

	// vllm_prober: the gateway and its members, every second.
	var members strings.Builder
	for _, p := range s.pods {
		fmt.Fprintf(&members, "  - {name: %s, url: %s, model: %s, modules: [completion]}\n", p.name, p.url(), eppModel)
	}
	proberCfg := filepath.Join(dir, "vllm_prober.yml")
	writeFile(t, proberCfg, fmt.Sprintf(`global:
  probe_interval: 1s
  scrape_interval: 1s
  scrape_timeout: 900ms
  rate_window: 10s
modules:
  completion: {prober: completions, prompt: "Say hello.", max_tokens: 4, ignore_eos: true, nonce: true}
  sheddable:
    prober: completions
    prompt: "Say hello."
    max_tokens: 4
    ignore_eos: true
    nonce: true
    headers: {%s: %s}
targets:
  - name: epp
    url: %s
    model: %s
    modules: [completion, sheddable]
    scrape_metrics: false
    gateway: {members: [sim-1, sim-2, sim-3]}
  # The EPP's own /metrics: a data plane (Envoy) serves the traffic, the
  # EPP its metrics, at another address; a target has one URL, so the
  # picker's metrics are a scrape-only gateway target of their own.
  - name: epp-picker
    url: %s
    probe: false
    scrape_metrics: true
    gateway: {members: [sim-1, sim-2, sim-3]}
%s`, eppObjective, eppSheddable, s.epp.gatewayURL, eppModel, strings.TrimSuffix(s.epp.metricsURL, "/metrics"), members.String()))
	proberAddr := freeAddr(t)
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+proberCfg, "--web.listen-address="+proberAddr)
	if err := waitReady(ctx, prober, "http://"+proberAddr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	proberMetrics := "http://" + proberAddr + "/metrics"
	_, promURL := startPrometheus(t, promBin, dir, []string{proberAddr})
	prom := &mixin.Client{BaseURL: promURL, HTTP: httpClient}
	// A second Prometheus with the rules of the other choice of
	// slos.availability.shed_is_failure.
	spec, err := mixin.LoadSpec(sloFile)
	if err != nil {
		t.Fatal(err)
	}
	sloText, err := os.ReadFile(sloFile)
	if err != nil {
		t.Fatal(err)
	}
	from, to := "shed_is_failure: false", "shed_is_failure: true"
	if spec.SLOs.Availability.ShedIsFailure {
		from, to = to, from
	}
	if strings.Count(string(sloText), from) != 1 {
		t.Fatalf("%s has no single %q to turn into %q", sloFile, from, to)
	}
	otherSLO := filepath.Join(dir, "slo-other.yml")
	writeFile(t, otherSLO, strings.Replace(string(sloText), from, to, 1))
	otherDir := filepath.Join(dir, "other")
	if err := os.Mkdir(otherDir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, otherURL := startPrometheusSLO(t, promBin, otherDir, otherSLO, []string{proberAddr})
	type sliRules struct {
		url, slo      string
		shedIsFailure bool
	}
	slis := []sliRules{
		{promURL, sloFile, spec.SLOs.Availability.ShedIsFailure},
		{otherURL, "a copy with " + to, !spec.SLOs.Availability.ShedIsFailure},
	}
	tl := newTimeline()
	t.Cleanup(func() { t.Logf("timeline (seconds since Prometheus was up):\n%s", tl) })
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := watchAlerts(watchCtx, prom, tl, 500*time.Millisecond)
	t.Cleanup(func() { stopWatch(); <-watchDone })

	// The dashboards' gateway row: every query of it must have data in
	// one phase at least, but for eppPanelExemptions.
	panels := newPanelCheck(t, prom)
	panels.queries = slices.DeleteFunc(panels.queries, func(q mixin.DashboardQuery) bool { return !strings.Contains(q.Expr, "vllm_gateway_") })
	if len(panels.queries) == 0 {
		t.Fatal("no dashboard panel queries a vllm_gateway_ series")
	}
	memberOf := map[string]string{}
	for _, p := range s.pods {
		memberOf[p.addr] = p.name
	}
	var seq int
	gatewayProbes := func(n int, objective string) []probe.Result {
		var out []probe.Result
		for range n {
			seq++
			out = append(out, probeOnce(ctx, client, s.epp.gatewayURL, fmt.Sprintf("%04d Say hello.", seq), objective, true))
		}
		return out
	}

	t.Run("routing", func(t *testing.T) {
		// Through the gateway and to each member, interleaved so that
		// both see the same load of the machine.
		var gw []probe.Result
		direct := map[string][]probe.Result{}
		for range 10 {
			gw = append(gw, gatewayProbes(3, "")...)
			for _, p := range s.pods {
				seq++
				direct[p.name] = append(direct[p.name], probeOnce(ctx, client, p.url(), fmt.Sprintf("%04d Say hello.", seq), "", false))
			}
		}
		for _, r := range gw {
			if !r.Success {
				t.Fatalf("a probe through the EPP failed: %s %s (HTTP %d)", r.Reason, r.Err, r.StatusCode)
			}
		}
		// The measured difference: the slow member's median TTFT over the
		// fast ones', from the direct probes.
		medianTTFT := func(rs []probe.Result) float64 {
			var v []float64
			for _, r := range rs {
				if r.Success {
					v = append(v, r.TTFT.Seconds())
				}
			}
			return medianOf(v)
		}
		excess := medianTTFT(direct[slow.name]) - medianTTFT(direct[s.pods[0].name])
		// vllm_prober's join of the gateway with its members, over its
		// window (the last 10 probes): the spread names the slow member and
		// the overhead is within the measured difference.
		var m string
		if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "vllm_prober's gateway join series", func(ctx context.Context) (bool, error) {
			var err error
			m, err = scrapeText(ctx, proberMetrics)
			return err == nil && hasSeries(m, "vllm_gateway_member_spread_ratio", `target="epp"`, `module="completion"`) &&
				hasSeries(m, "vllm_gateway_overhead_seconds", `target="epp"`, `module="completion"`, `stat="median"`), err
		}); err != nil {
			t.Fatal(err)
		}
		sel := []string{`target="epp"`, `module="completion"`}
		spread := seriesValue(m, "vllm_gateway_member_spread_ratio", append(sel, `member="`+slow.name+`"`)...)
		overhead := seriesValue(m, "vllm_gateway_overhead_seconds", append(sel, `stat="median"`)...)
		overheadP90 := seriesValue(m, "vllm_gateway_overhead_seconds", append(sel, `stat="p90"`)...)
		share := map[string]float64{}
		for _, member := range []string{"sim-1", "sim-2", "sim-3", "_gateway", "_other"} {
			share[member] = seriesValue(m, "vllm_gateway_member_share_ratio", append(sel, `member="`+member+`"`)...)
		}
		t.Logf("vllm_prober's join: spread of %s %.2f, overhead median %.1f ms, p90 %.1f ms, shares %v; measured difference %.1f ms",
			slow.name, spread, overhead*1e3, overheadP90*1e3, share, excess*1e3)
		// About 2 (200 ms over 100 ms); the fixed cost of every probe on a
		// loaded machine brings it down (1.29 seen at load 9), but the fast
		// members against each other stay near 1.
		if spread < 1.2 {
			t.Errorf("vllm_gateway_member_spread_ratio{member=%q} %.2f, want the slow member named, at about 2 (the series: %s)", slow.name, spread,
				seriesLines(m, "vllm_gateway_member_spread_ratio", sel...))
		}
		if excess <= 0 || math.Abs(overhead) >= excess {
			t.Errorf("vllm_gateway_overhead_seconds{stat=\"median\"} %.1f ms not within the slow member's measured excess %.1f ms", overhead*1e3, excess*1e3)
		}
		if share["_gateway"] != 0 || share["_other"] != 0 || math.Abs(share["sim-1"]+share["sim-2"]+share["sim-3"]-1) > 1e-9 {
			t.Errorf("vllm_gateway_member_share_ratio %v: want every probe served by a member", share)
		}
		// The probes the slow member served are the slow ones: the member
		// header names the member that answered.
		var slowTTFT, fastTTFT []float64
		for i := range gw {
			if memberOf[probe.Member(&gw[i], probe.HeaderEPPDestination)] == slow.name {
				slowTTFT = append(slowTTFT, gw[i].TTFT.Seconds())
			} else {
				fastTTFT = append(fastTTFT, gw[i].TTFT.Seconds())
			}
		}
		if len(slowTTFT) > 0 && len(fastTTFT) > 0 && medianOf(slowTTFT) <= medianOf(fastTTFT) {
			t.Errorf("gateway probes served by %s: median TTFT %.1f ms, by the others %.1f ms; want %s's slower",
				slow.name, medianOf(slowTTFT)*1e3, medianOf(fastTTFT)*1e3, slow.name)
		}
		// vllm_prober reads the EPP's own /metrics with the EPP profile.
		if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "the EPP's view, 3 ready endpoints, in vllm_prober", func(ctx context.Context) (bool, error) {
			m, err := scrapeText(ctx, proberMetrics)
			return err == nil && seriesValue(m, "vllm_gateway_up", `target="epp-picker"`) == 1 &&
				hasSeries(m, "vllm_gateway_info", `target="epp-picker"`, `gateway="epp"`) &&
				seriesValue(m, "vllm_gateway_ready_endpoints", `target="epp-picker"`) == 3, err
		}); err != nil {
			t.Error(err)
		}
		// vllm_prober's own probes of the gateway succeed, both modules.
		// Their timeout is the 1s probe interval: one the loaded machine
		// starves past it is a timeout, not the gateway's doing.
		for _, mod := range []string{"completion", "sheddable"} {
			att := seriesValue(m, "vllm_probe_attempts_total", `target="epp"`, `module="`+mod+`"`)
			fail := seriesValue(m, "vllm_probe_failures_total", `target="epp"`, `module="`+mod+`"`)
			timeouts := seriesValue(m, "vllm_probe_failures_total", `target="epp"`, `module="`+mod+`"`, `reason="timeout"`)
			if timeouts > 0 {
				t.Logf("vllm_prober's probes of the gateway, module %s: %v of %v timed out", mod, timeouts, att)
			}
			if att == 0 || att == timeouts || fail != timeouts {
				var reasons []string
				for _, r := range probe.Reasons() {
					if n := seriesValue(m, "vllm_probe_failures_total", `target="epp"`, `module="`+mod+`"`, `reason="`+string(r)+`"`); n > 0 {
						reasons = append(reasons, fmt.Sprintf("%s %v", r, n))
					}
				}
				t.Errorf("vllm_prober's probes of the gateway, module %s: %v attempts, %v failures (%v); want some, none failed", mod, att, fail, reasons)
			}
		}
		// Nothing is shed while the pool has room.
		for _, r := range gatewayProbes(3, eppSheddable) {
			if !r.Success {
				t.Errorf("a sheddable probe failed while the pool has room: %s %s", r.Reason, r.Err)
			}
		}
		panels.check(ctx, "routing")
	})

	t.Run("shedding", func(t *testing.T) {
		// Saturate the pool: one running request a pod, eight more
		// streams each, so that every pod's waiting queue (7) is above the
		// EPP's saturation threshold (5).
		for _, p := range s.pods {
			if err := simConfig(ctx, p.url(), `{"max_num_seqs":1}`); err != nil {
				t.Fatal(err)
			}
		}
		var loads []*kvLoad
		for _, p := range s.pods {
			loads = append(loads, startKVLoad(ctx, p.url(), 8, 8, 20, 40))
		}
		tl.add("pool saturated: max_num_seqs 1 and 8 streams on every pod")
		defer func() {
			for _, l := range loads {
				if n, errs := l.stop(); len(errs) > 0 {
					t.Logf("saturating load: %d streams finished, errors %v", n, errs)
				}
			}
			for _, p := range s.pods {
				if err := simConfig(ctx, p.url(), `{"max_num_seqs":256}`); err != nil {
					t.Error(err)
				}
			}
			tl.add("pool saturation ended")
		}()

		// A sheddable probe is refused by the EPP's ResourceExhausted and
		// reported as shed, not as rate_limited.
		var shed probe.Result
		if err := waitFor(ctx, 60*time.Second, 200*time.Millisecond, "a sheddable probe to be shed", func(context.Context) (bool, error) {
			shed = gatewayProbes(1, eppSheddable)[0]
			return shed.Reason == probe.ReasonShed, fmt.Errorf("last probe: success %v, reason %q, HTTP %d: %s", shed.Success, shed.Reason, shed.StatusCode, shed.Err)
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("sheddable probe through the saturated pool: reason %s, HTTP %d, %s", shed.Reason, shed.StatusCode, shed.Err)
		if shed.StatusCode != http.StatusTooManyRequests {
			t.Errorf("shed probe: HTTP %d, want the EPP's 429", shed.StatusCode)
		}
		if m := probe.Member(&shed, probe.HeaderEPPDestination); m != "" {
			t.Errorf("a shed probe names member %q; the gateway answered it itself", m)
		}

		// A second picker of the same pool, with flow control: requests
		// wait in its own queue while the pool is saturated, four at most,
		// a second each. Its refusals, 429 when the queue is full and 503
		// when a request's time in it ran out, are shedding too. (It runs
		// in this phase only: it polls every pod 20 times a second.)
		flow := s.startPicker(t, "epp-flow", "--config-text="+eppFlowConfig)
		flowRes := make([]probe.Result, 12)
		var wg sync.WaitGroup
		for i := range flowRes {
			wg.Go(func() {
				flowRes[i] = probeOnce(ctx, client, flow.gatewayURL, fmt.Sprintf("flow %02d Say hello.", i), "", true)
			})
		}
		wg.Wait()
		outcomes := map[string]int{}
		for _, r := range flowRes {
			k := "ok"
			if !r.Success {
				k = fmt.Sprintf("%s %d", r.Reason, r.StatusCode)
			}
			outcomes[k]++
			if !r.Success && r.Reason != probe.ReasonShed {
				t.Errorf("a probe refused by flow control failed with %s, want shed: HTTP %d %s", r.Reason, r.StatusCode, r.Err)
			}
		}
		t.Logf("12 concurrent probes through the flow control picker: %v", outcomes)
		if outcomes["shed 429"] == 0 || outcomes["shed 503"] == 0 {
			t.Errorf("flow control outcomes %v, want shed 429 (queue at capacity) and shed 503 (time in queue ran out)", outcomes)
		}

		// The daemon's sheddable probes of the gateway are shed too, and
		// VLLMGatewayShedding fires for them.
		sel := map[string]string{"target": "epp", "module": "sheddable"}
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		a, err := prom.WaitForAlert(wctx, "VLLMGatewayShedding", sel, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		tl.add("VLLMGatewayShedding fired for epp/sheddable, value %s", a.Value)
		m, err := scrapeText(ctx, proberMetrics)
		if err != nil {
			t.Fatal(err)
		}
		shedN := seriesValue(m, "vllm_probe_failures_total", `target="epp"`, `module="sheddable"`, `reason="shed"`)
		limited := seriesValue(m, "vllm_probe_failures_total", `target="epp"`, `reason="rate_limited"`)
		t.Logf("vllm_prober: %v sheddable probes of the gateway shed, %v rate_limited", shedN, limited)
		if shedN < 3 || limited != 0 {
			t.Errorf("vllm_probe_failures_total: %v shed (want at least 3), %v rate_limited (want 0)", shedN, limited)
		}

		// The availability SLI follows slos.availability.shed_is_failure:
		// with mixin/slo.yml's choice (false) the shed probes are counted
		// apart, not as failures; the second Prometheus, whose rules say
		// true, counts them as failures.
		for _, p := range slis {
			q := func(expr string) float64 {
				t.Helper()
				v, err := queryValues(ctx, p.url, expr)
				if err != nil || len(v) != 1 {
					t.Fatalf("%s: %v %v, want one series", expr, v, err)
				}
				return v[0].Value
			}
			const pair = `{target="epp",module="sheddable"}`
			shedRatio := q("target_module:vllm_probe_shed:ratio_rate5m" + pair)
			success := q("target_module:vllm_probe_success:ratio_rate5m" + pair)
			t.Logf("rules of %s: shed ratio %.2f, availability SLI %.2f (shed_is_failure %v)", p.slo, shedRatio, success, p.shedIsFailure)
			// A sheddable probe admitted in the instant the pool filled
			// may time out instead (a real failure): the SLI must sit far
			// above 1 - shed ratio when shed probes are not failures, at
			// or below it when they are.
			if shedRatio < 0.5 {
				t.Fatalf("target_module:vllm_probe_shed:ratio_rate5m %.2f, want most sheddable probes shed", shedRatio)
			}
			if p.shedIsFailure {
				if success > 1-shedRatio+0.01 {
					t.Errorf("rules of %s: availability SLI %.2f while %.2f of the probes were shed: shed_is_failure is true, want at most %.2f", p.slo, success, shedRatio, 1-shedRatio)
				}
			} else if success < 1-shedRatio/2 {
				t.Errorf("rules of %s: availability SLI %.2f while %.2f of the probes were shed: shed_is_failure is false, the shed probes must not count as failures", p.slo, success, shedRatio)
			}
		}
		// The EPP counts its refusals; vllm_prober exports them as the
		// gateway's capacity rejections.
		if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "the EPP's capacity rejections in vllm_prober", func(ctx context.Context) (bool, error) {
			m, err := scrapeText(ctx, proberMetrics)
			return err == nil && seriesValue(m, "vllm_gateway_rejected_requests_total", `target="epp-picker"`, `reason="capacity"`) >= 3, err
		}); err != nil {
			t.Error(err)
		}
		if m, err := scrapeText(ctx, proberMetrics); err == nil {
			t.Logf("vllm_prober's view of the EPP: %s; %s; %s",
				seriesLines(m, "vllm_gateway_admitted_requests_total", `target="epp-picker"`),
				seriesLines(m, "vllm_gateway_rejected_requests_total", `target="epp-picker"`),
				seriesLines(m, "vllm_gateway_requests_total", `target="epp-picker"`))
		}
		panels.check(ctx, "shedding")
		// Requests of the default priority are queued, not shed.
		if n := seriesValue(m, "vllm_probe_failures_total", `target="epp"`, `module="completion"`, `reason="shed"`); n != 0 {
			t.Errorf("%v probes of the completion module (no objective) were shed", n)
		}
	})

	t.Run("notready", func(t *testing.T) {
		// The gateway sends the slow pod probes while it is Ready ...
		if err := waitFor(ctx, 60*time.Second, 10*time.Millisecond, "a gateway probe served by "+slow.name, func(context.Context) (bool, error) {
			r := gatewayProbes(1, "")[0]
			return r.Success && probe.Member(&r, probe.HeaderEPPDestination) == slow.addr, nil
		}); err != nil {
			t.Fatal(err)
		}
		// ... and none once it is not.
		s.k.setPodReady(t, eppNS, slow.name, slow.ip, false)
		tl.add("%s turned not Ready", slow.name)
		if err := s.epp.waitReadyPods(t, len(s.pods)-1); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "2 ready endpoints in vllm_prober's view of the EPP", func(ctx context.Context) (bool, error) {
			m, err := scrapeText(ctx, proberMetrics)
			return err == nil && seriesValue(m, "vllm_gateway_ready_endpoints", `target="epp-picker"`) == 2, err
		}); err != nil {
			t.Error(err)
		}
		m, err := scrapeText(ctx, proberMetrics)
		if err != nil {
			t.Fatal(err)
		}
		type direct struct{ attempts, failures, ttftSum, ttftCount float64 }
		read := func(m, target string) direct {
			sel := []string{`target="` + target + `"`, `module="completion"`}
			return direct{
				seriesValue(m, "vllm_probe_attempts_total", sel...), seriesValue(m, "vllm_probe_failures_total", sel...),
				seriesValue(m, "vllm_probe_time_to_first_token_seconds_sum", sel...), seriesValue(m, "vllm_probe_time_to_first_token_seconds_count", sel...),
			}
		}
		slowBefore, fastBefore := read(m, slow.name), read(m, s.pods[0].name)
		served := map[string]int{}
		for _, r := range gatewayProbes(20, "") {
			if !r.Success {
				t.Fatalf("a probe through the EPP failed with %s not Ready: %s %s (HTTP %d)", slow.name, r.Reason, r.Err, r.StatusCode)
			}
			served[memberOf[probe.Member(&r, probe.HeaderEPPDestination)]]++
		}
		t.Logf("20 gateway probes with %s not Ready, served by %v", slow.name, served)
		if n := served[slow.name]; n != 0 || served[""] != 0 {
			t.Errorf("%d gateway probes went to %s after it turned not Ready, %d to no member (served: %v)", n, slow.name, served[""], served)
		}

		// vllm_prober's join says so too: once its window holds only
		// probes from after the change, sim-3's share of the gateway's
		// probes is 0, and the others' make up the whole.
		shareSel := []string{`target="epp"`, `module="completion"`}
		if err := waitFor(ctx, 40*time.Second, 500*time.Millisecond, "vllm_prober's share of "+slow.name+" to read 0", func(ctx context.Context) (bool, error) {
			m, err := scrapeText(ctx, proberMetrics)
			return err == nil && hasSeries(m, "vllm_gateway_member_share_ratio", append(shareSel, `member="`+slow.name+`"`)...) &&
				seriesValue(m, "vllm_gateway_member_share_ratio", append(shareSel, `member="`+slow.name+`"`)...) == 0, err
		}); err != nil {
			t.Fatal(err)
		}
		if m, err := scrapeText(ctx, proberMetrics); err == nil {
			t.Logf("vllm_prober's shares with %s not Ready: %s", slow.name, seriesLines(m, "vllm_gateway_member_share_ratio", shareSel...))
			if others := seriesValue(m, "vllm_gateway_member_share_ratio", append(shareSel, `member="sim-1"`)...) +
				seriesValue(m, "vllm_gateway_member_share_ratio", append(shareSel, `member="sim-2"`)...); math.Abs(others-1) > 1e-9 {
				t.Errorf("shares of sim-1 and sim-2 sum to %v, want 1", others)
			}
		}

		// Its direct probes still say what it is: up, answering, and twice
		// as slow to the first token as the others.
		var slowNow, fastNow direct
		if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "three direct probes of "+slow.name+" while not Ready", func(ctx context.Context) (bool, error) {
			m, err := scrapeText(ctx, proberMetrics)
			slowNow, fastNow = read(m, slow.name), read(m, s.pods[0].name)
			return err == nil && slowNow.ttftCount-slowBefore.ttftCount >= 3 && fastNow.ttftCount-fastBefore.ttftCount >= 3, err
		}); err != nil {
			t.Fatal(err)
		}
		if f := slowNow.failures - slowBefore.failures; f != 0 {
			t.Errorf("%v direct probes of %s failed while it was not Ready", f, slow.name)
		}
		slowTTFT := (slowNow.ttftSum - slowBefore.ttftSum) / (slowNow.ttftCount - slowBefore.ttftCount)
		fastTTFT := (fastNow.ttftSum - fastBefore.ttftSum) / (fastNow.ttftCount - fastBefore.ttftCount)
		t.Logf("direct probes while not Ready: %s %v ok, mean TTFT %.1f ms; %s mean TTFT %.1f ms",
			slow.name, slowNow.attempts-slowBefore.attempts, slowTTFT*1e3, s.pods[0].name, fastTTFT*1e3)
		if slowTTFT < 1.5*fastTTFT {
			t.Errorf("direct probes of %s: mean TTFT %.1f ms, of %s %.1f ms; want about twice", slow.name, slowTTFT*1e3, s.pods[0].name, fastTTFT*1e3)
		}
		panels.check(ctx, "notready")
		s.k.setPodReady(t, eppNS, slow.name, slow.ip, true)
		tl.add("%s Ready again", slow.name)
		if err := s.epp.waitReadyPods(t, len(s.pods)); err != nil {
			t.Fatal(err)
		}
	})

	panels.check(ctx, "end")
	t.Logf("%d of the %d gateway panel queries of the dashboards had data", len(panels.firstHit), len(panels.queries))
	for _, q := range panels.queries {
		k := panelKey(q)
		if err := panels.failed[k]; err != nil {
			t.Errorf("gateway panel %s: %v", k, err)
		} else if _, ok := panels.firstHit[k]; !ok {
			if reason, ok := eppPanelExempt(q.Expr); ok {
				t.Logf("gateway panel %s: no data, exempt: %s", k, reason)
			} else {
				t.Errorf("gateway panel %s: no data in any phase", k)
			}
		}
	}
}

// eppFlowConfig turns the EPP's flow control on: a queue of 4 requests at
// most, each held for 1s at most while the pool is saturated.
const eppFlowConfig = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
flowControl:
  maxRequests: 4
  defaultRequestTTL: 1s
`

// eppFastTTFT is the time to first token of the fast pods; the slow one has
// twice it. Large enough that the scheduling noise of a loaded 2-core
// machine does not blur the difference.
const eppFastTTFT = 100 * time.Millisecond

// eppPanelExemptions are gateway panel queries allowed to have no data in
// this run, with the reason.
var eppPanelExemptions = map[string]string{
	// The EPP's queue is its flow control queue, which exists only with the
	// flowControl feature gate; this run sheds through the legacy
	// admission path (the collector's EPP golden test reads a real
	// flow-control capture).
	`vllm_gateway_queue_requests{`: "the EPP runs without flow control here: it has no queue to export",
	// Disaggregation decisions are llm-d's router's (its disagg-profile-
	// handler), not the Inference Extension's EPP: internal/daemon
	// TestDisaggregatedTransferSlow and the collector's llm-d fixture read them.
	`vllm_gateway_disagg_decisions_total{`: "the Inference Extension's EPP makes no prefill/decode decisions (llm-d's router does)",
}

func eppPanelExempt(expr string) (string, bool) {
	for k, reason := range eppPanelExemptions {
		if strings.Contains(expr, k) {
			return reason, true
		}
	}
	return "", false
}

// seriesLines returns the lines of text that seriesValue would sum, for
// messages.
func seriesLines(text, metric string, parts ...string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, metric+"{") && hasSeries(line, metric, parts...) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}

func medianOf(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return percentile.Linear(v, 50)
}
