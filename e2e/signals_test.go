package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/mixin"
)

// TestMissingSignalShowsNotExported is the "panels show 'not exported
// by this server', not 'No data'", as the endpoint dashboard draws it: a
// real vLLM 0.4.3 /metrics (collector/testdata/real-0.4.3.prom), which has
// no vllm:request_queue_time_seconds, is scraped by a vllm_prober that does
// not probe it (probe: false) and by a real Prometheus. The scrape-only
// target must be a choice of the dashboard's $target; with it chosen, the
// queue-time panel draws the "queue_time: not exported by this server" hint
// and no other panel draws a hint, since 0.4.3 exports every other signal.
func TestMissingSignalShowsNotExported(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a vllm_prober and a real Prometheus for about half a minute; skipped with -short")
	}
	promBin := prometheusBinary(t)
	proberBin, _ := binaries(t)
	ctx := t.Context()
	dir := t.TempDir()

	capture, err := os.ReadFile("../collector/testdata/real-0.4.3.prom")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(capture)
	}))
	t.Cleanup(srv.Close)

	cfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 900ms, rate_window: 10s}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 4}
targets:
  - {name: legacy, url: %q, probe: false}
`, srv.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProcess(t, "vllm_prober", proberBin, "--config.file="+cfg, "--web.listen-address="+addr)
	if err := waitReady(ctx, p, "http://"+addr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	_, promURL := startPrometheus(t, promBin, dir, []string{addr})
	client := &mixin.Client{BaseURL: promURL, HTTP: httpClient}
	if err := waitFor(ctx, 60*time.Second, time.Second, "the legacy server's signals in Prometheus", func(ctx context.Context) (bool, error) {
		s, err := queryValues(ctx, promURL, `count(vllm_server_signal_available{target="legacy"})`)
		if err != nil || len(s) != 1 || s[0].Value < 10 {
			return false, fmt.Errorf("signal series: %v (%v)", s, err)
		}
		s, err = queryValues(ctx, promURL, `count_over_time(vllm_server_up{target="legacy"}[30s]) >= 3`)
		return err == nil && len(s) == 1, err
	}); err != nil {
		t.Fatal(err)
	}

	d, err := mixin.LoadDashboard(filepath.Join(dashboardsDir, "vllm-endpoint-detail.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The variables as Grafana sets them: the first job, the scrape-only
	// target (it must be an option), and the model variable, which has no
	// option for a target without probes: Grafana then interpolates "".
	vals := map[string]string{}
	for _, v := range d.Variables {
		opts, err := client.VariableOptions(ctx, v, vals, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		switch v.Name {
		case "target":
			if !slices.Contains(opts, "legacy") {
				t.Fatalf("$target options %q lack the scrape-only target", opts)
			}
			vals[v.Name] = mixin.RegexValue([]string{"legacy"})
		default:
			if len(opts) > 0 {
				vals[v.Name] = mixin.RegexValue(opts[:1])
			} else {
				vals[v.Name] = ""
			}
		}
	}

	end := time.Now()
	start := end.Add(-15 * time.Second)
	hints := map[string][]string{} // panel -> hint legends drawn
	serverPanels := 0
	for _, panel := range d.Panels {
		for _, tg := range panel.Targets {
			if !strings.Contains(tg.Expr, "vllm_server_") {
				continue
			}
			expr := mixin.Interpolate(tg.Expr, vals, rateInterval)
			series, err := client.RangeSeries(ctx, expr, start, end, interval)
			if err != nil {
				t.Errorf("%s: %s: %v", panel.Title, expr, err)
				continue
			}
			if !strings.Contains(tg.LegendFormat, "not exported by this server") {
				if len(series) > 0 {
					serverPanels++
				}
				continue
			}
			for _, s := range series {
				hints[panel.Title] = append(hints[panel.Title], mixin.RenderLegend(tg.LegendFormat, s))
			}
		}
	}
	t.Logf("hints drawn: %q; %d server queries with data", hints, serverPanels)
	// A hint may name only a signal the server really lacks, as the
	// collector says: vllm_server_signal_available == 0.
	missing, err := queryValues(ctx, promURL, `vllm_server_signal_available{target="legacy"} == 0`)
	if err != nil {
		t.Fatal(err)
	}
	lacks := map[string]bool{}
	for _, m := range missing {
		lacks["legacy "+m.Labels["signal"]+": not exported by this server"] = true
	}
	queuePanels := 0
	for title, legends := range hints {
		for _, l := range legends {
			if !lacks[l] {
				t.Errorf("panel %q draws hint %q, but the server exports that signal (lacks %v)", title, l, slices.Sorted(maps.Keys(lacks)))
			}
		}
		if slices.Contains(legends, "legacy queue_time: not exported by this server") {
			queuePanels++
		}
	}
	if queuePanels == 0 {
		t.Error("no panel draws \"legacy queue_time: not exported by this server\"; the queue-time panel reads as No data")
	}
	if serverPanels == 0 {
		t.Error("no server query returned data for the scrape-only target")
	}
}
