package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exemplar is one exemplar of /api/v1/query_exemplars.
type exemplar struct {
	series   map[string]string
	recordID string
	value    float64
}

// queryExemplars returns the exemplars of query over the last 10 minutes.
func queryExemplars(ctx context.Context, promURL, query string) ([]exemplar, error) {
	now := time.Now()
	u := promURL + "/api/v1/query_exemplars?" + url.Values{
		"query": {query},
		"start": {strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)},
		"end":   {strconv.FormatInt(now.Unix(), 10)},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query_exemplars: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   []struct {
			SeriesLabels map[string]string `json:"seriesLabels"`
			Exemplars    []struct {
				Labels map[string]string `json:"labels"`
				Value  string            `json:"value"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query_exemplars: decoding: %w", err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query_exemplars: %s", body.Error)
	}
	var out []exemplar
	for _, d := range body.Data {
		for _, e := range d.Exemplars {
			v, err := strconv.ParseFloat(e.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("query_exemplars: value %q: %w", e.Value, err)
			}
			out = append(out, exemplar{series: d.SeriesLabels, recordID: e.Labels["record_id"], value: v})
		}
	}
	return out, nil
}

// get returns the status and body of GET u.
func get(ctx context.Context, u string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestExemplarsOpenTheRecord scrapes vllm_prober (probing vllm_sim) with a
// Prometheus that stores exemplars (Prometheus 3.x under `make e2e`, else
// Debian's 2.x), reads the probes' TTFT, TPOT and E2E exemplars back through
// /api/v1/query_exemplars, and opens each one's record_id on the prober's
// /probe/record: 200, the page of that very probe. Once the history has
// moved past it (--history.limit 2), the same link answers a 404 that says
// the record aged out.
func TestExemplarsOpenTheRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs vllm_sim, vllm_prober and Prometheus")
	}
	ctx := t.Context()
	dir := t.TempDir()
	promBin := prometheusBinary(t)
	proberBin, simBin := binaries(t)

	simAddr := freeAddr(t)
	simURL := "http://" + simAddr
	sim := startProcess(t, "vllm_sim", simBin, "--web.listen-address="+simAddr, "--model="+simModel, "--ttft=30ms", "--itl=5ms")
	if err := waitReady(ctx, sim, simURL+"/health", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	proberCfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(proberCfg, []byte(fmt.Sprintf(`global:
  probe_interval: 1s
  scrape_interval: 1s
  scrape_timeout: 900ms
  rate_window: 3s
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
`, probePrompt, simURL, simModel)), 0o644); err != nil {
		t.Fatal(err)
	}
	proberAddr := freeAddr(t)
	proberURL := "http://" + proberAddr
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+proberCfg, "--web.listen-address="+proberAddr, "--history.limit=2")
	if err := waitReady(ctx, prober, proberURL+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: vllm_prober
    static_configs:
      - targets: [%q]
`, proberAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	promURL := "http://" + promAddr
	prom := startProcess(t, "prometheus", promBin, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--enable-feature=exemplar-storage")
	if err := waitReady(ctx, prom, promURL+"/-/ready", 60*time.Second); err != nil {
		t.Fatal(err)
	}

	first := map[string]exemplar{}
	for _, name := range []string{"vllm_probe_time_to_first_token_seconds", "vllm_probe_time_per_output_token_seconds", "vllm_probe_e2e_latency_seconds"} {
		var exs []exemplar
		if err := waitFor(ctx, 60*time.Second, 500*time.Millisecond, "exemplars of "+name, func(ctx context.Context) (bool, error) {
			var err error
			exs, err = queryExemplars(ctx, promURL, name+"_bucket")
			return len(exs) > 0, err
		}); err != nil {
			t.Fatal(err)
		}
		e := exs[0]
		if e.series["target"] != "sim" || e.series["module"] != "completion" {
			t.Errorf("%s: exemplar on series %v, want target sim, module completion", name, e.series)
		}
		if e.recordID == "" || len(e.recordID)+len("record_id") > 128 {
			t.Fatalf("%s: exemplar record_id %q: empty or over OpenMetrics' 128 characters", name, e.recordID)
		}
		first[name] = e
	}
	t.Logf("exemplars: %v", first)

	e := first["vllm_probe_time_to_first_token_seconds"]
	n := e.recordID[strings.LastIndexByte(e.recordID, '-')+1:]
	recordURL := proberURL + "/probe/record?id=" + url.QueryEscape(e.recordID)
	code, body, err := get(ctx, recordURL)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case code == http.StatusNotFound && strings.Contains(body, "aged out"):
		// The exemplar Prometheus kept first can be older than the two kept
		// records; take the newest instead.
		exs, err := queryExemplars(ctx, promURL, "vllm_probe_time_to_first_token_seconds_bucket")
		if err != nil {
			t.Fatal(err)
		}
		e = exs[len(exs)-1]
		n = e.recordID[strings.LastIndexByte(e.recordID, '-')+1:]
		recordURL = proberURL + "/probe/record?id=" + url.QueryEscape(e.recordID)
		if code, body, err = get(ctx, recordURL); err != nil {
			t.Fatal(err)
		}
		if code != http.StatusOK {
			t.Fatalf("GET %s (the newest exemplar) = %d:\n%s", recordURL, code, body)
		}
	case code != http.StatusOK:
		t.Fatalf("GET %s = %d:\n%s", recordURL, code, body)
	}
	// The page is the exemplar's probe: its number, and the TTFT the
	// exemplar carries (the page prints milliseconds to the microsecond).
	for _, want := range []string{`Stored record ` + n + ` of target "sim" module "completion"`, "Result: success",
		fmt.Sprintf("TTFT: %.3fms", e.value*1e3)} {
		if !strings.Contains(body, want) {
			t.Errorf("the record page of exemplar %s lacks %q:\n%s", e.recordID, want, body)
		}
	}
	t.Logf("GET %s = 200:\n%s", recordURL, firstLines(body, 12))

	// Two probes later the record is no longer kept: the same link says so.
	if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "record "+e.recordID+" to age out", func(ctx context.Context) (bool, error) {
		code, body, err = get(ctx, recordURL)
		return code == http.StatusNotFound, err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "aged out") || !strings.Contains(body, "--history.limit") {
		t.Errorf("GET %s after it aged out = 404 without saying why:\n%s", recordURL, body)
	}
	t.Logf("later: 404 %s", strings.TrimSpace(body))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
