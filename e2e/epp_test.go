package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/config"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
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
	k          *kubeCluster
	pods       []*eppPod
	epp        *process
	metricsURL string // the EPP's /metrics
	gatewayURL string // the data plane
}

// startEPPStack starts everything; simArgs holds the extra vllm_sim flags of
// each pod (one entry a pod), pod i listening on 127.0.0.(i+2).
func startEPPStack(t *testing.T, simBin string, simArgs [][]string) *eppStack {
	t.Helper()
	eppBin, crds := eppTool(t)
	start := time.Now()
	k := startKube(t, eppNS, "unused")
	t.Logf("TIMING kube-apiserver and etcd ready in %.1fs", time.Since(start).Seconds())
	s := &eppStack{k: k}
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

	// The EPP binds its three ports on every interface (it has no host
	// flag); the ports are free ones of 127.0.0.1. It reads the API server
	// through $KUBECONFIG (it has no --kubeconfig flag).
	grpcAddr, healthAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	portOf := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	t.Setenv("KUBECONFIG", k.kubeconfig)
	s.epp = startProcess(t, "epp", eppBin,
		"--pool-name="+eppPool, "--pool-namespace="+eppNS,
		"--grpc-port="+portOf(grpcAddr), "--grpc-health-port="+portOf(healthAddr), "--metrics-port="+portOf(metricsAddr),
		"--metrics-endpoint-auth=false", "--secure-serving=false", "--tracing=false",
		"--refresh-prometheus-metrics-interval=1s", "--zap-log-level=info")
	s.metricsURL = "http://" + metricsAddr + "/metrics"
	if err := s.waitReadyPods(t, len(s.pods)); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING EPP up with %d ready pods %.1fs after start", len(s.pods), time.Since(start).Seconds())

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
	s.gatewayURL = "http://" + l.Addr().String()
	return s
}

// waitReadyPods waits until the EPP reports n ready pods in the pool.
func (s *eppStack) waitReadyPods(t *testing.T, n int) error {
	t.Helper()
	return waitFor(t.Context(), 60*time.Second, 200*time.Millisecond, fmt.Sprintf("the EPP to report %d ready pods", n), func(ctx context.Context) (bool, error) {
		if err := s.epp.exited(); err != nil {
			t.Fatal(err)
		}
		m, err := scrapeText(ctx, s.metricsURL)
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
func probeOnce(ctx context.Context, client *http.Client, baseURL, prompt, objective string) probe.Result {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	h := http.Header{}
	if objective != "" {
		h.Set(eppObjective, objective)
	}
	return probe.Stream(ctx, client, probe.StreamRequest{
		BaseURL: baseURL, Kind: config.ProberCompletions, Header: h,
		Body: map[string]any{"model": eppModel, "prompt": prompt, "max_tokens": 4, "ignore_eos": true},
	})
}

// TestEPP runs the Gateway API Inference Extension's Endpoint Picker v1.5.0
// (the picker llm-d, KServe and GKE deploy) on a real kube-apiserver, with an
// InferencePool of three vllm_sim pods, behind the test's ext_proc data
// plane, and probes through it.
func TestEPP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a kube-apiserver, the EPP and three simulators; skipped with -short")
	}
	eppTool(t)
	kubeTools(t)
	_, simBin := binaries(t)
	s := startEPPStack(t, simBin, [][]string{
		{"--ttft=100ms", "--itl=10ms"},
		{"--ttft=100ms", "--itl=10ms"},
		{"--ttft=200ms", "--itl=10ms"},
	})
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)

	r := probeOnce(t.Context(), client, s.gatewayURL, "0000 Say hello.", "")
	if !r.Success {
		t.Fatalf("a probe through the EPP failed: %s %s (HTTP %d)", r.Reason, r.Err, r.StatusCode)
	}
	t.Logf("routed probe: served by %s, TTFT %.1f ms", probe.Member(&r, probe.HeaderEPPDestination), r.TTFT.Seconds()*1e3)
}
