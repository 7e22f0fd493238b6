package daemon

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/vllm-prober/vllm_prober/config"
)

// Series budgets of one (target, module) pair with the default configuration
// (docs/metrics.md, "Series budget"): what Prometheus stores from one
// healthy pair, the per-target series (health checks, the scraped server's)
// apart. A native histogram is one series; a classic one is a series per
// bucket, +Inf included, plus _sum and _count.
var seriesBudget = map[string]int{
	config.HistogramsClassic: 60,
	config.HistogramsNative:  20,
}

// TestSeriesBudget runs the daemon with the default configuration and one
// completions module against vllm_sim in each histogram mode, and counts the
// series of the pair in its protobuf exposition, as Prometheus stores them
// (native histograms as one series). It fails when a family is added without
// room in the budget.
func TestSeriesBudget(t *testing.T) {
	for _, mode := range []string{config.HistogramsClassic, config.HistogramsNative} {
		t.Run(mode, func(t *testing.T) {
			f := &fixture{t: t, sim: startSim(t, simKey)}
			f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
			writeConfig(t, f.path, fmt.Sprintf(`
global:
  probe_interval: 300ms
  scrape_interval: 300ms
  histograms: %s
modules:
  short:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
    max_tokens: 8
targets:
  - name: sim
    url: %s
    http_client_config:
      authorization:
        credentials: %s
`, mode, f.sim.URL, simKey))
			f.start(Options{ConfigFile: f.path, HistoryLimit: 5})
			var pair, perTarget map[string]int
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				var err error
				pair, perTarget, err = pairSeries(f.srv.URL+"/metrics", "sim", "short", mode)
				if err != nil {
					t.Fatal(err)
				}
				if f.historyLen("sim", "short") >= 2 && perTarget["vllm_server_up"] > 0 && perTarget["vllm_probe_server_ttft_gap_seconds"] > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no two probes and server statistics after 30s: history %d, series of the pair:\n%sof the target:\n%s",
						f.historyLen("sim", "short"), breakdown(pair), breakdown(perTarget))
				}
			}
			n := 0
			for _, v := range pair {
				n += v
			}
			t.Logf("%s: %d series of the pair, %d per-target series", mode, n, sum(perTarget))
			if n > seriesBudget[mode] {
				t.Errorf("%s: the pair (sim, short) exposes %d series, over its budget of %d:\n%s",
					mode, n, seriesBudget[mode], breakdown(pair))
			}
			if mode == config.HistogramsNative {
				// No classic bucket in the text exposition either: a
				// histogram there is _sum, _count and the +Inf bucket.
				_, body := f.get("/metrics")
				for _, l := range strings.Split(body, "\n") {
					if strings.HasPrefix(l, "vllm_probe_") && strings.Contains(l, "_bucket{") && !strings.Contains(l, `le="+Inf"`) {
						t.Errorf("native: the text exposition has a classic bucket: %s", l)
						break
					}
				}
			}
			if n < 10 {
				t.Errorf("%s: only %d series counted; the count is broken:\n%s", mode, n, breakdown(pair))
			}
		})
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func breakdown(m map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "  %3d %s\n", m[k], k)
	}
	return b.String()
}

// pairSeries fetches url in protobuf and counts, by family, the series of
// (target, module) and those of the target without a module.
func pairSeries(url, target, module, mode string) (pair, perTarget map[string]int, err error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "protobuf") {
		return nil, nil, fmt.Errorf("/metrics answered %q to a protobuf Accept", ct)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.NewFormat(expfmt.TypeProtoDelim))
	pair, perTarget = map[string]int{}, map[string]int{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("decoding /metrics: %w", err)
		}
		for _, m := range mf.GetMetric() {
			var t, mod, other bool
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "target":
					t = l.GetValue() == target
				case "module":
					mod, other = l.GetValue() == module, l.GetValue() != module
				}
			}
			if !t || other {
				continue
			}
			n := storedSeries(&mf, m, mode)
			if mod {
				pair[mf.GetName()] += n
			} else {
				perTarget[mf.GetName()] += n
			}
		}
	}
	return pair, perTarget, nil
}

// storedSeries is how many series Prometheus stores for m: a histogram with
// native buckets is one series when Prometheus scrapes native histograms
// (mode native); classic buckets are a series each, +Inf, _sum and _count.
func storedSeries(mf *dto.MetricFamily, m *dto.Metric, mode string) int {
	switch mf.GetType() {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		h := m.GetHistogram()
		native := h.Schema != nil
		classic := 0
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() < 1e308 {
				classic++
			}
		}
		if native && mode == config.HistogramsNative {
			return 1
		}
		return classic + 3
	case dto.MetricType_SUMMARY:
		return len(m.GetSummary().GetQuantile()) + 2
	}
	return 1
}
