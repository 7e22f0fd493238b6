package simulator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is fast and deterministic: short delays, no jitter.
func testConfig() Config {
	c := DefaultConfig()
	c.Model = "m"
	c.MaxModelLen = 1024
	c.KVCacheTokens = 16384
	c.TTFT = 5 * time.Millisecond
	c.ITL = 2 * time.Millisecond
	c.BatchSlowdown = 0
	return c
}

func startSim(t testing.TB, mutate func(*Config)) (*Simulator, *httptest.Server) {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	sim, err := New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		ts.Close()
	})
	return sim, ts
}

func post(t testing.TB, url, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// sseResult is a parsed SSE stream: the JSON payloads in order and whether
// it ended with data: [DONE].
type sseResult struct {
	events []string
	done   bool
}

func readSSE(t testing.TB, r io.Reader) sseResult {
	t.Helper()
	var res sseResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE line without data prefix: %q", line)
		}
		if res.done {
			t.Fatalf("event after [DONE]: %q", data)
		}
		if data == "[DONE]" {
			res.done = true
			continue
		}
		res.events = append(res.events, data)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading SSE: %v", err)
	}
	return res
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int     `json:"index"`
		Text  *string `json:"text"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Error *errorInfo `json:"error"`
}

func decodeChunk(t testing.TB, s string) chunk {
	t.Helper()
	var c chunk
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decoding chunk %q: %v", s, err)
	}
	return c
}

// scrape parses /metrics with the Prometheus text parser.
func scrape(t testing.TB, base string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: status %d", code)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return mfs, body
}

// value returns the value of the single sample of family name matching
// labels (a subset match), failing when there is not exactly one.
func value(t testing.TB, mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("metric family %s missing", name)
	}
	var found []float64
	for _, m := range mf.GetMetric() {
		if !labelsMatch(m, labels) {
			continue
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			found = append(found, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			found = append(found, m.GetGauge().GetValue())
		case dto.MetricType_HISTOGRAM:
			found = append(found, float64(m.GetHistogram().GetSampleCount()))
		default:
			found = append(found, m.GetUntyped().GetValue())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: want 1 sample, found %d", name, labels, len(found))
	}
	return found[0]
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, lp := range m.GetLabel() {
		have[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func histSum(t testing.TB, mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	for _, m := range mfs[name].GetMetric() {
		if labelsMatch(m, labels) {
			return m.GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("histogram %s%v missing", name, labels)
	return 0
}

// streamCompletion runs one streaming completion and returns its events.
func streamCompletion(t testing.TB, base string, body string, hdr ...string) sseResult {
	t.Helper()
	resp := post(t, base+"/v1/completions", body, hdr...)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return readSSE(t, resp.Body)
}

// waitMetric polls /metrics until cond holds or the timeout expires.
func waitMetric(t testing.TB, base string, timeout time.Duration, cond func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		mfs, _ := scrape(t, base)
		if cond(mfs) {
			return mfs
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition on /metrics not met within %s", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// quantile is histogram_quantile over a parsed histogram.
func quantile(h *dto.Histogram, q float64) float64 {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0
	}
	rank := q * total
	prevCount, prevBound := 0.0, 0.0
	for _, bk := range h.GetBucket() {
		c := float64(bk.GetCumulativeCount())
		if c >= rank {
			if bk.GetUpperBound() > 1e300 {
				return prevBound
			}
			return prevBound + (bk.GetUpperBound()-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevCount, prevBound = c, bk.GetUpperBound()
	}
	return prevBound
}
