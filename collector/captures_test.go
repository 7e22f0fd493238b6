package collector

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// toPythonOpenMetrics rewrites a text 0.0.4 exposition written by
// prometheus_client into the OpenMetrics 1.0.0 that the same library writes
// when asked for it (prometheus_client/openmetrics/exposition.py): counter
// families are named without _total, each _created sample sits inside its
// family instead of in a gauge family of its own, and the body ends with
// "# EOF". Sample lines and values are kept byte for byte.
func toPythonOpenMetrics(text []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimRight(string(text), "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "#" && (f[1] == "HELP" || f[1] == "TYPE") {
			if strings.HasSuffix(f[2], "_created") {
				continue // its samples join the family written just before
			}
			if f[1] == "TYPE" && len(f) == 4 && f[3] == "counter" {
				line = "# TYPE " + strings.TrimSuffix(f[2], "_total") + " counter"
			} else if f[1] == "HELP" {
				if base, ok := strings.CutSuffix(f[2], "_total"); ok {
					line = strings.Replace(line, f[2], base, 1)
				}
			}
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteString("# EOF\n")
	return b.Bytes()
}

// captureServer serves body the way vLLM's prometheus_client does: OpenMetrics
// when the Accept header names it, else text 0.0.4. It fails the request
// when the scraper did not prefer OpenMetrics over text.
func captureServer(t *testing.T, text []byte, openMetrics bool) *httptest.Server {
	t.Helper()
	om := toPythonOpenMetrics(text)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept := r.Header.Get("Accept")
		iOM, iText := strings.Index(accept, "application/openmetrics-text"), strings.Index(accept, "text/plain")
		if iOM < 0 || iText < 0 || iOM > iText {
			http.Error(w, "OpenMetrics must be asked for before text: "+accept, http.StatusNotAcceptable)
			return
		}
		if openMetrics {
			w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
			_, _ = w.Write(om)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(text)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRealCaptures reads two real vLLM /metrics captures (sources in
// testdata/README.md), served as text 0.0.4 and as OpenMetrics, and checks
// every value the collector reads against figures computed by hand from the
// raw text (quoted next to each).
func TestRealCaptures(t *testing.T) {
	nan := math.NaN()
	type hist struct{ count, sum float64 }
	type want struct {
		model                                    string
		schema                                   string
		engines                                  int
		running, waiting, swapped, kv, cpuKV     float64
		capacity, blockSize                      float64
		prompt, gen, preempt, prefixQ, prefixHit float64
		success                                  map[string]float64
		ttft, itl, e2e, queue                    *hist // nil: absent
		ttftBuckets                              map[float64]float64
	}
	cases := []struct {
		file string
		want want
	}{
		{"real-0.4.3.prom", want{
			model:  "facebook/opt-125m",
			schema: SchemaLegacy, // vllm:num_requests_swapped, vllm:cpu_cache_usage_perc
			// No engine label: one engine.
			engines: 1,
			// vllm:num_requests_running{model_name="facebook/opt-125m"} 0.0, _waiting 0.0, _swapped 0.0
			running: 0, waiting: 0, swapped: 0,
			// vllm:gpu_cache_usage_perc 0.0, vllm:cpu_cache_usage_perc 0.0
			kv: 0, cpuKV: 0,
			// cache_config_info num_gpu_blocks="7281" × block_size="16" = 116496
			capacity: 116496, blockSize: 16,
			// prompt_tokens_total 5.0, generation_tokens_total 7.0, num_preemptions_total 0.0
			prompt: 5, gen: 7, preempt: 0,
			// no prefix-cache counters in 0.4.3
			prefixQ: nan, prefixHit: nan,
			// request_success_total{finished_reason="length"} 1.0
			success: map[string]float64{"length": 1},
			// time_to_first_token_seconds_count 1.0, _sum 0.31326723098754883
			ttft: &hist{1, 0.31326723098754883},
			// time_per_output_token_seconds_count 6.0, _sum 0.19016313552856445
			itl: &hist{6, 0.19016313552856445},
			// e2e_request_latency_seconds_count 1.0, _sum 0.5034303665161133
			e2e: &hist{1, 0.5034303665161133},
			// no vllm:request_queue_time_seconds in 0.4.3
			queue: nil,
			// le="0.25" 0.0, le="0.5" 1.0: the one request's 0.313 s
			ttftBuckets: map[float64]float64{0.25: 0, 0.5: 1, math.Inf(1): 1},
		}},
		{"real-0.11.prom", want{
			model: "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
			// vllm:kv_cache_usage_perc and prefix_cache_*_total; the deprecated
			// time_per_output_token_seconds does not make it a transition server.
			schema:  SchemaV1,
			engines: 1, // engine="0"
			// num_requests_running 0.0, num_requests_waiting 0.0, kv_cache_usage_perc 0.0
			running: 0, waiting: 0, swapped: nan, kv: 0, cpuKV: nan,
			// cache_config_info num_gpu_blocks="6971" × block_size="16" = 111536 (no kv_cache_size_tokens)
			capacity: 111536, blockSize: 16,
			prompt: 0, gen: 0, preempt: 0, prefixQ: 0, prefixHit: 0,
			// finished_reason stop, length, abort: all 0.0
			success: map[string]float64{"stop": 0, "length": 0, "abort": 0},
			ttft:    &hist{0, 0},
			// inter_token_latency_seconds is read, not the deprecated name
			itl:         &hist{0, 0},
			e2e:         &hist{0, 0},
			queue:       &hist{0, 0},
			ttftBuckets: map[float64]float64{0.001: 0, 2560: 0, math.Inf(1): 0},
		}},
	}
	same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
	for _, tc := range cases {
		raw := readFixture(t, tc.file)
		for _, om := range []bool{false, true} {
			name := tc.file + "/text-0.0.4"
			if om {
				name = tc.file + "/openmetrics"
			}
			t.Run(name, func(t *testing.T) {
				srv := captureServer(t, raw, om)
				s, err := Scrape(context.Background(), srv.Client(), srv.URL+"/metrics")
				if err != nil {
					t.Fatalf("Scrape: %v", err)
				}
				w := tc.want
				if s.Schema != w.schema {
					t.Errorf("schema = %q, want %q", s.Schema, w.schema)
				}
				if len(s.Models) != 1 || s.Models[w.model] == nil {
					t.Fatalf("models = %v, want only %q", keys(s.Models), w.model)
				}
				m := s.Models[w.model]
				for _, c := range []struct {
					name      string
					got, want float64
				}{
					{"engines", float64(m.Engines), float64(w.engines)},
					{"running", m.Running, w.running}, {"waiting", m.Waiting, w.waiting},
					{"swapped", m.Swapped, w.swapped}, {"kv usage", m.KVUsage, w.kv},
					{"cpu kv usage", m.CPUKVUsage, w.cpuKV},
					{"kv capacity tokens", m.KVCapacityTokens, w.capacity}, {"block size", m.BlockSize, w.blockSize},
					{"prompt tokens", m.PromptTokens, w.prompt}, {"generation tokens", m.GenerationTokens, w.gen},
					{"preemptions", m.Preemptions, w.preempt},
					{"prefix cache queries", m.PrefixCacheQueries, w.prefixQ}, {"prefix cache hits", m.PrefixCacheHits, w.prefixHit},
				} {
					if !same(c.got, c.want) {
						t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
					}
				}
				if fmt.Sprint(m.RequestSuccess) != fmt.Sprint(w.success) {
					t.Errorf("finish reasons = %v, want %v", m.RequestSuccess, w.success)
				}
				for _, h := range []struct {
					name string
					got  *Histogram
					want *hist
				}{{"ttft", m.TTFT, w.ttft}, {"itl", m.ITL, w.itl}, {"e2e", m.E2E, w.e2e}, {"queue", m.Queue, w.queue}} {
					switch {
					case h.want == nil && h.got != nil:
						t.Errorf("%s present, want absent", h.name)
					case h.want != nil && h.got == nil:
						t.Errorf("%s absent", h.name)
					case h.want != nil && (h.got.Count != h.want.count || h.got.Sum != h.want.sum):
						t.Errorf("%s count/sum = %g/%g, want %g/%g", h.name, h.got.Count, h.got.Sum, h.want.count, h.want.sum)
					}
				}
				found := 0
				for _, b := range m.TTFT.Buckets {
					if want, ok := w.ttftBuckets[b.UpperBound]; ok {
						found++
						if b.Count != want {
							t.Errorf("ttft bucket le=%g = %g, want %g", b.UpperBound, b.Count, want)
						}
					}
				}
				if found != len(w.ttftBuckets) {
					t.Errorf("ttft buckets %v lack some of %v", m.TTFT.Buckets, w.ttftBuckets)
				}
			})
		}
	}
}

// TestSchemaDetection labels one capture, or a fixture of the same shape,
// per metric schema vLLM went through (docs/metrics.md), from the families
// that define each schema.
func TestSchemaDetection(t *testing.T) {
	for _, tc := range []struct {
		file, what, want string
	}{
		{"real-0.4.3.prom", "vLLM 0.4.3, V0 engine (real capture)", SchemaLegacy},
		{"legacy.prom", "V0 engine, 0.8 era", SchemaLegacy},
		{"transition-0.9-multiprocess.prom", "V1 engine 0.9, multiprocess mode: old names only, no V0-only family", SchemaTransition},
		{"v010.prom", "V1 engine 0.10: old and new names side by side", SchemaTransition},
		{"real-0.11.prom", "vLLM 0.11 (real capture): new names plus the deprecated time_per_output_token_seconds", SchemaV1},
		{"v1.prom", "current V1 names", SchemaV1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s := scrapeFixture(t, tc.file)
			if s.Schema != tc.want {
				t.Errorf("%s: schema = %q, want %q", tc.what, s.Schema, tc.want)
			}
		})
	}
	// The 0.9 multiprocess fixture reads like any other transition server.
	m := scrapeFixture(t, "transition-0.9-multiprocess.prom").Models["Qwen/Qwen2.5-7B-Instruct"]
	if m == nil || m.Engines != 2 || m.Running != 3 || m.Waiting != 4 || m.KVUsage != 0.5 || m.PrefixCacheQueries != 1000 ||
		m.KVCapacityTokens != 2*27000*16 || m.ITL == nil || m.ITL.Count != 3982 || m.TTFT.Count != 18 || m.RequestSuccess["stop"] != 15 {
		t.Errorf("0.9 multiprocess fixture misread: %+v", m)
	}
}

// TestFinishReasonLabel: a server labelling vllm:request_success_total with
// finish_reason instead of vLLM's finished_reason keeps its reasons apart.
func TestFinishReasonLabel(t *testing.T) {
	m := scrapeFixture(t, "finish-reason.prom").Models["m"]
	want := map[string]float64{"stop": 12, "length": 3, "abort": 1}
	if m == nil || fmt.Sprint(m.RequestSuccess) != fmt.Sprint(want) {
		t.Fatalf("finish reasons = %v, want %v", m.RequestSuccess, want)
	}
}
