package daemon

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// eppGateway stands for an Endpoint Picker and its data plane in front of
// member: it proxies every request to member, naming it in the EPP's
// destination header, and serves at /gateway/metrics the EPP's /metrics
// captured in a flow-control run (collector/testdata/gateways), followed by
// the extra exposition lines.
func eppGateway(t *testing.T, member *httptest.Server, extra ...string) *httptest.Server {
	t.Helper()
	capture, err := os.ReadFile("../../collector/testdata/gateways/epp-metrics-flow.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range extra {
		capture = append(capture, e...)
	}
	u, err := url.Parse(member.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(r *http.Response) error {
		r.Header.Set(probe.HeaderEPPDestination, u.Host)
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gateway/metrics" {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write(capture)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// parseMetrics parses a text exposition.
func parseMetrics(t *testing.T, body string) map[string][]*model.Sample {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string][]*model.Sample{}
	for name, mf := range mfs {
		vec, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, mf)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range vec {
			out[name] = append(out[name], s)
		}
	}
	return out
}

// TestGatewayHAProxy: the daemon configured with a real HAProxy (round
// robin, `option http-no-delay`, each response naming its server in
// X-Served-By, its Prometheus exporter on the frontend's /metrics; the
// prober's /health and /v1/models checks go to a backend of their own, or
// they would take every other turn of the round robin and the probes
// would land on one server) in front
// of three vllm_sim members, one with twice the others' time to first
// token, found by the label they share with the gateway. Its /metrics names
// the slow member in the spread series, puts the gateway's overhead within
// the slow member's measured excess, gives shares that sum to 1 (about a
// third each), and carries HAProxy's own view under the vllm_gateway_* names.
func TestGatewayHAProxy(t *testing.T) {
	// The members' first tokens are slow enough that a loaded machine's
	// jitter (up to 100 ms seen under -race) does not hide the factor 2.
	const base = 100 * time.Millisecond
	sims := map[string]*httptest.Server{}
	for name, ttft := range map[string]time.Duration{"s1": base, "s2": base, "s3": 2 * base} {
		sims[name] = startPlainSim(t, func(c *simulator.Config) { c.TTFT, c.ITL = ttft, time.Millisecond })
	}
	var list []string
	checks := "backend checks\n  balance roundrobin\n"
	for _, name := range []string{"s1", "s2", "s3"} {
		list = append(list, name+" "+hostPort(t, sims[name]))
		checks += "  server " + list[len(list)-1] + "\n"
	}
	port := testtool.HAProxyBalancer(t, list,
		"  http-request use-service prometheus-exporter if { path /metrics }\n  use_backend checks if { path /health /v1/models }\n",
		checks)
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "vllm_prober.yml")}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 400ms}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 4}
targets:
  - {name: s1, url: %q, labels: {pool: p}, role: decode}
  - {name: s2, url: %q, labels: {pool: p}, role: decode}
  - {name: s3, url: %q, labels: {pool: p}, role: prefill}
  - name: gw
    url: http://127.0.0.1:%d
    labels: {pool: p}
    gateway: {member_label: pool, member_header: X-Served-By}
`, sims["s1"].URL, sims["s2"].URL, sims["s3"].URL, port))
	// A fixed window longer than the test: every kept sample is joined.
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5, ProbeWindow: time.Hour})

	reg := f.d.Registry()
	waitFor(t, 60*time.Second, "30 gateway probes and 10 of each member", func() bool {
		for name, n := range map[string]float64{"gw": 30, "s1": 10, "s2": 10, "s3": 10} {
			if v, ok := sample(t, reg, "vllm_probe_time_to_first_token_seconds", map[string]string{"target": name}); !ok || v < n {
				return false
			}
		}
		return true
	})
	// The gateway's /metrics is read by its scrape loop, with the default
	// scrape timeout (10s): a loaded machine may miss a shorter one.
	waitFor(t, 30*time.Second, "HAProxy's /metrics read", func() bool {
		v, ok := sample(t, reg, "vllm_gateway_up", map[string]string{"target": "gw"})
		return ok && v == 1
	})
	// The target page shows the gateway's last scrape, as an engine's.
	if code, page := f.get("/target?name=gw"); code != http.StatusOK ||
		!regexp.MustCompile(`id="last-scrape"><span class="ok">up at [^<]*; read by the gateway profiles`).MatchString(page) {
		t.Errorf("target page of the gateway: %d, no last scrape read by the gateway profiles:\n%s", code, page)
	}
	code, body := f.get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	ms := parseMetrics(t, body)
	joins := f.d.cmp.GatewayJoins("gw")
	if len(joins) != 1 {
		t.Fatalf("gateway joins %+v, want one (module short)", joins)
	}
	j := joins[0]
	t.Logf("member TTFT %v; overhead median %.1f ms p90 %.1f ms; spread %s %.2f; shares %v",
		j.MemberTTFT, j.OverheadMedian*1e3, j.OverheadP90*1e3, j.Slowest, j.Spread, j.Share)

	spread := ms["vllm_gateway_member_spread_ratio"]
	if len(spread) != 1 || spread[0].Metric["member"] != "s3" || spread[0].Metric["role"] != "prefill" || spread[0].Metric["target"] != "gw" || spread[0].Value < 1.2 {
		t.Errorf("vllm_gateway_member_spread_ratio %v, want one series naming s3, well above 1 (2 on an idle machine)", spread)
	}
	excess := j.MemberTTFT["s3"] - j.MemberTTFT["s1"]
	if excess <= 0 {
		t.Fatalf("s3's measured excess over s1 %.1f ms, want positive", excess*1e3)
	}
	var stats []string
	for _, s := range ms["vllm_gateway_overhead_seconds"] {
		stats = append(stats, string(s.Metric["stat"]))
		if math.Abs(float64(s.Value)) >= excess {
			t.Errorf("overhead %s %.1f ms not within the slow member's measured excess %.1f ms", s.Metric["stat"], float64(s.Value)*1e3, excess*1e3)
		}
	}
	if strings.Join(stats, ",") != "median,p90" {
		t.Errorf("overhead stats %v, want median and p90", stats)
	}
	sum := 0.0
	for _, s := range ms["vllm_gateway_member_share_ratio"] {
		sum += float64(s.Value)
		switch m := string(s.Metric["member"]); m {
		case "s1", "s2", "s3":
			if want := map[string]string{"s1": "decode", "s2": "decode", "s3": "prefill"}[m]; string(s.Metric["role"]) != want {
				t.Errorf("share of %s has role %q, want %q (the member's role)", m, s.Metric["role"], want)
			}
			if math.Abs(float64(s.Value)-1.0/3) > 0.15 {
				t.Errorf("share of %s %.2f, want about 1/3 (round robin)", m, s.Value)
			}
		case "_gateway", "_other":
			if s.Value != 0 {
				t.Errorf("share %s %.2f, want 0", m, s.Value)
			}
		default:
			t.Errorf("share of unexpected member %q", m)
		}
	}
	if n := len(ms["vllm_gateway_member_share_ratio"]); n != 5 || math.Abs(sum-1) > 1e-9 {
		t.Errorf("%d share series summing to %v, want 5 summing to 1", n, sum)
	}

	// The gate of the gateway against s1: its own probes average s3 out
	// (latency_ratio 1.5 passes), its members do not: 503 naming s3.
	code, gate := f.get("/gate?target=gw&reference=s1&latency_ratio=1.5&window=1h")
	if code != http.StatusServiceUnavailable || !strings.Contains(gate, `"reason":"member s3 of the gateway answers its direct probes`) ||
		!strings.Contains(gate, `"slowest_member":"s3"`) || !strings.Contains(gate, `"result":"pass"`) {
		t.Errorf("/gate of the gateway: %d, want 503 naming s3 while its own rows pass:\n%s", code, gate)
	}
	if code, _ := f.get("/gate?target=gw&reference=s1&member_ratio=1"); code != http.StatusBadRequest {
		t.Errorf("/gate with member_ratio=1: %d, want 400", code)
	}

	// HAProxy's own view, read by its profile and not as an engine's.
	if v, ok := sample(t, reg, "vllm_gateway_up", map[string]string{"target": "gw"}); !ok || v != 1 {
		t.Errorf("vllm_gateway_up{target=gw} %v (%v), want 1", v, ok)
	}
	if _, ok := sample(t, reg, "vllm_gateway_info", map[string]string{"target": "gw", "gateway": "haproxy"}); !ok {
		t.Error("no vllm_gateway_info{gateway=haproxy}")
	}
	// HAProxy's counters are read at the gateway's scrape (every 15 s):
	// the one after the 30 probes counts at least 5 requests to each.
	backendRequests := func() string {
		for _, name := range []string{"s1", "s2", "s3"} {
			if v, ok := sample(t, reg, "vllm_gateway_backend_requests_total", map[string]string{"target": "gw", "backend": name}); !ok || v < 5 {
				return fmt.Sprintf("vllm_gateway_backend_requests_total{backend=%s} %v (%v), want the requests HAProxy sent it", name, v, ok)
			}
		}
		return ""
	}
	for deadline, msg := time.Now().Add(35*time.Second), backendRequests(); msg != ""; msg = backendRequests() {
		if time.Now().After(deadline) {
			t.Error(msg)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, ok := sample(t, reg, "vllm_gateway_ready_endpoints", map[string]string{"target": "gw"}); !ok || v != 6 {
		t.Errorf("vllm_gateway_ready_endpoints %v (%v), want 6 (three servers UP in each of two backends)", v, ok)
	}
	if _, ok := sample(t, reg, "vllm_server_up", map[string]string{"target": "gw"}); ok {
		t.Error("the gateway's /metrics is scraped as an engine's too (vllm_server_up{target=gw})")
	}

	// The target page's gateway table names the slow member.
	code, page := f.get("/target?name=gw")
	_, joinTable, _ := strings.Cut(page, `<table id="gateway-joins">`)
	joinTable, _, _ = strings.Cut(joinTable, "</table>")
	if code != http.StatusOK || !strings.Contains(joinTable, "<td>short</td>") || !strings.Contains(joinTable, "<td>s3</td>") {
		t.Errorf("/target?name=gw: %d, gateway table %q: want module short with s3 slowest", code, joinTable)
	}
	f.stop()
}
