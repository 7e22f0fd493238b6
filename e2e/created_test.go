package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// createdFailures is the failure series the two-scraper test follows.
const createdFailures = `vllm_probe_failures_total{target="sim",reason="http_5xx"}`

// TestCreatedTimestampsSecondScraper is the high-availability pair's case
// for created timestamps: two independent Prometheus 3.x replicas scrape one
// vllm_prober, the second started after the first failure of a reason, when
// the series' first exposition (its 0) has gone to the first replica: the
// second's first sample is already the count. Both run with
// --enable-feature=created-timestamp-zero-ingestion and scrape the protobuf
// format first (scrape_protocols), which carries the counter's created
// timestamp: the second stores a 0 at the time of the first failure, and
// increase() on both counts the failures. A third replica started with the
// second, the same configuration but without the feature, shows what the
// created timestamp is for: its increase() is 0, the failures missed.
func TestCreatedTimestampsSecondScraper(t *testing.T) {
	p3 := prometheus3Dir()
	if p3 == "" {
		testtool.Skip(t, "Prometheus 3.x (E2E_PROMETHEUS3_DIR)", "make e2e builds it once with scripts/e2e-tools.sh prometheus3")
	}
	promBin := filepath.Join(p3, "prometheus")
	ctx := t.Context()
	dir := t.TempDir()
	proberBin, simBin := binaries(t)

	sim, simAddr := startSim(t, simBin, "--model="+simModel, "--ttft=50ms", "--itl=10ms")
	simURL := "http://" + simAddr
	prober, proberAddr := startProber(t, proberBin, dir, fmt.Sprintf(`global:
  probe_interval: 1s
  probe_timeout: 900ms
  scrape_interval: 1s
  scrape_timeout: 900ms
modules:
  completion:
    prober: completions
    prompt: %q
    max_tokens: 4
    ignore_eos: true
targets:
  - name: sim
    url: %s
    model: %s
    modules: [completion]
`, probePrompt, simURL, simModel))

	// Every replica has the same configuration: protobuf first, which
	// carries created timestamps (the feature makes it the default; said
	// here so that the replica without the feature scrapes the same bytes).
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: vllm_prober
    scrape_protocols: [PrometheusProto, OpenMetricsText1.0.0, PrometheusText0.0.4]
    static_configs:
      - targets: [%q]
`, proberAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(name string, ct bool) string {
		addr := freeAddr(t)
		args := []string{"--config.file=" + promCfg, "--storage.tsdb.path=" + filepath.Join(dir, name), "--web.listen-address=" + addr}
		if ct {
			args = append(args, "--enable-feature=created-timestamp-zero-ingestion")
		}
		p := startProcess(t, "prometheus "+name, promBin, args...)
		u := "http://" + addr
		if err := waitReady(ctx, p, u+"/-/ready", 60*time.Second); err != nil {
			t.Fatal(err)
		}
		return u
	}
	scraped := func(u, name string, expr string, min int) {
		t.Helper()
		if err := waitFor(ctx, 60*time.Second, 250*time.Millisecond, name+": "+expr, func(ctx context.Context) (bool, error) {
			got, err := queryValues(ctx, u, expr)
			return len(got) == 1 && got[0].Value >= float64(min), err
		}); err != nil {
			t.Fatal(err)
		}
	}

	first := start("first", true)
	// The first replica has the pair's counters, and no failure yet.
	scraped(first, "first", `count_over_time(vllm_probe_attempts_total{target="sim"}[1m])`, 3)
	if got, err := queryValues(ctx, first, createdFailures); err != nil || len(got) != 0 {
		t.Fatalf("%s before any failure: %v %v", createdFailures, got, err)
	}

	// Failures: until the first replica has seen some, then no more.
	if err := simConfig(ctx, simURL, `{"fault":"http_status","fault_status":500,"fault_rate":1}`); err != nil {
		t.Fatal(err)
	}
	scraped(first, "first", createdFailures, 1)
	if err := simConfig(ctx, simURL, `{"fault":""}`); err != nil {
		t.Fatal(err)
	}
	// The count settles (a probe in flight may still fail).
	var failures float64
	if err := waitFor(ctx, 30*time.Second, 250*time.Millisecond, "the failure count to settle", func(ctx context.Context) (bool, error) {
		got, err := queryValues(ctx, first, fmt.Sprintf(`changes(%s[3s]) == 0 and count_over_time(%s[3s]) >= 3`, createdFailures, createdFailures))
		if err != nil || len(got) != 1 {
			return false, err
		}
		now, err := queryValues(ctx, first, createdFailures)
		if err != nil || len(now) != 1 {
			return false, err
		}
		failures = now[0].Value
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s = %v on the first replica; starting the second (with created-timestamp-zero-ingestion) and a third (without)", createdFailures, failures)

	second := start("second", true)
	third := start("third", false)
	for _, r := range []struct{ name, u string }{{"second", second}, {"third", third}} {
		scraped(r.u, r.name, fmt.Sprintf(`count_over_time(%s[1m])`, createdFailures), 3)
		got, err := queryValues(ctx, r.u, fmt.Sprintf(`min_over_time(%s[1m])`, createdFailures))
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v %v", r.name, got, err)
		}
		t.Logf("%s replica: lowest sample %v", r.name, got[0].Value)
	}

	// One instant, a few seconds back, for every replica.
	at := time.Now().Add(-2 * time.Second)
	expr := fmt.Sprintf(`increase(%s[2m])`, createdFailures)
	results := map[string]float64{}
	for _, r := range []struct{ name, u string }{{"first", first}, {"second", second}, {"third", third}} {
		got, err := queryValuesAt(ctx, r.u, expr, at)
		if err != nil {
			t.Fatal(err)
		}
		v := 0.0
		if len(got) == 1 {
			v = got[0].Value
		}
		results[r.name] = v
	}
	t.Logf("%s: first replica %.3g, second (started after the failures, created timestamps) %.3g, third (started with it, no created timestamps) %.3g; %v failures",
		expr, results["first"], results["second"], results["third"], failures)
	for _, name := range []string{"first", "second"} {
		// increase() extrapolates to the window's end: a little above.
		if v := results[name]; v < failures*0.99 || v > failures*1.5 {
			t.Errorf("%s replica: %s = %v, want the %v failures", name, expr, v, failures)
		}
	}
	// What the created timestamp is for: without it, the second replica's
	// first sample is already the count, and increase() misses it.
	if v := results["third"]; v != 0 {
		t.Errorf("third replica (no created-timestamp-zero-ingestion): %s = %v, want 0: the miss this test shows is gone, so it no longer shows what created timestamps fix", expr, v)
	}
	for _, p := range []*process{sim, prober} {
		if err := p.exited(); err != nil {
			t.Error(err)
		}
	}
}
