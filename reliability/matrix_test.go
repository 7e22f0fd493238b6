package reliability

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/daemon"
	"github.com/vllm-prober/vllm_prober/internal/daemonweb"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// The API keys of the matrix. The control simulator requires controlKey, the
// faulty simulator victimKey; hostile servers echo whatever they receive. Neither
// may appear in anything the daemon writes.
const (
	controlKey = "sk-control-5c1d7e9a3b2f4086"
	victimKey  = "sk-victim-8e2b6f0a4c9d1735"
)

const (
	probeInterval = 500 * time.Millisecond // longer than stall_timeout, which bounds the probe first
	victimModule  = "short"
)

func configText(controlURL, victimURL, caFile string) string {
	return configTextGen(controlURL, victimURL, caFile, 0)
}

// configTextGen is configText with, when gen > 0, an X-Generation: gen header
// in the victim's http_client_config: each generation is a distinct client
// configuration, hence a distinct connection pool.
func configTextGen(controlURL, victimURL, caFile string, gen int) string {
	text := fmt.Sprintf(`
global:
  probe_interval: 500ms
  scrape_interval: 500ms
  scrape_timeout: 400ms
  rate_window: 3s
  stall_timeout: 400ms
modules:
  short:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
    max_tokens: 8
targets:
  - name: ok-a
    url: %[1]s
    model: meta-llama/Llama-3.1-8B-Instruct
    http_client_config:
      authorization:
        credentials: %[2]s
  - name: ok-b
    url: %[1]s
    model: meta-llama/Llama-3.1-8B-Instruct
    http_client_config:
      authorization:
        credentials: %[2]s
  - name: victim
    url: %[3]s
    model: meta-llama/Llama-3.1-8B-Instruct
    http_client_config:
      authorization:
        credentials: %[4]s
      tls_config:
        ca_file: %[5]s
`, controlURL, controlKey, victimURL, victimKey, caFile)
	if gen > 0 {
		text += fmt.Sprintf(`      http_headers:
        X-Generation:
          values: [%q]
`, fmt.Sprint(gen))
	}
	return text
}

// matrix is the running system of the fault matrix: one daemon, two healthy
// control targets on one simulator and a victim target that each fault hits.
// The victim is an HTTPS address (sw) that serves the faulty simulator, a
// hostile server, a server with an untrusted certificate, or nothing.
type matrix struct {
	t       *testing.T
	d       *daemon.Daemon
	srv     *httptest.Server
	path    string
	logs    *syncBuffer
	control string           // the control simulator's URL
	caFile  string           // the certificate the victim trusts
	sim     http.Handler     // the faulty simulator's handler
	admin   *httptest.Server // the faulty simulator's /admin/config
	sw      *switchable
	victim  string // the victim's configured URL
	done    chan struct{}
	cancel  context.CancelFunc
	runDone chan error
	before  int // goroutines before Run
}

// newMatrix starts the servers and one daemon and waits until the victim has
// been probed and scraped successfully.
func newMatrix(t *testing.T) *matrix {
	_, control := startSim(t, controlKey)
	faulty, admin := startSim(t, victimKey)
	m := &matrix{t: t, control: control.URL, sim: faulty.Handler(), admin: admin, done: make(chan struct{})}
	t.Cleanup(func() { close(m.done) })
	m.sw = newSwitchable(t, m.sim)
	m.victim = m.sw.URL()
	dir := t.TempDir()
	m.caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(m.caFile, m.sw.ca, 0o600); err != nil {
		t.Fatal(err)
	}
	m.path = filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(m.path, []byte(configText(m.control, m.victim, m.caFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	var logger log.Logger
	logger, m.logs = debugLogger()
	d, err := daemon.New(daemon.Options{ConfigFile: m.path, HistoryLimit: 5}, logger)
	if err != nil {
		t.Fatal(err)
	}
	m.d = d
	m.srv = httptest.NewServer(daemonweb.Handler(d))
	t.Cleanup(m.srv.Close)

	m.before = quietGoroutines()
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.runDone = cancel, make(chan error, 1)
	go func() { m.runDone <- d.Run(ctx, nil) }()
	if !waitFor(15*time.Second, func() bool { return m.recovered(time.Now().Add(-time.Hour), true) }) {
		m.stop()
		t.Fatal("the victim did not succeed a probe and a scrape within 15s of Run")
	}
	// The pages once without a fault: /probe runs next to the scheduled probes,
	// so the victim's connection pool grows to its working size here, not in
	// the first fault's goroutine count.
	m.checkSecrets(t, "")
	return m
}

func (m *matrix) metrics() metrics { return gather(m.t, m.d.Registry()) }

// setVictimGeneration rewrites the configuration with the victim's client
// configuration at generation gen (see configTextGen) and reloads.
func (m *matrix) setVictimGeneration(gen int) {
	m.t.Helper()
	if err := os.WriteFile(m.path, []byte(configTextGen(m.control, m.victim, m.caFile, gen)), 0o600); err != nil {
		m.t.Fatal(err)
	}
	if err := m.d.Reload(); err != nil {
		m.t.Fatalf("reloading with the victim's client at generation %d: %v", gen, err)
	}
}

// setVictimURL rewrites the configuration with the victim at url and reloads.
func (m *matrix) setVictimURL(url string) {
	m.t.Helper()
	if url == m.victim {
		return
	}
	if err := os.WriteFile(m.path, []byte(configText(m.control, url, m.caFile)), 0o600); err != nil {
		m.t.Fatal(err)
	}
	if err := m.d.Reload(); err != nil {
		m.t.Fatalf("reloading with the victim at %s: %v", url, err)
	}
	m.victim = url
}

func victimLabels(extra ...string) map[string]string {
	l := map[string]string{"target": "victim"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// recovered reports whether the victim's last probe after since succeeded and,
// when scrape is set, its last scrape did too.
func (m *matrix) recovered(since time.Time, scrape bool) bool {
	ms := m.metrics()
	ts, _ := ms.value("vllm_probe_last_timestamp_seconds", victimLabels())
	ok, _ := ms.value("vllm_probe_success", victimLabels())
	if ts < float64(since.UnixNano())/1e9 || ok != 1 {
		return false
	}
	if scrape {
		up, _ := ms.value("vllm_server_up", victimLabels())
		return up == 1
	}
	return true
}

// quietGoroutines is the lowest count of busy goroutines seen over a few
// samples: probes in flight come and go, what stays is the floor.
func quietGoroutines() int {
	n := busyGoroutines()
	for range 10 {
		time.Sleep(20 * time.Millisecond)
		n = min(n, busyGoroutines())
	}
	return n
}

// busyGoroutines counts goroutines minus those of idle keep-alive connections
// (a client connection's read and write loops waiting for a next response, a
// server connection waiting for a next request): connection pools grow and
// shrink with how probes overlap, and an idle pooled connection is not a leak.
// A stream left open, a handler left blocked or a loop left running is counted.
func busyGoroutines() int {
	n, idleClient, writeLoops := 0, 0, 0
	for g := range strings.SplitSeq(goroutineDump(), "\n\n") {
		switch {
		case strings.Contains(g, "net/http.(*persistConn).readLoop") && strings.Contains(g, "bufio.(*Reader).Peek"):
			idleClient++
		case strings.Contains(g, "net/http.(*persistConn).writeLoop"):
			writeLoops++
		case strings.Contains(g, "net/http.(*conn).serve") && strings.Contains(g, "bufio.(*Reader).Peek"):
		default:
			n++
		}
	}
	return n + max(0, writeLoops-idleClient)
}

// secretFree fails if text carries an API key.
func secretFree(t *testing.T, where, text string) {
	t.Helper()
	for _, k := range []string{controlKey, victimKey} {
		if i := strings.Index(text, k); i >= 0 {
			t.Errorf("%s leaks the API key %q: ...%s...", where, k, text[max(0, i-200):min(len(text), i+100)])
		}
	}
}

// checkSecrets reads every page the daemon serves while a fault is active; the
// debug report of a probe of the victim must show the failure reason (else the
// secrets check would look at a page without the error).
func (m *matrix) checkSecrets(t *testing.T, reason probe.Reason) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, path := range []string{"/", "/metrics", "/config",
		"/probe?target=victim&module=" + victimModule,
		"/probe?target=victim&module=" + victimModule + "&debug=true"} {
		_, body := get(ctx, t, m.srv.URL+path)
		secretFree(t, path, body)
		if strings.HasSuffix(path, "debug=true") && reason != "" && !strings.Contains(body, string(reason)) {
			t.Errorf("%s does not show the reason %q:\n%s", path, reason, body)
		}
	}
}

// TestFaultMatrix runs every simulator fault and the network faults against one
// daemon with three targets. Per fault: the victim's probes fail with the
// expected reason (or, for collector faults, the collector shows it), the two
// other targets keep probing on schedule, no page leaks an API key, and once
// the fault ends the victim recovers and the goroutine count returns to where it
// was before the fault. At the end no goroutine of our packages is left and the
// debug log carries no key.
func TestFaultMatrix(t *testing.T) {
	m := newMatrix(t)
	defer m.stop()
	m.run(t, faultCases(t, m))
	m.stop()
	checkNoOwnGoroutines(t)
	secretFree(t, "the debug log", m.logs.String())
	if !strings.Contains(m.logs.String(), "level=debug") {
		t.Errorf("the log has no debug line; the secrets check of the log would be vacuous")
	}
}

// simFault is a fault POSTed to the faulty simulator's /admin/config, cleared
// with {"fault": ""}.
func simFault(settings map[string]any) toggle {
	return toggle{
		on:  func(m *matrix) { adminConfig(m.t, m.admin.URL, settings) },
		off: func(m *matrix) { adminConfig(m.t, m.admin.URL, map[string]any{"fault": ""}) },
	}
}

// netFault switches the victim's address to h (with cert, or refusing), and
// back to the faulty simulator.
func netFault(h http.Handler, cert *tls.Certificate, refuse bool) toggle {
	return toggle{
		on:  func(m *matrix) { m.sw.Set(h, cert, refuse) },
		off: func(m *matrix) { m.sw.Set(m.sim, nil, false) },
	}
}

// toggle turns a fault on and off.
type toggle struct{ on, off func(*matrix) }

type faultCase struct {
	name string
	toggle
	// reason is the failure reason the victim's probes must report; when empty,
	// observed says when the fault has shown (a collector-side fault).
	reason   probe.Reason
	observed func(m metrics) (bool, string)
	// scrape: recovery also waits for the victim's scrape to succeed.
	scrape bool
}

func fc(name string, reason probe.Reason, tg toggle) faultCase {
	return faultCase{name: name, toggle: tg, reason: reason}
}

func faultCases(t *testing.T, m *matrix) []faultCase {
	return []faultCase{
		fc("sim http_status 500", probe.ReasonHTTP5xx, simFault(map[string]any{"fault": simulator.FaultHTTPStatus, "fault_status": 500})),
		fc("sim http_status 429", probe.ReasonRateLimited, simFault(map[string]any{"fault": simulator.FaultHTTPStatus, "fault_status": 429})),
		fc("sim hang_before_headers", probe.ReasonTimeout, simFault(map[string]any{"fault": simulator.FaultHangBeforeHeaders})),
		fc("sim stall", probe.ReasonStalled, simFault(map[string]any{"fault": simulator.FaultStall, "fault_after": 2})),
		fc("sim cut_stream", probe.ReasonTruncated, simFault(map[string]any{"fault": simulator.FaultCutStream, "fault_after": 2})),
		fc("sim malformed_chunk", probe.ReasonMalformed, simFault(map[string]any{"fault": simulator.FaultMalformedChunk, "fault_after": 2})),
		fc("sim error_event", probe.ReasonStreamError, simFault(map[string]any{"fault": simulator.FaultErrorEvent, "fault_after": 2})),
		fc("sim huge_line", probe.ReasonMalformed, simFault(map[string]any{"fault": simulator.FaultHugeLine, "fault_after": 2})),
		fc("sim engine_dead", probe.ReasonHTTP5xx, simFault(map[string]any{"fault": simulator.FaultEngineDead})),
		{
			name: "sim slow_metrics", scrape: true,
			toggle: simFault(map[string]any{"fault": simulator.FaultSlowMetrics, "fault_delay": "3s"}),
			observed: func(ms metrics) (bool, string) {
				up, ok := ms.value("vllm_server_up", victimLabels())
				return ok && up == 0, fmt.Sprintf("vllm_server_up{target=victim} = %v", up)
			},
		},
		{
			name: "sim metrics_reset", scrape: true,
			toggle: simFault(map[string]any{"fault": simulator.FaultMetricsReset}),
			observed: func(ms metrics) (bool, string) {
				// The collector sees the counters restart at zero; it must stay up and
				// never turn the reset into a negative rate.
				up, _ := ms.value("vllm_server_up", victimLabels())
				rate, ok := ms.value("vllm_server_generation_tokens_per_second", victimLabels())
				return up == 1 && ok && rate >= 0 && !math.IsNaN(rate),
					fmt.Sprintf("vllm_server_up = %v, vllm_server_generation_tokens_per_second = %v", up, rate)
			},
		},
		fc("connection refused", probe.ReasonConnection, netFault(nil, nil, true)),
		fc("name does not resolve", probe.ReasonDNS, toggle{
			on:  func(m *matrix) { m.setVictimURL("https://vllm-victim.invalid:8443") },
			off: func(m *matrix) { m.setVictimURL(m.sw.URL()) },
		}),
		fc("TLS handshake (self-signed certificate)", probe.ReasonTLS, netFault(m.sim, selfSigned(t), false)),
		fc("401 echoing the key", probe.ReasonUnauthorized, netFault(hostile(http.StatusUnauthorized), nil, false)),
		fc("429 echoing the key", probe.ReasonRateLimited, netFault(hostile(http.StatusTooManyRequests), nil, false)),
		fc("500 echoing the key", probe.ReasonHTTP5xx, netFault(hostile(http.StatusInternalServerError), nil, false)),
		fc("slow headers", probe.ReasonTimeout, netFault(slowHeaders(m.done), nil, false)),
	}
}

// run runs the cases one after the other against m.
func (m *matrix) run(t *testing.T, cases []faultCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m.t = t
			defer func() { m.t = nil }()
			m.runCase(t, tc)
		})
	}
	m.t = t
}

func (m *matrix) runCase(t *testing.T, tc faultCase) {
	g0 := quietGoroutines()
	ms0 := m.metrics()
	attempts0 := map[string]float64{}
	for _, tgt := range []string{"ok-a", "ok-b"} {
		attempts0[tgt], _ = ms0.value("vllm_probe_attempts_total", map[string]string{"target": tgt})
	}
	fail0, _ := ms0.value("vllm_probe_failures_total", victimLabels("reason", string(tc.reason)))

	// Fault on.
	start := time.Now()
	tc.on(m)
	var last string
	seen := waitFor(10*time.Second, func() bool {
		ms := m.metrics()
		if tc.observed != nil {
			var ok bool
			ok, last = tc.observed(ms)
			return ok
		}
		fail, _ := ms.value("vllm_probe_failures_total", victimLabels("reason", string(tc.reason)))
		all, _ := ms.value("vllm_probe_failures_total", victimLabels())
		last = fmt.Sprintf("failures with reason %q: %v -> %v (all reasons: %v)", tc.reason, fail0, fail, all)
		return fail > fail0
	})
	if !seen {
		t.Errorf("fault not observed within 10s: %s", last)
	}
	m.checkSecrets(t, tc.reason)
	// Keep the fault on long enough to measure the other targets' schedule.
	if d := 5*probeInterval - time.Since(start); d > 0 {
		time.Sleep(d)
	}
	window := time.Since(start)
	ms1 := m.metrics()
	// Fault off.
	end := time.Now()
	tc.off(m)

	expected := float64(window / probeInterval)
	for _, tgt := range []string{"ok-a", "ok-b"} {
		a, _ := ms1.value("vllm_probe_attempts_total", map[string]string{"target": tgt})
		f, _ := ms1.value("vllm_probe_failures_total", map[string]string{"target": tgt})
		f0, _ := ms0.value("vllm_probe_failures_total", map[string]string{"target": tgt})
		// On schedule: at least a third of the ticks of the window (the machine
		// is shared and noisy; a scheduler blocked by the fault gives ~0).
		if got := a - attempts0[tgt]; got < expected/3 {
			t.Errorf("target %s made %v probe attempts in %s during the fault, want >= %.0f (interval %s)",
				tgt, got, window.Round(time.Millisecond), expected/3, probeInterval)
		}
		if f != f0 {
			t.Errorf("target %s failed %v probes during the victim's fault", tgt, f-f0)
		}
	}

	if !waitFor(15*time.Second, func() bool { return m.recovered(end, tc.scrape) }) {
		t.Fatalf("the victim did not recover within 15s of the fault ending")
	}
	var g int
	if !waitFor(5*time.Second, func() bool { g = quietGoroutines(); return g <= g0+2 }) {
		t.Errorf("goroutines grew from %d before the fault to %d after it ended:\n%s", g0, g, goroutineDump())
	}
}

// stop cancels Run and checks that it returns; it is idempotent.
func (m *matrix) stop() {
	t := m.t
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.cancel = nil
	select {
	case err := <-m.runDone:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of its context being cancelled")
	}
}

// checkNoOwnGoroutines fails if a goroutine is still running code of the
// prober, collector or daemon packages.
func checkNoOwnGoroutines(t *testing.T) {
	t.Helper()
	var leaked string
	waitFor(3*time.Second, func() bool {
		leaked = ""
		for g := range strings.SplitSeq(goroutineDump(), "\n\n") {
			for _, pkg := range []string{"vllm_prober/prober.", "vllm_prober/collector.", "vllm_prober/daemon."} {
				if strings.Contains(g, pkg) {
					leaked += g + "\n\n"
					break
				}
			}
		}
		return leaked == ""
	})
	if leaked != "" {
		t.Errorf("goroutines left running after Run returned:\n%s", leaked)
	}
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
