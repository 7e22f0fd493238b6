package collector

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// dumpSnapshot renders a snapshot deterministically for golden files.
func dumpSnapshot(s *Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine %q\n", s.Engine)
	fmt.Fprintf(&b, "schema %q\n", s.Schema)
	names := make([]string, 0, len(s.Models))
	for n := range s.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := s.Models[n]
		fmt.Fprintf(&b, "model %q engines=%d\n", n, m.Engines)
		for _, f := range []struct {
			name string
			v    float64
		}{
			{"running", m.Running}, {"waiting", m.Waiting}, {"swapped", m.Swapped},
			{"kv_usage", m.KVUsage}, {"cpu_kv_usage", m.CPUKVUsage},
			{"kv_capacity_tokens", m.KVCapacityTokens}, {"block_size", m.BlockSize},
			{"prompt_tokens", m.PromptTokens}, {"generation_tokens", m.GenerationTokens},
			{"preemptions", m.Preemptions},
			{"prefix_cache_queries", m.PrefixCacheQueries}, {"prefix_cache_hits", m.PrefixCacheHits},
			{"spec_drafts", m.SpecDrafts}, {"spec_draft_tokens", m.SpecDraftTokens}, {"spec_accepted_tokens", m.SpecAcceptedTokens},
			{"sleep_level", m.SleepLevel},
		} {
			fmt.Fprintf(&b, "  %s %g\n", f.name, f.v)
		}
		reasons := make([]string, 0, len(m.RequestSuccess))
		for r := range m.RequestSuccess {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			fmt.Fprintf(&b, "  request_success{finished_reason=%q} %g\n", r, m.RequestSuccess[r])
		}
		hists := []struct {
			name string
			h    *Histogram
		}{{"ttft", m.TTFT}, {"itl", m.ITL}, {"e2e", m.E2E}, {"queue", m.Queue}, {"prefill", m.Prefill},
			{"generation_tokens_per_request", m.GenerationTokensPerRequest}}
		// The KV transfer signals of prefill/decode disaggregation, only
		// where an engine has them.
		if !math.IsNaN(m.KVTransferFailures) {
			fmt.Fprintf(&b, "  kv_transfer_failures %g\n", m.KVTransferFailures)
		}
		// vLLM's newest series, only where a server has them.
		for _, f := range []struct {
			name string
			v    float64
		}{{"prompt_cached", m.PromptCached}, {"flops_per_gpu", m.FLOPsPerGPU}, {"read_bytes_per_gpu", m.ReadBytesPerGPU}, {"write_bytes_per_gpu", m.WriteBytesPerGPU}} {
			if !math.IsNaN(f.v) {
				fmt.Fprintf(&b, "  %s %g\n", f.name, f.v)
			}
		}
		for _, by := range []struct {
			name string
			m    map[string]float64
		}{{"waiting_by_reason", m.WaitingByReason}, {"prompt_by_source", m.PromptBySource}, {"admission_rejections", m.AdmissionRejections}} {
			for _, k := range slices.Sorted(maps.Keys(by.m)) {
				fmt.Fprintf(&b, "  %s{%q} %g\n", by.name, k, by.m[k])
			}
		}
		if m.KVBlockLifetime != nil {
			hists = append(hists, struct {
				name string
				h    *Histogram
			}{"kv_block_lifetime", m.KVBlockLifetime})
		}
		if m.KVTransfer != nil {
			hists = append(hists, struct {
				name string
				h    *Histogram
			}{"kv_transfer", m.KVTransfer})
		}
		for _, h := range hists {
			if h.h == nil {
				fmt.Fprintf(&b, "  %s absent\n", h.name)
				continue
			}
			fmt.Fprintf(&b, "  %s count=%g sum=%g buckets=", h.name, h.h.Count, h.h.Sum)
			for i, bk := range h.h.Buckets {
				if i > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "%g:%g", bk.UpperBound, bk.Count)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func compareGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test -update to rewrite after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// textServer serves body as vLLM's prometheus_client does (text 0.0.4).
func textServer(t *testing.T, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func scrapeFixture(t *testing.T, name string) *Snapshot {
	t.Helper()
	srv := textServer(t, readFixture(t, name))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Scrape(ctx, srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatalf("Scrape: %v", err)
	}
	return s
}

func TestScrapeGoldenEras(t *testing.T) {
	for _, era := range []string{"v1", "v010", "legacy", "multimodel"} {
		t.Run(era, func(t *testing.T) {
			s := scrapeFixture(t, era+".prom")
			compareGolden(t, era+".golden", dumpSnapshot(s))
		})
	}
}

// The golden files pin everything; these checks say what matters and why, so
// that a wrong -update cannot slip through.
func TestNormaliseV1(t *testing.T) {
	s := scrapeFixture(t, "v1.prom")
	if s.Schema != SchemaV1 {
		t.Errorf("schema = %q, want %q (a router's deprecated gpu_prefix_cache_hits_total{server} must not count)", s.Schema, SchemaV1)
	}
	if len(s.Models) != 1 {
		t.Fatalf("models = %v, want only the one with model_name (router series ignored)", keys(s.Models))
	}
	m := s.Models["meta-llama/Llama-3.1-8B-Instruct"]
	checks := []struct {
		name      string
		got, want float64
	}{
		{"engines", float64(m.Engines), 2},
		{"running (3+4, router's 99 ignored)", m.Running, 7},
		{"waiting", m.Waiting, 2},
		{"kv usage (max of 0.5, 0.75)", m.KVUsage, 0.75},
		{"capacity (2 engines × kv_cache_size_tokens 12800)", m.KVCapacityTokens, 25600},
		{"block size", m.BlockSize, 16},
		{"generation tokens (5000+7000, _created ignored)", m.GenerationTokens, 12000},
		{"prompt tokens", m.PromptTokens, 3000},
		{"preemptions", m.Preemptions, 3},
		{"prefix hits (router's 777 ignored)", m.PrefixCacheHits, 300},
		{"success stop", m.RequestSuccess["stop"], 30},
		{"ttft count", m.TTFT.Count, 31},
		{"ttft sum", m.TTFT.Sum, 3.5},
		{"itl count (inter_token_latency_seconds)", m.ITL.Count, 2000},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
		}
	}
	if !math.IsNaN(m.Swapped) || !math.IsNaN(m.CPUKVUsage) {
		t.Errorf("swapped/cpu usage = %g/%g, want NaN on a V1 server", m.Swapped, m.CPUKVUsage)
	}
	// Python-float le values: "1.0" and "2560.0" parse as bounds 1 and 2560, +Inf last.
	bs := m.TTFT.Buckets
	if len(bs) != 23 || bs[11].UpperBound != 1 || bs[21].UpperBound != 2560 || !math.IsInf(bs[22].UpperBound, 1) {
		t.Errorf("ttft bounds = %v", bs)
	}
}

func TestNormaliseTransition(t *testing.T) {
	s := scrapeFixture(t, "v010.prom")
	if s.Schema != SchemaTransition {
		t.Errorf("schema = %q, want %q", s.Schema, SchemaTransition)
	}
	m := s.Models["zai-org/GLM-4.5"]
	if m == nil {
		t.Fatalf("models = %v", keys(s.Models))
	}
	if m.KVUsage != 0.4 {
		t.Errorf("kv usage = %g, want 0.4 from kv_cache_usage_perc, not the deprecated gpu_cache_usage_perc 0.9", m.KVUsage)
	}
	if m.PrefixCacheQueries != 1000 {
		t.Errorf("prefix queries = %g, want 1000 (new name only, not doubled by the deprecated one)", m.PrefixCacheQueries)
	}
	if m.ITL == nil || m.ITL.Count != 2000 {
		t.Errorf("itl = %+v, want time_per_output_token_seconds with count 2000", m.ITL)
	}
	if m.KVCapacityTokens != 64000 {
		t.Errorf("capacity = %g, want 2 × 2000 blocks × 16", m.KVCapacityTokens)
	}
}

func TestNormaliseLegacy(t *testing.T) {
	s := scrapeFixture(t, "legacy.prom")
	if s.Schema != SchemaLegacy {
		t.Errorf("schema = %q, want %q", s.Schema, SchemaLegacy)
	}
	m := s.Models["facebook/opt-125m"]
	if m == nil {
		t.Fatalf("models = %v", keys(s.Models))
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"engines (no engine label)", float64(m.Engines), 1},
		{"running", m.Running, 2},
		{"swapped (router's 98 ignored)", m.Swapped, 1},
		{"waiting", m.Waiting, 3},
		{"kv usage from gpu_cache_usage_perc", m.KVUsage, 0.42},
		{"cpu kv usage", m.CPUKVUsage, 0.05},
		{"capacity 81767 blocks × 16", m.KVCapacityTokens, 1308272},
		{"itl from time_per_output_token_seconds", m.ITL.Count, 640},
		{"ttft bound 1.0", m.TTFT.Buckets[11].UpperBound, 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
		}
	}
}

func TestNormaliseModelsApart(t *testing.T) {
	s := scrapeFixture(t, "multimodel.prom")
	a, b := s.Models["model-a"], s.Models["model-b"]
	if a == nil || b == nil || len(s.Models) != 2 {
		t.Fatalf("models = %v, want model-a and model-b", keys(s.Models))
	}
	if a.Running != 1 || b.Running != 5 || a.KVUsage != 0.1 || b.KVUsage != 0.6 || a.GenerationTokens != 10 || b.GenerationTokens != 500 {
		t.Errorf("models mixed up: a=%+v b=%+v", a, b)
	}
	// cache_config_info has no model_name: it belongs to every model of the
	// server; kv_cache_size_tokens wins over num_gpu_blocks × block_size (hybrid model).
	if a.KVCapacityTokens != 619479 || b.KVCapacityTokens != 619479 {
		t.Errorf("capacity = %g/%g, want 619479", a.KVCapacityTokens, b.KVCapacityTokens)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// parseText reads a text fixture into families with the expfmt parser.
func parseText(t *testing.T, data []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestScrapeFormats serves each fixture re-encoded by expfmt's encoders in
// the format the server negotiates, and expects the same snapshot as from the
// text the fixture is written in.
func TestScrapeFormats(t *testing.T) {
	formats := []struct {
		name string
		// offer picks the server's format from the request, failing the test
		// when the scraper's Accept header does not allow it.
		offer   func(r *http.Request) (expfmt.Format, error)
		wantCT  string
		openMet bool
	}{
		{
			name: "protobuf",
			offer: func(r *http.Request) (expfmt.Format, error) {
				// A Go server (client_golang) negotiates like this: protobuf must win.
				return expfmt.NegotiateAccept(r.Header, expfmt.DefaultOpenMetricsAcceptedFormats()...), nil
			},
			wantCT: "application/vnd.google.protobuf",
		},
		{
			name: "openmetrics",
			offer: func(r *http.Request) (expfmt.Format, error) {
				// prometheus_client (vLLM) knows OpenMetrics and text only.
				if !strings.Contains(r.Header.Get("Accept"), "application/openmetrics-text;version=1.0.0") {
					return "", fmt.Errorf("accept %q does not offer OpenMetrics 1.0.0", r.Header.Get("Accept"))
				}
				return expfmt.FmtOpenMetrics_1_0_0, nil
			},
			wantCT: "application/openmetrics-text",
		},
		{
			name: "text",
			offer: func(r *http.Request) (expfmt.Format, error) {
				if !strings.Contains(r.Header.Get("Accept"), "text/plain;version=0.0.4") {
					return "", fmt.Errorf("accept %q does not offer text 0.0.4", r.Header.Get("Accept"))
				}
				return expfmt.FmtText, nil
			},
			wantCT: "text/plain",
		},
	}
	for _, era := range []string{"v1", "v010", "legacy"} {
		data := readFixture(t, era+".prom")
		want := dumpSnapshot(scrapeFixture(t, era+".prom"))
		fams := parseText(t, data)
		for _, f := range formats {
			t.Run(era+"/"+f.name, func(t *testing.T) {
				var servedCT string
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					format, err := f.offer(r)
					if err != nil {
						http.Error(w, err.Error(), http.StatusNotAcceptable)
						return
					}
					w.Header().Set("Content-Type", string(format))
					enc := expfmt.NewEncoder(w, format)
					for _, name := range keys(fams) {
						if err := enc.Encode(fams[name]); err != nil {
							t.Errorf("encode %s: %v", name, err)
						}
					}
					if c, ok := enc.(expfmt.Closer); ok {
						_ = c.Close()
					}
					servedCT = string(format)
				}))
				defer srv.Close()
				s, err := Scrape(context.Background(), srv.Client(), srv.URL+"/metrics")
				if err != nil {
					t.Fatalf("Scrape: %v", err)
				}
				if !strings.HasPrefix(servedCT, f.wantCT) {
					t.Errorf("served %q, want %s", servedCT, f.wantCT)
				}
				if got := dumpSnapshot(s); got != want {
					t.Errorf("snapshot via %s differs from text:\n%s\nwant\n%s", f.name, got, want)
				}
			})
		}
	}
}

// prometheus_client's own OpenMetrics output (pythonOpenMetrics): counter
// families named without _total, _created samples inside the family, # EOF.
func TestScrapePythonOpenMetrics(t *testing.T) {
	const body = pythonOpenMetrics
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	s, err := Scrape(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m := s.Models["m"]
	if m == nil || m.GenerationTokens != 42 || m.KVUsage != 0.25 || m.TTFT == nil || m.TTFT.Count != 10 || m.TTFT.Sum != 0.41 {
		t.Fatalf("snapshot = %s", dumpSnapshot(s))
	}
}

func TestScrapeErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/garbage":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte("vllm:num_requests_running{model_name=\"m\" 1\n"))
		case "/bare-name":
			// A bare name inside the braces: Prometheus' parsers panicked
			// on it before prometheus/prometheus#18225 was fixed.
			w.Header().Set("Content-Type", r.URL.Query().Get("type"))
			_, _ = w.Write([]byte("{A} 0\n"))
		}
	}))
	defer srv.Close()
	_, err := Scrape(context.Background(), srv.Client(), srv.URL+"/status")
	if err == nil || err.Error() != "scraping metrics: server returned HTTP status 500 Internal Server Error" {
		t.Errorf("err = %v", err)
	}
	_, err = Scrape(context.Background(), srv.Client(), srv.URL+"/garbage")
	if err == nil || !strings.HasPrefix(err.Error(), "decoding metrics: line 1: ") {
		t.Errorf("err = %v", err)
	}
	for _, typ := range []string{"text/plain; version=0.0.4", "application/openmetrics-text; version=1.0.0"} {
		_, err = Scrape(context.Background(), srv.Client(), srv.URL+"/bare-name?type="+url.QueryEscape(typ))
		if err == nil || !strings.HasPrefix(err.Error(), "decoding metrics: line 1: ") {
			t.Errorf("%s: err = %v", typ, err)
		}
	}
}

// TestNormaliseEveryFamilyAlone: a target may send any one family an engine
// profile reads without the others (a vLLM server exposing only its
// speculative-decoding counters). Forced to that engine, as a target's engine
// key does (detection needs more), each family alone names its model and
// reads without a panic.
func TestNormaliseEveryFamilyAlone(t *testing.T) {
	for _, engine := range Engines() {
		p, _ := ProfileOf(engine)
		labels := `{engine="0"}` // an engine that names no model
		switch {
		case p.VLLMPrefixes != nil: // read by vLLM's rules
			labels = `{model_name="m",engine="0"}`
		case len(p.ModelLabels) > 0:
			labels = `{` + p.ModelLabels[0] + `="m",engine="0"}`
		}
		for _, name := range p.Families() {
			t.Run(engine+"/"+name, func(t *testing.T) {
				fs, err := decodeFamilies(strings.NewReader(name+labels+" 1\n"), expfmt.FmtText, true)
				if err != nil {
					t.Fatal(err)
				}
				s := normalise(fs, time.Unix(0, 0), engine, nil)
				if s.Engine != engine {
					t.Fatalf("engine = %q, want the forced %q", s.Engine, engine)
				}
				if len(s.Models) != 1 {
					t.Errorf("models = %v, want the one %s names", keys(s.Models), name)
				}
			})
		}
	}
}
