package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/mixin"
)

const (
	// forScale shortens every `for` and rule window: 5m becomes 5s (the
	// shortest window, five scrape intervals), 10m 9s, 30m 27s, 1h 54s.
	forScale = 0.015
	// interval is Prometheus' scrape and evaluation interval and the prober's
	// probe and /metrics scrape interval.
	interval = time.Second
	// rateInterval stands in for Grafana's $__rate_interval: four scrape
	// intervals and one more, as Grafana computes it.
	rateInterval = 5 * time.Second

	simModel       = "e2e/sim-model"
	probePrompt    = "Let's explore some architecture patterns for microservices"
	probeMaxTokens = 12
	// Latencies large enough that the scheduling noise of a loaded 2-core
	// machine (tens of ms) does not move a 10s mean by 20 %.
	baseTTFT      = "150ms"
	baseITL       = "40ms"
	regressedITL  = "52ms" // +30 %
	sloFile       = "../mixin/slo.yml"
	dashboardsDir = "../dashboards"
)

// steadyExemptions are the alerts allowed to be pending or firing in the
// steady run, with the reason. It is empty: a healthy endpoint fires nothing.
// (VLLMThroughputRegression used to be listed here: the output_throughput
// ratio compared the server's total tokens/s with a benchmark's, which an
// endpoint serving only probes could never match; it now compares per-stream
// rates.)
var steadyExemptions = map[string]string{}

// panelExemptions are dashboard queries allowed to return no data in every
// phase of the run, keyed by a string of the query (a metric name), with the
// reason. Panels that only have data under a condition (firing alerts) are
// checked again while the cases drive it and need no exemption.
var panelExemptions = map[string]string{
	// Hint series: 1 only on a server that lacks a signal; vllm_sim exports them all.
	`vllm_server_signal_available{job=~".+", target=~".+", signal=`: "the 'not exported by this server' hint is empty while the server exports every signal, as vllm_sim does",
	// Speculative decoding: the simulator of this run drafts no tokens
	// (collector TestSpecDecodeSeries proves the series on one that does).
	`vllm_server_spec_decode_`: "the simulator of this run serves no speculative decoding",
	// Skip counters are created at a pair's first skip (prober
	// TestReasonsAppearAtZeroFirst); a healthy endpoint probed once a second
	// may skip nothing in the whole run, and a loaded machine may skip some.
	// prober TestManagerBudget counts budget skips.
	`vllm_probe_skipped_total{`: "skip counters appear at a pair's first skip; this run may skip no probe",
	// Seasonal rules need the same hour one, two and three weeks ago
	// (alerts/tests/seasonal_test.yml proves them over 25 days of series).
	`_seasonal`: "the seasonal rules yield nothing before three weeks of history",
	// Gateway targets: this run has no gateway in front of its simulator.
	// internal/daemon TestGatewayHAProxy feeds every vllm_gateway_* series
	// on the daemon's /metrics (HAProxy in front of three vllm_sim).
	`vllm_gateway_`: "no gateway target in this run: internal/daemon TestGatewayHAProxy feeds the vllm_gateway_* series",
	// Prefill/decode disaggregation: this run's simulator has no KV
	// connector. internal/daemon TestDisaggregatedTransferSlow feeds the KV
	// transfer series (vllm_sim's P/D mode behind a P/D proxy).
	`vllm_server_kv_transfer_`: "no prefill/decode pair in this run: internal/daemon TestDisaggregatedTransferSlow feeds the KV transfer series",
}

// TestPrometheusEndToEnd proves the mixin on a real Prometheus: vllm_sim is
// probed by vllm_prober (baseline measured by vllm_prober bench against the
// same simulator), Prometheus scrapes vllm_prober every second and evaluates
// alerts/ generated with --for-scale 0.015. In sequence, on one stack:
//
//	(b) a steady run fires nothing;
//	(c) itl +30 % through /admin/config fires VLLMLatencyRegression;
//	(d) the stall fault fires VLLMEngineHung while /health stays 200;
//	(e) many concurrent streams on a small KV cache fire VLLMKVCacheSaturated;
//	(a) every dashboard panel query returned data (checked in each phase).
func TestPrometheusEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs vllm_sim, vllm_prober and a real Prometheus for about two minutes; skipped with -short")
	}
	promBin := prometheusBinary(t)
	proberBin, simBin := binaries(t)
	ctx := t.Context()
	dir := t.TempDir()
	started := time.Now()

	// The simulator: a small KV cache (128 blocks of 16 tokens) so that the
	// test can saturate it; everything else is what the baseline measures.
	// The answer the "answer" module checks (vllm_sim --answers).
	answersFile := filepath.Join(dir, "answers.json")
	if err := os.WriteFile(answersFile, []byte(`{"What is 2+2? Answer with the number only.": "4"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	simAddr := freeAddr(t)
	simURL := "http://" + simAddr
	sim := startProcess(t, "vllm_sim", simBin, "--web.listen-address="+simAddr, "--model="+simModel,
		"--max-model-len=2048", "--kv-cache-tokens=2048", "--block-size=16",
		"--ttft="+baseTTFT, "--itl="+baseITL, "--batch-slowdown=0.02", "--answers="+answersFile)
	if err := waitReady(ctx, sim, simURL+"/health", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	tl := newTimeline()
	t.Cleanup(func() { t.Logf("timeline (seconds since the simulator was up):\n%s", tl) })
	tl.add("vllm_sim up on %s", simAddr)

	// The baseline: vllm_prober bench against this simulator with the probe's
	// own request, one request in flight.
	benchDir := filepath.Join(dir, "bench")
	bench := exec.CommandContext(ctx, proberBin, "bench", "--url="+simURL, "--out="+benchDir, "--name=e2e",
		"--concurrency=1", "--requests=10", "--max-tokens="+strconv.Itoa(probeMaxTokens), "--ignore-eos",
		"--prompt="+probePrompt)
	if out, err := bench.CombinedOutput(); err != nil {
		t.Fatalf("vllm_prober bench: %v\n%s", err, out)
	}
	baselineFile := filepath.Join(benchDir, "e2e.baseline.yaml")
	if _, err := os.Stat(baselineFile); err != nil {
		t.Fatalf("vllm_prober bench wrote no baseline: %v", err)
	}
	tl.add("baseline measured by vllm_prober bench (concurrency 1, 10 requests)")

	// vllm_prober: probes every second, scrapes the simulator every second.
	proberCfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(proberCfg, []byte(fmt.Sprintf(`global:
  probe_interval: 1s
  scrape_interval: 1s
  scrape_timeout: 900ms
  rate_window: 10s
  stall_timeout: 500ms
modules:
  completion:
    prober: completions
    prompt: %q
    max_tokens: %d
    ignore_eos: true
    # Goodput objectives the simulator meets: the goodput panels have data.
    slos: {ttft: 2s, tpot: 100ms, e2e: 10s}
  answer:
    prober: completions
    prompt: "What is 2+2? Answer with the number only."
    max_tokens: 4
    expect:
      equals: "4"
baselines:
  - name: e2e
    file: %s
targets:
  - name: sim
    url: %s
    model: %s
    modules: [completion, answer]
    max_num_seqs: 256
    baseline: e2e
    # Prices the simulator for the cost row and the fleet cost rule (an
    # assumed figure: the currency is whatever the configuration says).
    price_per_hour: 2.5
`, probePrompt, probeMaxTokens, baselineFile, simURL, simModel)), 0o644); err != nil {
		t.Fatal(err)
	}
	proberAddr := freeAddr(t)
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+proberCfg, "--web.listen-address="+proberAddr)
	if err := waitReady(ctx, prober, "http://"+proberAddr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	tl.add("vllm_prober up on %s", proberAddr)

	// Prometheus with our rules, every `for` and window scaled down.
	prom, promURL := startPrometheus(t, promBin, dir, []string{proberAddr})
	promAddr := strings.TrimPrefix(promURL, "http://")
	tl.add("prometheus up on %s (rules with --for-scale %v)", promAddr, forScale)
	client := &mixin.Client{BaseURL: promURL, HTTP: httpClient}

	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := watchAlerts(watchCtx, client, tl, 500*time.Millisecond)
	t.Cleanup(func() { stopWatch(); <-watchDone })

	processesUp := func() error {
		for _, p := range []*process{sim, prober, prom} {
			if err := p.exited(); err != nil {
				return err
			}
		}
		return nil
	}
	dumpValues := func(t *testing.T, exprs ...string) {
		t.Helper()
		for _, e := range exprs {
			s, err := queryValues(ctx, promURL, e)
			if err != nil {
				t.Logf("  %s: %v", e, err)
				continue
			}
			if len(s) == 0 {
				t.Logf("  %s: no data", e)
			}
			for _, x := range s {
				t.Logf("  %s  =>  %s", e, x)
			}
		}
	}

	// Warm-up: the prober's series, the recording rules and the regression
	// ratios are in Prometheus, with several seconds of collector rates.
	warm := []string{
		`vllm_probe_regression_ratio{metric="itl"}`,
		`target_module:vllm_probe_success:ratio_rate5m`,
		`count_over_time(vllm_server_generation_tokens_per_second[10s]) >= 8`,
	}
	if err := waitFor(ctx, 60*time.Second, 500*time.Millisecond, "warm-up", func(ctx context.Context) (bool, error) {
		if err := processesUp(); err != nil {
			return false, err
		}
		for _, e := range warm {
			if n, err := client.Query(ctx, e); err != nil || n == 0 {
				return false, fmt.Errorf("%s: %d series, %v", e, n, err)
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	tl.add("warm-up done")

	panels := newPanelCheck(t, client)
	panels.check(ctx, "steady")

	// (b) A steady run fires nothing.
	t.Run("steady run fires nothing", func(t *testing.T) {
		tl.add("(b) steady run: watching alerts for 10s")
		unexpected := map[string]mixin.Alert{}
		exempted := map[string]mixin.Alert{}
		window, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for window.Err() == nil {
			alerts, err := client.Alerts(window)
			if err != nil && window.Err() == nil {
				t.Fatal(err)
			}
			for _, a := range alerts {
				if _, ok := steadyExemptions[a.Labels["alertname"]]; ok {
					exempted[alertKey(a.Labels)] = a
				} else {
					unexpected[alertKey(a.Labels)] = a
				}
			}
			select {
			case <-window.Done():
			case <-tick.C:
			}
		}
		for k, a := range unexpected {
			t.Errorf("steady run: %s is %s (value %s): %s", k, a.State, a.Value, a.Annotations["description"])
		}
		if len(unexpected) > 0 {
			dumpValues(t, `vllm_probe_regression_ratio`, `vllm_server_headroom_ratio`, `vllm_server_requests`,
				`vllm_server_kv_cache_usage_ratio`, `increase(vllm_probe_failures_total[10s]) > 0`)
		}
		for k, a := range exempted {
			t.Logf("EXEMPT (known defect, reported): %s is %s (value %s): %s", k, a.State, a.Value, steadyExemptions[a.Labels["alertname"]])
		}
		dumpValues(t, `vllm_probe_regression_ratio`,
			`vllm_server_expected_generation_tokens_per_second`, `vllm_server_generation_tokens_per_second`)
		for name := range steadyExemptions {
			found := false
			for _, a := range exempted {
				found = found || a.Labels["alertname"] == name
			}
			if !found {
				t.Logf("exemption of %s was not needed in this run (a baseline measured while the machine was busy "+
					"expects less throughput); remove it from steadyExemptions once the defect is fixed", name)
			}
		}
	})

	// (c) itl +30 % fires VLLMLatencyRegression.
	t.Run("itl +30% fires VLLMLatencyRegression", func(t *testing.T) {
		tl.add("(c) simulator itl %s -> %s", baseITL, regressedITL)
		if err := simConfig(ctx, simURL, `{"itl":"`+regressedITL+`"}`); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		a, err := client.WaitForAlert(wctx, "VLLMLatencyRegression", map[string]string{"target": "sim", "metric": "itl"}, 500*time.Millisecond)
		cancel()
		if err != nil {
			t.Error(err)
			dumpValues(t, `vllm_probe_regression_ratio`, `vllm_probe_expected_time_per_output_token_seconds`)
		} else {
			tl.add("(c) VLLMLatencyRegression{metric=itl} fired, ratio %s", a.Value)
			// The ratio must be the +30 % we injected, not noise above 1.2.
			if v, err := strconv.ParseFloat(a.Value, 64); err != nil || v < 1.2 || v > 1.6 {
				t.Errorf("VLLMLatencyRegression value %s, want about 1.3 (itl %s / %s)", a.Value, regressedITL, baseITL)
			}
			panels.check(ctx, "latency regression firing")
		}
		tl.add("(c) restore itl %s", baseITL)
		if err := simConfig(ctx, simURL, `{"itl":"`+baseITL+`"}`); err != nil {
			t.Fatal(err)
		}
		if err := waitResolved(ctx, client, "VLLMLatencyRegression", 60*time.Second); err != nil {
			t.Error(err)
		}
	})

	// (d) The stall fault fires VLLMEngineHung while /health stays 200.
	t.Run("stall fires VLLMEngineHung with health 200", func(t *testing.T) {
		tl.add("(d) simulator fault stall")
		if err := simConfig(ctx, simURL, `{"fault":"stall"}`); err != nil {
			t.Fatal(err)
		}
		var healthChecks int
		var unhealthy []string
		var fired mixin.Alert
		err := waitFor(ctx, 90*time.Second, 500*time.Millisecond, "VLLMEngineHung to fire", func(ctx context.Context) (bool, error) {
			code, err := httpStatus(ctx, simURL+"/health")
			healthChecks++
			if err != nil || code != http.StatusOK {
				unhealthy = append(unhealthy, fmt.Sprintf("%d %v", code, err))
			}
			alerts, err := client.Alerts(ctx)
			if err != nil {
				return false, err
			}
			for _, a := range alerts {
				if a.State == "firing" && a.Labels["alertname"] == "VLLMEngineHung" && a.Labels["target"] == "sim" {
					fired = a
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Error(err)
			dumpValues(t, `increase(vllm_probe_failures_total{reason=~"stalled|timeout"}[9s])`,
				`increase(vllm_probe_attempts_total[9s])`, `vllm_probe_health_up`)
		} else {
			tl.add("(d) VLLMEngineHung fired, value %s", fired.Value)
			// The alert's own condition includes health_up == 1; check what
			// Prometheus has from the prober as well as the simulator itself.
			if n, err := client.Query(ctx, `vllm_probe_health_up{target="sim"} == 1`); err != nil || n != 1 {
				t.Errorf("vllm_probe_health_up{target=\"sim\"} == 1 while hung: %d series, %v", n, err)
			}
			panels.check(ctx, "engine hung firing")
		}
		if len(unhealthy) > 0 {
			t.Errorf("/health of the stalled simulator was not 200 in %d of %d checks: %v", len(unhealthy), healthChecks, unhealthy)
		} else {
			tl.add("(d) /health answered 200 in all %d checks", healthChecks)
		}
		tl.add("(d) clear the fault")
		if err := simConfig(ctx, simURL, `{"fault":""}`); err != nil {
			t.Fatal(err)
		}
		if err := waitResolved(ctx, client, "VLLMEngineHung", 60*time.Second); err != nil {
			t.Error(err)
		}
	})

	// (e) KV saturation fires VLLMKVCacheSaturated. Many short streams keep
	// the 128-block cache over-committed: a few long ones make its usage
	// saw-tooth (each preemption frees a whole long context) instead.
	t.Run("KV saturation fires VLLMKVCacheSaturated", func(t *testing.T) {
		const clients = 96
		tl.add("(e) %d clients streaming 8-token prompts, 16-40 tokens each, on a 2048-token KV cache", clients)
		load := startKVLoad(ctx, simURL, clients, 8, 16, 40)
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		a, err := client.WaitForAlert(wctx, "VLLMKVCacheSaturated", map[string]string{"target": "sim"}, 500*time.Millisecond)
		cancel()
		if err != nil {
			t.Error(err)
			dumpValues(t, `vllm_server_kv_cache_usage_ratio`, `min_over_time(vllm_server_kv_cache_usage_ratio[10s])`,
				`max_over_time(vllm_server_kv_cache_usage_ratio[10s])`, `vllm_server_requests`, `vllm_server_preemptions_per_second`)
		} else {
			tl.add("(e) VLLMKVCacheSaturated fired, value %s", a.Value)
			panels.check(ctx, "KV cache saturated")
		}
		finished, errs := load.stop()
		tl.add("(e) load stopped after %d completed requests", finished)
		for _, err := range errs {
			t.Errorf("KV load: %v", err)
		}
	})

	// (a) Every dashboard panel query returned data in some phase.
	t.Run("every dashboard query returns data", func(t *testing.T) {
		panels.check(ctx, "end")
		panels.report(ctx, t)
	})

	if err := processesUp(); err != nil {
		t.Error(err)
	}
	t.Logf("end-to-end run took %s", time.Since(started).Round(time.Second))
}

// waitResolved waits until no alert named name is pending or firing.
func waitResolved(ctx context.Context, c *mixin.Client, name string, timeout time.Duration) error {
	return waitFor(ctx, timeout, 500*time.Millisecond, name+" to resolve", func(ctx context.Context) (bool, error) {
		alerts, err := c.Alerts(ctx)
		if err != nil {
			return false, err
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == name {
				return false, fmt.Errorf("%s still %s (value %s)", alertKey(a.Labels), a.State, a.Value)
			}
		}
		return true, nil
	})
}

// panelCheck runs every dashboard panel query in each phase of the run and
// remembers the first phase in which it returned data.
type panelCheck struct {
	client   *mixin.Client
	queries  []mixin.DashboardQuery
	firstHit map[string]string // query key -> phase
	failed   map[string]error  // query key -> query error (bad PromQL)
}

func newPanelCheck(t *testing.T, c *mixin.Client) *panelCheck {
	t.Helper()
	qs, err := mixin.DashboardQueries(dashboardsDir, rateInterval)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) == 0 {
		t.Fatalf("no panel queries in %s", dashboardsDir)
	}
	return &panelCheck{client: c, queries: qs, firstHit: map[string]string{}, failed: map[string]error{}}
}

func panelKey(q mixin.DashboardQuery) string { return q.Dashboard + " / " + q.Panel + " / " + q.Expr }

func (p *panelCheck) check(ctx context.Context, phase string) {
	for _, q := range p.queries {
		k := panelKey(q)
		if _, ok := p.firstHit[k]; ok {
			continue
		}
		n, err := p.client.Query(ctx, q.Expr)
		if err != nil {
			p.failed[k] = err
			continue
		}
		delete(p.failed, k)
		if n > 0 {
			p.firstHit[k] = phase
		}
	}
}

// exemption returns the reason a query may return no data, if any.
func exemption(expr string) (string, bool) {
	for k, reason := range panelExemptions {
		if strings.Contains(expr, k) {
			return reason, true
		}
	}
	return "", false
}

func (p *panelCheck) report(ctx context.Context, t *testing.T) {
	t.Helper()
	byPhase := map[string][]string{}
	for _, q := range p.queries {
		k := panelKey(q)
		if phase, ok := p.firstHit[k]; ok {
			byPhase[phase] = append(byPhase[phase], q.Dashboard+" / "+q.Panel)
			continue
		}
		if reason, ok := exemption(q.Expr); ok {
			t.Logf("exempt panel query %s: %s", k, reason)
			continue
		}
		if err, ok := p.failed[k]; ok {
			t.Errorf("panel query failed: %s: %v", k, err)
		} else {
			t.Errorf("panel query returned no data in any phase: %s", k)
		}
	}
	phases := make([]string, 0, len(byPhase))
	for ph := range byPhase {
		phases = append(phases, ph)
	}
	sort.Strings(phases)
	t.Logf("%d panel queries of %s", len(p.queries), dashboardsDir)
	for _, ph := range phases {
		if ph == "steady" {
			t.Logf("  %d had data in the steady run", len(byPhase[ph]))
			continue
		}
		t.Logf("  first had data with %s: %s", ph, strings.Join(byPhase[ph], "; "))
	}
}
