package web_test

import (
	"flag"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/internal/daemon"
	"github.com/vllm-prober/vllm_prober/internal/daemonweb"
	"github.com/vllm-prober/vllm_prober/internal/web"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

const goldenSecret = "sk-golden-secret-0a1b2c"

// goldenPages are the pages over a daemon (not running) of a fixed
// configuration.
type goldenPages struct {
	web.Pages
	*daemon.Daemon
}

func writeConfig(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func goldenDaemon(t *testing.T) goldenPages {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yml")
	writeConfig(t, path, `
modules:
  short_chat:
    prober: chat
    messages: [{role: user, content: "Name three prime numbers."}]
    max_tokens: 3
  never_ran: {prober: completions, prompt: hi}
targets:
  - name: sim
    url: http://127.0.0.1:8000
    model: m1
    labels: {pool: a, cluster: c1}
    modules: [short_chat, never_ran]
    http_client_config:
      authorization: {credentials: `+goldenSecret+`}
      http_headers: {X-Probe-Token: {secrets: [`+goldenSecret+`]}, x-team: {values: [oncall]}}
  - name: unchecked
    url: http://127.0.0.1:8001
    labels: {pool: b}
    modules: [never_ran]
  - name: metrics-only
    url: http://127.0.0.1:8002
    labels: {pool: a}
    modules: none
`)
	d, err := daemon.New(daemon.Options{ConfigFile: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := daemonweb.WebOptions(d)
	// The collector's last scrapes: sim's failed with an error that quotes
	// the key, which the pages must not show; unchecked's was never run.
	at := time.Date(2026, 1, 2, 3, 15, 3, 0, time.UTC)
	o.Scrapes = fakeScrapes{
		"sim":          {At: at, Duration: 900 * time.Millisecond, Err: "Get \"http://127.0.0.1:8000/metrics\": context deadline exceeded (key " + goldenSecret + ")"},
		"metrics-only": {At: at, Duration: 12345 * time.Microsecond, Up: true},
	}
	return goldenPages{web.NewPages(o), d}
}

type fakeScrapes map[string]collector.ScrapeState

func (f fakeScrapes) LastScrape(target string) (collector.ScrapeState, bool) {
	s, ok := f[target]
	return s, ok
}

// goldenResult is a failed probe whose server echoed the key in a header and in
// its error message.
func goldenResult() *probe.Result {
	ms := time.Millisecond
	return &probe.Result{
		Start:      time.Date(2026, 1, 2, 3, 4, 5, 6000000, time.UTC),
		Success:    false,
		Reason:     probe.ReasonTruncated,
		Err:        "stream ended without [DONE] (key " + goldenSecret + ")",
		StatusCode: 200,
		Phase:      probe.PhaseStream,
		Request:    "POST /v1/chat/completions",
		RequestBody: `{"max_completion_tokens":3,"messages":[{"content":"3f9a0c1b2d4e Name three prime numbers.","role":"user"}],` +
			`"model":"m1","stream":true,"stream_options":{"include_usage":true},"temperature":0}`,
		Text: "2, 3",
		TTFT: 50 * ms, E2E: 5080 * ms, Duration: 5081 * ms,
		ITLs:         []time.Duration{10 * ms, 10 * ms},
		PromptTokens: 12, OutputTokens: 3, OutputTokensFromUsage: false,
		Events: []probe.Event{
			{Offset: 0, Kind: probe.EventRequestSent},
			{Offset: ms, Kind: probe.EventHeaders},
			{Offset: 50 * ms, Kind: probe.EventContent, Bytes: 250},
			{Offset: 60 * ms, Kind: probe.EventContent, Bytes: 251},
			{Offset: 70 * ms, Kind: probe.EventContent, Bytes: 249},
			{Offset: 80 * ms, Kind: probe.EventDone},
		},
		RequestHeader: http.Header{
			"Authorization": {"Bearer " + goldenSecret},
			"Content-Type":  {"application/json"},
			"X-Request-Id":  {"vllm-prober-sim-short_chat-abc"},
		},
		ResponseHeader: http.Header{
			"Content-Type": {"text/event-stream"},
			"X-Echo":       {"Bearer " + goldenSecret},
		},
	}
}

func TestDebugReportGolden(t *testing.T) {
	d := goldenDaemon(t)
	cfg := d.Config()
	tg, _ := cfg.Target("sim")
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm_probe_success", Help: "1 if the last probe of the target and module succeeded, else 0."})
	reg.MustRegister(g)
	out := d.DebugReport(cfg, tg, "short_chat", goldenResult(), 0, reg)
	golden(t, "debug-report.golden", out)

	// A stored record of a refused connection: no response, no timeline.
	refused := &probe.Result{Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Reason: probe.ReasonConnection,
		Err: "connection refused: dial tcp 127.0.0.1:8000: connect: connection refused", Phase: probe.PhaseRequest,
		Request: "POST /v1/chat/completions", RequestBody: `{"model":"m1"}`, E2E: 2 * time.Millisecond, Duration: 2 * time.Millisecond,
		Events:        []probe.Event{{Offset: 2 * time.Millisecond, Kind: probe.EventFailed}},
		RequestHeader: http.Header{"Content-Type": {"application/json"}}}
	golden(t, "record-refused.golden", d.DebugReport(cfg, tg, "short_chat", refused, 7, nil))
}

func TestLandingPageGolden(t *testing.T) {
	d := goldenDaemon(t)
	res := goldenResult()
	now := res.Start.Add(11 * time.Minute)
	// What the prober knows: sim's chat module fails since 11 minutes and
	// succeeded 12 minutes ago; its other module never ran; the other target
	// is unknown to it.
	sums := []prober.PairStats{
		{Target: "sim", Module: "short_chat", Model: "m1", Probes: 20, Successes: 9,
			LastProbe: now.Add(-2 * time.Second), LastSuccess: res.Start.Add(-time.Minute), FailingSince: res.Start,
			LastReason: string(res.Reason), RecordStats: prober.RecordStats{LastErr: res.Err, LastStatusCode: 200,
				LastID: 41, LastFailureID: 41, LastFailure: now.Add(-2 * time.Second), HourProbes: 40, HourSuccesses: 29}},
		{Target: "sim", Module: "never_ran"},
		{Target: "unchecked", Module: "never_ran", LastProbe: now.Add(-time.Second), LastSuccess: now.Add(-time.Second),
			Probes: 20, Successes: 15, RecordStats: prober.RecordStats{HourProbes: 20, HourSuccesses: 15, LastID: 20, LastFailureID: 12}},
	}
	data := d.LandingData(url.Values{}, sums, now)
	data.Version = "(version=1.2.3, branch=main, revision=abc)"
	var b testWriter
	if err := web.ExecLanding(&b, data); err != nil {
		t.Fatal(err)
	}
	golden(t, "landing.golden.html", b.String())

	// Filters: only failing, then by label value.
	if got := d.LandingData(url.Values{"state": {"failing"}}, sums, now).Rows; len(got) != 1 || got[0].Module != "short_chat" {
		t.Errorf("state=failing rows: %+v", got)
	}
	if got := d.LandingData(url.Values{"label": {"pool=a"}}, sums, now).Rows; len(got) != 2 || got[0].Target != "sim" {
		t.Errorf("label=pool=a rows: %+v", got)
	}
	// The scrape-only target has no pair but its own row with its last
	// scrape; the label filter applies to it.
	if got := d.LandingData(url.Values{"label": {"pool=b"}}, sums, now).ScrapeOnly; len(got) != 0 {
		t.Errorf("label=pool=b shows the scrape-only target of pool a: %+v", got)
	}
	page := b.String()
	for _, want := range []string{
		`<td class="hot">down at 03:15:03Z (2s ago), took 900.0ms: context deadline exceeded (key &lt;secret&gt;)`,
		`<tr><td><a href="target?name=metrics-only">metrics-only</a></td><td>up at 03:15:03Z (2s ago), took 12.3ms</td><td>pool=a</td></tr>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the landing page lacks %s", want)
		}
	}
}

func TestTargetPageGolden(t *testing.T) {
	d := goldenDaemon(t)
	res := prober.Record{ID: 41, Result: *goldenResult()}
	ok := res
	ok.ID, ok.Success, ok.Reason, ok.Err = 42, true, "", ""
	ok.Start = res.Start.Add(time.Minute)
	ts := prober.TargetStatus{Name: "sim", URL: "http://127.0.0.1:8000", Model: "m1", HealthUp: true, Checked: true,
		Modules: []prober.ModuleStatus{{Module: "short_chat", Last: &ok, History: []prober.Record{ok, res}}}}
	tg, _ := d.Config().Target("sim")
	var b testWriter
	now := res.Start.Add(11 * time.Minute)
	stats := []prober.PairStats{
		{Target: "sim", Module: "short_chat", Model: "m1", Probes: 2, Successes: 1,
			LastProbe: ok.Start.Add(time.Second), LastSuccess: ok.Start.Add(time.Second),
			RecordStats: prober.RecordStats{LastID: 42, LastFailureID: 41, LastFailure: res.Start.Add(5 * time.Second), HourProbes: 2, HourSuccesses: 1}},
		{Target: "unchecked", Module: "never_ran"},
	}
	if err := web.ExecTarget(&b, d.TargetPage(tg, ts, stats, now)); err != nil {
		t.Fatal(err)
	}
	golden(t, "target.golden.html", b.String())

	// A scrape-only target: not checked, no module table, its last scrape.
	mo, _ := d.Config().Target("metrics-only")
	var b2 testWriter
	if err := web.ExecTarget(&b2, d.TargetPage(mo, prober.TargetStatus{Name: "metrics-only", URL: mo.URL}, nil, now)); err != nil {
		t.Fatal(err)
	}
	golden(t, "target-scrape-only.golden.html", b2.String())
	if res.Err != "stream ended without [DONE] (key "+goldenSecret+")" {
		t.Error("targetPage modified the prober's result instead of a copy")
	}
}

type testWriter struct{ b []byte }

func (w *testWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *testWriter) String() string              { return string(w.b) }
