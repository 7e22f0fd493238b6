package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// TestOTLPPushToPrometheus3 runs the OTLP push against a real receiver: a
// Prometheus 3.x with --web.enable-otlp-receiver. vllm_prober probes a
// reasoning vllm_sim with a chat module and pushes to
// /api/v1/otlp/v1/metrics (global.otlp.endpoint) every hour
// (--otlp.interval=1h): nothing goes out until the daemon stops, whose last
// push flushes. The test stops it right after its Nth probe was recorded,
// then queries the translated names back from Prometheus (its default
// UnderscoreEscapingWithSuffixes: dots become underscores, the unit s adds
// _seconds, {token} adds nothing, a counter _total) and checks them against
// the prober's own vllm_probe_* series: as many durations as probes done,
// the same E2E sum, the same tokens, with the conventions' attributes and
// the target's labels as labels.
func TestOTLPPushToPrometheus3(t *testing.T) {
	p3 := prometheus3Dir()
	if p3 == "" {
		testtool.Skip(t, "Prometheus 3.x (E2E_PROMETHEUS3_DIR)", "make e2e builds it once with scripts/e2e-tools.sh prometheus3")
	}
	ctx := t.Context()
	dir := t.TempDir()
	proberBin, simBin := binaries(t)

	sim, simAddr := startSim(t, simBin, "--model="+simModel, "--ttft=100ms", "--itl=10ms", "--reasoning-tokens=2")
	simURL := "http://" + simAddr

	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte("global:\n  evaluation_interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	promURL := "http://" + promAddr
	prom := startProcess(t, "prometheus", filepath.Join(p3, "prometheus"), "--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr, "--web.enable-otlp-receiver")
	if err := waitReady(ctx, prom, promURL+"/-/ready", 60*time.Second); err != nil {
		t.Fatal(err)
	}

	const probes = 3
	prober, proberAddr := startProber(t, proberBin, dir, fmt.Sprintf(`global:
  probe_interval: 2s
  probe_timeout: 2s
  scrape_interval: 1s
  scrape_timeout: 900ms
  otlp:
    endpoint: %s/api/v1/otlp/v1/metrics
modules:
  chat:
    prober: chat
    messages:
      - role: user
        content: %q
    max_tokens: 6
    ignore_eos: true
targets:
  - name: sim
    url: %s
    model: %s
    modules: [chat]
    labels:
      team: e2e
`, promURL, probePrompt, simURL, simModel), "--otlp.interval=1h")
	proberURL := "http://" + proberAddr

	// Stop the daemon right after its probes-th probe was recorded: the next
	// starts 2s after the last, so none ends in between.
	var own map[string]*dto.MetricFamily
	if err := waitFor(ctx, 60*time.Second, 20*time.Millisecond, fmt.Sprintf("%d probes", probes), func(ctx context.Context) (bool, error) {
		mfs, err := scrapeFamilies(ctx, proberURL+"/metrics")
		if err != nil {
			return false, err
		}
		own = mfs
		return histCount(mfs["vllm_probe_e2e_latency_seconds"]) >= probes, nil
	}); err != nil {
		t.Fatal(err)
	}
	prober.halt(t)
	if n := histCount(own["vllm_probe_e2e_latency_seconds"]); n != probes {
		t.Fatalf("read the prober at %d probes, want exactly %d", n, probes)
	}
	if f := own["vllm_probe_failures_total"]; f != nil && len(f.Metric) > 0 {
		t.Fatalf("probes failed: %v", f)
	}

	want := []struct {
		expr string
		v    float64
		tol  float64
	}{
		{`gen_ai_client_inference_duration_seconds_count`, probes, 0},
		{`gen_ai_client_inference_duration_seconds_sum`, histSum(own["vllm_probe_e2e_latency_seconds"]), 1e-6},
		{`gen_ai_client_inference_duration_seconds_bucket{le="+Inf"}`, probes, 0},
		{`gen_ai_client_inference_time_to_first_chunk_seconds_count`, probes, 0},
		{`gen_ai_client_inference_time_to_first_chunk_seconds_sum`, histSum(own["vllm_probe_time_to_first_token_seconds"]), 1e-6},
		{`gen_ai_client_inference_time_per_output_chunk_seconds_count`, float64(histCount(own["vllm_probe_inter_token_latency_seconds"])), 0},
		{`gen_ai_client_inference_usage_input_tokens_total`, counterOf(own["vllm_probe_tokens_total"], "kind", "prompt"), 0},
		{`gen_ai_client_inference_usage_output_tokens_total`, counterOf(own["vllm_probe_tokens_total"], "kind", "output"), 0},
		{`gen_ai_client_inference_usage_reasoning_output_tokens_total`, 2 * probes, 0},
	}
	wantLabels := map[string]string{
		"job": "vllm_prober", "gen_ai_operation_name": "chat", "gen_ai_provider_name": "vllm",
		"gen_ai_request_model": simModel, "server_address": "127.0.0.1", "server_port": simAddr[strings.LastIndex(simAddr, ":")+1:],
		"vllm_prober_target": "sim", "vllm_prober_module": "chat", "team": "e2e",
	}
	// The one sample of each series came with the daemon's last push.
	if err := waitFor(ctx, 15*time.Second, 200*time.Millisecond, want[0].expr, func(ctx context.Context) (bool, error) {
		got, err := queryValues(ctx, promURL, want[0].expr)
		return len(got) > 0, err
	}); err != nil {
		t.Fatalf("%v (the gen_ai names Prometheus holds: %v)", err, genAINames(ctx, promURL))
	}
	for _, w := range want {
		got, err := queryValues(ctx, promURL, w.expr)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Errorf("%s: %d series, want 1: %v", w.expr, len(got), got)
			continue
		}
		if math.Abs(got[0].Value-w.v) > w.tol || w.v == 0 {
			t.Errorf("%s = %v, want %v (the prober's own series)", w.expr, got[0].Value, w.v)
		}
		for k, v := range wantLabels {
			if got[0].Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q (%v)", w.expr, k, got[0].Labels[k], v, got[0])
			}
		}
		t.Logf("%v", got[0])
	}
	if err := sim.exited(); err != nil {
		t.Error(err)
	}
}

// scrapeFamilies reads an exposition in the text format.
func scrapeFamilies(ctx context.Context, u string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", u, err)
	}
	return mfs, nil
}

func histCount(mf *dto.MetricFamily) uint64 {
	if mf == nil || len(mf.Metric) != 1 {
		return 0
	}
	return mf.Metric[0].GetHistogram().GetSampleCount()
}

func histSum(mf *dto.MetricFamily) float64 {
	if mf == nil || len(mf.Metric) != 1 {
		return 0
	}
	return mf.Metric[0].GetHistogram().GetSampleSum()
}

func counterOf(mf *dto.MetricFamily, name, value string) float64 {
	if mf == nil {
		return 0
	}
	for _, m := range mf.Metric {
		for _, l := range m.Label {
			if l.GetName() == name && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// genAINames lists the gen_ai metric names Prometheus holds, for a failure's
// message.
func genAINames(ctx context.Context, promURL string) []string {
	got, err := queryValues(ctx, promURL, `count by (__name__) ({__name__=~"gen_ai.*"})`)
	if err != nil {
		return []string{err.Error()}
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Labels["__name__"])
	}
	return names
}
