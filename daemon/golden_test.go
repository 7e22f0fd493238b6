package daemon

import (
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/prober"
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

func goldenDaemon(t *testing.T) *Daemon {
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
    modules: [short_chat, never_ran]
    http_client_config:
      authorization: {credentials: `+goldenSecret+`}
  - name: unchecked
    url: http://127.0.0.1:8001
    modules: [never_ran]
`)
	d, err := New(Options{ConfigFile: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// goldenResult is a failed probe whose server echoed the key in a header and in
// its error message.
func goldenResult() *prober.Result {
	ms := time.Millisecond
	return &prober.Result{
		Start:      time.Date(2026, 1, 2, 3, 4, 5, 6000000, time.UTC),
		Success:    false,
		Reason:     prober.ReasonTruncated,
		Err:        "stream ended without [DONE] (key " + goldenSecret + ")",
		StatusCode: 200,
		TTFT:       50 * ms, E2E: 70 * ms, TPOT: 10 * ms,
		ITLs:         []time.Duration{10 * ms, 10 * ms},
		PromptTokens: 12, OutputTokens: 3, OutputTokensFromUsage: false,
		Events: []prober.Event{
			{Offset: 0, Kind: prober.EventRequestSent},
			{Offset: ms, Kind: prober.EventHeaders},
			{Offset: 50 * ms, Kind: prober.EventContent, Bytes: 250},
			{Offset: 60 * ms, Kind: prober.EventContent, Bytes: 251},
			{Offset: 70 * ms, Kind: prober.EventContent, Bytes: 249},
			{Offset: 80 * ms, Kind: prober.EventDone},
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
	out := d.debugReport(cfg, tg, "short_chat", goldenResult(), reg)
	golden(t, "debug-report.golden", out)
}

func TestLandingPageGolden(t *testing.T) {
	d := goldenDaemon(t)
	res := goldenResult()
	ok := *res
	ok.Success, ok.Reason, ok.Err = true, "", ""
	ok.Start = res.Start.Add(time.Minute)
	// What the prober knows: sim's chat module ran twice, the other target is
	// unknown to it (not applied yet) and gets listed from the configuration.
	statuses := []prober.TargetStatus{{
		Name: "sim", URL: "http://127.0.0.1:8000", Model: "m1", HealthUp: true, Checked: true,
		Modules: []prober.ModuleStatus{{Module: "short_chat", Last: &ok, History: []prober.Result{ok, *res}}},
	}}
	data := landingData{
		Version:     "(version=1.2.3, branch=main, revision=abc)",
		MetricsPath: "metrics",
		Targets:     d.pageTargets(d.Config(), statuses),
	}
	var b testWriter
	if err := landingTemplate.Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	golden(t, "landing.golden.html", b.String())
	if res.Err != "stream ended without [DONE] (key "+goldenSecret+")" {
		t.Error("pageTargets modified the prober's result instead of a copy")
	}
}

type testWriter struct{ b []byte }

func (w *testWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *testWriter) String() string              { return string(w.b) }
