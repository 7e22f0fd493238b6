package collector

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
)

func readGatewayFamilies(t *testing.T, name string) families {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "gateways", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs, err := decodeFamilies(f, expfmt.NewFormat(expfmt.TypeTextPlain), false)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return fs
}

// serveGatewayFile serves testdata/gateways/name as a text exposition.
func serveGatewayFile(t *testing.T, name string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "gateways", name))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// llmdTwins adds llm-d-router's llm_d_epp_* names to an EPP payload, with the
// same values, as llm-d-router emits them next to the older names.
func llmdTwins(fs families) families {
	out := families{}
	for k, v := range fs {
		out[k] = v
	}
	for old, twin := range map[string]string{
		"inference_objective_request_total":            "llm_d_epp_request_total",
		"inference_objective_request_error_total":      "llm_d_epp_request_error_total",
		"inference_pool_ready_pods":                    "llm_d_epp_ready_endpoints",
		"inference_extension_flow_control_queue_size":  "llm_d_epp_flow_control_queue_size",
		"inference_extension_scheduler_attempts_total": "llm_d_epp_scheduler_attempts_total",
	} {
		f, ok := fs[old]
		if !ok {
			continue
		}
		c := proto.Clone(f).(*dto.MetricFamily)
		c.Name = proto.String(twin)
		for _, m := range c.Metric {
			for _, l := range m.Label {
				if l.GetName() == "pod_name" {
					l.Name = proto.String("endpoint_name")
				}
			}
		}
		out[twin] = c
	}
	return out
}

// TestGatewayProfiles normalises every gateway payload of testdata/gateways
// (README.md there names each one's source) and compares it with its golden
// file; the facts that matter are also asserted, so that a golden rewrite
// cannot hide a wrong reading.
func TestGatewayProfiles(t *testing.T) {
	cases := []struct {
		file, golden string
		twins        bool
		check        func(t *testing.T, v *GatewayView)
	}{
		{file: "epp-metrics-flow.txt", golden: "epp-flow.golden", check: func(t *testing.T, v *GatewayView) {
			// 6 + 1 admitted, 8 RejectedCapacity, 4 EvictedTTL, 1 BadRequest: the
			// EPP's request_total says 7, the true denominator is 20.
			if v.Gateway != "epp" || v.Admitted != 7 || v.Rejected[RejectCapacity] != 8 || v.Rejected[RejectQueueTimeout] != 4 || v.Total() != 20 {
				t.Errorf("flow run: %+v total %g", v, v.Total())
			}
		}},
		{file: "epp-metrics-flow.txt", golden: "llm-d-flow.golden", twins: true, check: func(t *testing.T, v *GatewayView) {
			if v.Gateway != "llm-d" || v.Admitted != 7 || v.Total() != 20 || v.ReadyEndpoints != 3 {
				t.Errorf("twins counted twice or missed: %+v total %g", v, v.Total())
			}
		}},
		{file: "epp-metrics-legacy-vllm_sim.txt", golden: "epp-legacy.golden", check: func(t *testing.T, v *GatewayView) {
			if v.Rejected[RejectCapacity] != 4 || v.ReadyEndpoints != 3 || v.Backends["sim4"] != 12 {
				t.Errorf("legacy run: %+v", v)
			}
		}},
		{file: "epp-metrics-errors.txt", golden: "epp-errors.golden", check: func(t *testing.T, v *GatewayView) {
			// ModelServerError is a backend's error on an admitted request.
			if v.Rejected[RejectOther] != 0 || v.Rejected[RejectCapacity] != 0 {
				t.Errorf("backend errors read as rejections: %+v", v.Rejected)
			}
		}},
		{file: "haproxy-metrics.txt", golden: "haproxy.golden", check: func(t *testing.T, v *GatewayView) {
			if v.Gateway != "haproxy" || v.Admitted != 9 || v.Rejected[RejectQueueTimeout] != 6 || v.ReadyEndpoints != 3 || len(v.Backends) != 3 {
				t.Errorf("haproxy: %+v", v)
			}
		}},
		{file: "llm-d-disagg-hand.txt", golden: "llm-d-disagg.golden", check: func(t *testing.T, v *GatewayView) {
			// The deprecated twin is not counted again; an unknown decision is other.
			want := map[string]float64{DecisionDecodeOnly: 30, DecisionPrefillDecode: 97, DecisionEncodePrefillDecode: 2, DecisionOther: 1}
			if v.Gateway != "llm-d" || !maps.Equal(v.Decisions, want) {
				t.Errorf("llm-d decisions: %+v", v.Decisions)
			}
		}},
		{file: "production-stack-router.txt", golden: "production-stack.golden", check: func(t *testing.T, v *GatewayView) {
			if v.Gateway != "production-stack" || v.ReadyEndpoints != 2 || v.Backends["http://10.0.0.11:8000"] != 30 {
				t.Errorf("production-stack: %+v", v)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			fs := readGatewayFamilies(t, c.file)
			if c.twins {
				fs = llmdTwins(fs)
			}
			v, ok := normaliseGateway(fs)
			if !ok {
				t.Fatalf("%s: no gateway detected", c.file)
			}
			c.check(t, v)
			golden := filepath.Join("testdata", "gateways", c.golden)
			if *update {
				if err := os.WriteFile(golden, []byte(v.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.String(); got != string(want) {
				t.Errorf("%s differs (-update rewrites it):\ngot:\n%swant:\n%s", golden, got, want)
			}
		})
	}
}

// TestRouterIsNotAnEngine: production-stack's router exports vllm:* gauges
// labelled by backend (server); scraped as a target's engine /metrics they
// must be refused, never read as the engine's running and waiting requests.
func TestRouterIsNotAnEngine(t *testing.T) {
	srv := serveGatewayFile(t, "production-stack-router.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := Scrape(ctx, srv.Client(), srv.URL+"/metrics")
	if err == nil || !strings.Contains(err.Error(), "production-stack router") {
		t.Fatalf("Scrape of a router: snapshot %+v, error %v; want the router refused", snap, err)
	}
	v, err := ScrapeGateway(ctx, srv.Client(), srv.URL+"/metrics")
	if err != nil || v.Gateway != "production-stack" {
		t.Fatalf("ScrapeGateway: %+v, %v", v, err)
	}
}

// gatewayConfig is a configuration with one gateway target, gw, in front of
// one member, m, that scrapes nothing.
func gatewayConfig(t *testing.T, url string) *config.Config {
	t.Helper()
	return testConfig(t, fmt.Sprintf(`
global:
  scrape_interval: 1h
  scrape_timeout: 10s
  rate_window: 2h
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - name: gw
    url: %s
    gateway: {members: [m]}
  - name: m
    url: http://127.0.0.1:1
    scrape_metrics: false
`, url))
}

// TestGatewayExport scrapes the real EPP flow-control capture over HTTP with
// the collector's gateway scrape and compares the vllm_gateway_* series with
// their golden file.
func TestGatewayExport(t *testing.T) {
	srv := serveGatewayFile(t, "epp-metrics-flow.txt")
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(gatewayConfig(t, srv.URL)); err != nil {
		t.Fatal(err)
	}
	m.target("gw").scrapeGatewayOnce(context.Background())
	b := gatherText(t, reg)
	golden := filepath.Join("testdata", "gateways", "export-epp-flow.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("%s differs (-update rewrites it):\n%s", golden, b.String())
	}
	if !strings.Contains(b.String(), `vllm_gateway_requests_total{target="gw"} 20`) {
		t.Errorf("the true denominator (7 admitted + 13 rejected) is not exported:\n%s", b.String())
	}
	if strings.Contains(b.String(), "vllm_server_") {
		t.Errorf("a gateway's /metrics is exported as an engine's too:\n%s", b.String())
	}
}

// TestGatewayScrapedOnItsInterval: a gateway's /metrics is read by its scrape
// loop, on its scrape_interval, never when vllm_prober's own /metrics is
// collected: two Prometheus replicas collecting every second scrape the
// gateway once an interval, not once a collection.
func TestGatewayScrapedOnItsInterval(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "gateways", "epp-metrics-flow.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(gatewayConfig(t, srv.URL)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The loop scrapes at once, then after an hour.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, ok := m.LastScrape("gw"); ok && st.Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway was not scraped within 30s")
		}
	}
	for range 20 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if !hasFamily(mfs, "vllm_gateway_requests_total") {
			t.Fatalf("collection %d: no vllm_gateway_requests_total", len(mfs))
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the gateway's /metrics was read %d times over one scrape and 20 collections; want 1", n)
	}
}

// gatherText is what reg exposes, in the text format.
func gatherText(t *testing.T, reg prometheus.Gatherer) *strings.Builder {
	t.Helper()
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return &b
}

func hasFamily(mfs []*dto.MetricFamily, name string) bool {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return true
		}
	}
	return false
}

// TestGatewayBackendSecretScrubbed: a backend name that holds a configured
// secret becomes a label value only as the placeholder.
func TestGatewayBackendSecretScrubbed(t *testing.T) {
	srv := serveGatewayFile(t, "epp-metrics-flow.txt")
	reg := prometheus.NewPedanticRegistry()
	opts := testOptions(reg, nil)
	opts.Redactor = redact.New("sim3")
	m := NewManager(opts)
	if err := m.Apply(gatewayConfig(t, srv.URL)); err != nil {
		t.Fatal(err)
	}
	m.target("gw").scrapeGatewayOnce(context.Background())
	b := gatherText(t, reg)
	if strings.Contains(b.String(), "sim3") || !strings.Contains(b.String(), `backend="`+redact.Placeholder+`"`) {
		t.Errorf("the backend named after a secret is not the placeholder:\n%s", b.String())
	}
}
