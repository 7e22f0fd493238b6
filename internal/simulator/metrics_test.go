package simulator

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestPyFloat(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.0"}, {1, "1.0"}, {0.001, "0.001"}, {0.3, "0.3"}, {2560, "2560.0"}, {7680, "7680.0"},
		{16384, "16384.0"}, {0.0001, "0.0001"}, {0.00001, "1e-05"}, {1.5e-7, "1.5e-07"},
		{123456, "123456.0"}, {1234567, "1.234567e+06"}, {12345678, "1.2345678e+07"}, {10000000, "1e+07"},
		{1788200000, "1.7882e+09"}, {1753795326.9352946, "1.7537953269352946e+09"},
		{math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}, {-2.5, "-2.5"}, {1e16, "1e+16"}, {12.5, "12.5"},
	} {
		if got := pyGoString(tc.in); got != tc.want {
			t.Errorf("pyGoString(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

type famSpec struct {
	typ    dto.MetricType
	labels []string // label names besides le
}

var (
	tGauge   = dto.MetricType_GAUGE
	tCounter = dto.MetricType_COUNTER
	tHist    = dto.MetricType_HISTOGRAM
)

// Expected surfaces, taken from vLLM's vllm/v1/metrics/loggers.py and docs/usage/metrics.md
// (current names, cache_config_info labels, renamed and removed names).
func expectedFamilies(names string) map[string]famSpec {
	el := []string{"engine", "model_name"}
	if names == MetricsLegacy {
		el = []string{"model_name"}
	}
	plus := func(extra ...string) []string {
		out := append(append([]string(nil), el...), extra...)
		sort.Strings(out)
		return out
	}
	f := map[string]famSpec{
		"process_start_time_seconds":             {tGauge, nil},
		"vllm:num_requests_running":              {tGauge, el},
		"vllm:num_requests_waiting":              {tGauge, el},
		"vllm:num_preemptions_total":             {tCounter, el},
		"vllm:prompt_tokens_total":               {tCounter, el},
		"vllm:generation_tokens_total":           {tCounter, el},
		"vllm:request_success_total":             {tCounter, plus("finished_reason")},
		"vllm:request_prompt_tokens":             {tHist, el},
		"vllm:request_generation_tokens":         {tHist, el},
		"vllm:iteration_tokens_total":            {tHist, el},
		"vllm:request_max_num_generation_tokens": {tHist, el},
		"vllm:request_params_n":                  {tHist, el},
		"vllm:request_params_max_tokens":         {tHist, el},
		"vllm:time_to_first_token_seconds":       {tHist, el},
		"vllm:e2e_request_latency_seconds":       {tHist, el},
		"vllm:request_queue_time_seconds":        {tHist, el},
		"vllm:request_inference_time_seconds":    {tHist, el},
		"vllm:request_prefill_time_seconds":      {tHist, el},
		"vllm:request_decode_time_seconds":       {tHist, el},
		"vllm:cache_config_info":                 {tGauge, nil}, // checked separately
	}
	switch names {
	case MetricsV1:
		f["vllm:num_requests_waiting_by_reason"] = famSpec{tGauge, plus("reason")}
		f["vllm:engine_sleep_state"] = famSpec{tGauge, plus("sleep_state")}
		f["vllm:kv_cache_usage_perc"] = famSpec{tGauge, el}
		f["vllm:prefix_cache_queries_total"] = famSpec{tCounter, el}
		f["vllm:prefix_cache_hits_total"] = famSpec{tCounter, el}
		f["vllm:prompt_tokens_by_source_total"] = famSpec{tCounter, plus("source")}
		f["vllm:prompt_tokens_cached_total"] = famSpec{tCounter, el}
		f["vllm:request_prefill_kv_computed_tokens"] = famSpec{tHist, el}
		f["vllm:inter_token_latency_seconds"] = famSpec{tHist, el}
		f["vllm:request_time_per_output_token_seconds"] = famSpec{tHist, el}
		f["vllm:request_num_preemptions"] = famSpec{tHist, el}
	case MetricsV010:
		f["vllm:kv_cache_usage_perc"] = famSpec{tGauge, el}
		f["vllm:gpu_cache_usage_perc"] = famSpec{tGauge, el}
		f["vllm:prefix_cache_queries_total"] = famSpec{tCounter, el}
		f["vllm:prefix_cache_hits_total"] = famSpec{tCounter, el}
		f["vllm:gpu_prefix_cache_queries_total"] = famSpec{tCounter, el}
		f["vllm:gpu_prefix_cache_hits_total"] = famSpec{tCounter, el}
		f["vllm:time_per_output_token_seconds"] = famSpec{tHist, el}
		f["vllm:inter_token_latency_seconds"] = famSpec{tHist, el}
		f["vllm:request_time_per_output_token_seconds"] = famSpec{tHist, el}
	case MetricsLegacy:
		f["vllm:num_requests_swapped"] = famSpec{tGauge, el}
		f["vllm:gpu_cache_usage_perc"] = famSpec{tGauge, el}
		f["vllm:cpu_cache_usage_perc"] = famSpec{tGauge, el}
		f["vllm:gpu_prefix_cache_hit_rate"] = famSpec{tGauge, el}
		f["vllm:cpu_prefix_cache_hit_rate"] = famSpec{tGauge, el}
		f["vllm:gpu_prefix_cache_queries_total"] = famSpec{tCounter, el}
		f["vllm:gpu_prefix_cache_hits_total"] = famSpec{tCounter, el}
		f["vllm:time_per_output_token_seconds"] = famSpec{tHist, el}
	}
	// Every counter and histogram has a _created gauge with its labels.
	for name, s := range f {
		if s.typ == tCounter || s.typ == tHist {
			f[strings.TrimSuffix(name, "_total")+"_created"] = famSpec{tGauge, s.labels}
		}
	}
	// iteration_tokens_total is a histogram: its created gauge keeps the suffix.
	delete(f, "vllm:iteration_tokens_created")
	f["vllm:iteration_tokens_total_created"] = famSpec{tGauge, el}
	return f
}

func TestMetricSurfaces(t *testing.T) {
	for _, names := range []string{MetricsV1, MetricsV010, MetricsLegacy} {
		t.Run(names, func(t *testing.T) {
			_, ts := startSim(t, func(c *Config) { c.MetricsNames = names; c.Model = "org/model-1" })
			streamCompletion(t, ts.URL, `{"prompt":"hello world","max_tokens":3,"ignore_eos":true,"stream":true}`)
			mfs, text := scrape(t, ts.URL)
			want := expectedFamilies(names)
			var got []string
			for name := range mfs {
				got = append(got, name)
			}
			sort.Strings(got)
			for _, name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("unexpected family %s", name)
				}
			}
			for name, spec := range want {
				mf, ok := mfs[name]
				if !ok {
					t.Errorf("missing family %s", name)
					continue
				}
				if mf.GetType() != spec.typ {
					t.Errorf("%s: type %v, want %v", name, mf.GetType(), spec.typ)
				}
				if mf.GetHelp() == "" {
					t.Errorf("%s: empty HELP", name)
				}
				if name == "vllm:cache_config_info" {
					continue
				}
				for _, m := range mf.GetMetric() {
					var ln []string
					for _, lp := range m.GetLabel() {
						ln = append(ln, lp.GetName())
						if lp.GetName() == "model_name" && lp.GetValue() != "org/model-1" {
							t.Errorf("%s: model_name=%q", name, lp.GetValue())
						}
						if lp.GetName() == "engine" && lp.GetValue() != "0" {
							t.Errorf("%s: engine=%q", name, lp.GetValue())
						}
					}
					if strings.Join(ln, ",") != strings.Join(spec.labels, ",") {
						t.Errorf("%s: labels %v, want %v", name, ln, spec.labels)
					}
				}
			}
			// Label names are printed sorted; bounds print as Python floats.
			for _, line := range []string{
				`vllm:time_to_first_token_seconds_bucket{` + engineLabel(names) + `le="0.001",model_name="org/model-1"} `,
				`vllm:time_to_first_token_seconds_bucket{` + engineLabel(names) + `le="2560.0",model_name="org/model-1"} 1.0`,
				`vllm:e2e_request_latency_seconds_bucket{` + engineLabel(names) + `le="1.0",model_name="org/model-1"} 1.0`,
				`vllm:e2e_request_latency_seconds_bucket{` + engineLabel(names) + `le="+Inf",model_name="org/model-1"} 1.0`,
				`vllm:iteration_tokens_total_bucket{` + engineLabel(names) + `le="16384.0",model_name="org/model-1"} 3.0`,
				`vllm:request_prompt_tokens_bucket{` + engineLabel(names) + `le="1000.0",model_name="org/model-1"} 1.0`,
				`vllm:request_success_total{` + engineLabel(names) + `finished_reason="length",model_name="org/model-1"} 1.0`,
				`# TYPE vllm:num_preemptions_created gauge`,
			} {
				if !strings.Contains(text, line) {
					t.Errorf("exposition lacks %q", line)
				}
			}
			if strings.Contains(text, `le="1000.0",model_name="org/model-1"} 1.0`) && strings.Contains(text, `le="2000.0"`) {
				t.Error("request token buckets exceed max_model_len 1024")
			}
			if !regexp.MustCompile(`(?m)^vllm:num_preemptions_created\{[^}]*\} 1\.\d+e\+09$`).MatchString(text) {
				t.Error("_created value is not a Python-formatted Unix timestamp")
			}
			checkBuckets(t, mfs, "vllm:time_to_first_token_seconds", bucketsTTFT)
			checkBuckets(t, mfs, "vllm:e2e_request_latency_seconds", bucketsRequestLatency)
			checkBuckets(t, mfs, "vllm:iteration_tokens_total", bucketsIteration)
			checkBuckets(t, mfs, "vllm:request_params_n", []float64{1, 2, 5, 10, 20})
			checkBuckets(t, mfs, "vllm:request_prompt_tokens", []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000})
			if names != MetricsV1 {
				checkBuckets(t, mfs, "vllm:time_per_output_token_seconds", bucketsITL)
			} else {
				checkBuckets(t, mfs, "vllm:inter_token_latency_seconds", bucketsITL)
				checkBuckets(t, mfs, "vllm:request_num_preemptions", []float64{1, 2, 3, 4, 5, 10, 20})
			}
			reasons := map[string][]string{MetricsV1: {"stop", "length", "abort", "error"}, MetricsV010: {"stop", "length", "abort"}, MetricsLegacy: {"stop", "length", "abort"}}[names]
			if n := len(mfs["vllm:request_success_total"].GetMetric()); n != len(reasons) {
				t.Errorf("request_success_total has %d reasons, want %v", n, reasons)
			}
			cc := map[string]string{}
			for _, lp := range mfs["vllm:cache_config_info"].GetMetric()[0].GetLabel() {
				cc[lp.GetName()] = lp.GetValue()
			}
			if cc["block_size"] != "16" || cc["num_gpu_blocks"] != "1024" || cc["model_name"] != "" {
				t.Errorf("cache_config_info labels %v", cc)
			}
			switch names {
			case MetricsV1:
				if cc["kv_cache_size_tokens"] != "16384" || cc["kv_cache_max_concurrency"] != "16.0" || cc["engine"] != "0" {
					t.Errorf("v1 cache_config_info labels %v", cc)
				}
			case MetricsLegacy:
				if _, ok := cc["engine"]; ok {
					t.Errorf("legacy cache_config_info has an engine label")
				}
			}
		})
	}
}

func engineLabel(names string) string {
	if names == MetricsLegacy {
		return ""
	}
	return `engine="0",`
}

func checkBuckets(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want []float64) {
	t.Helper()
	var got []float64
	for _, b := range mfs[name].GetMetric()[0].GetHistogram().GetBucket() {
		got = append(got, b.GetUpperBound())
	}
	// The text parser keeps the +Inf bucket.
	want = append(append([]float64(nil), want...), math.Inf(1))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s buckets = %v, want %v", name, got, want)
	}
}

func TestCountersConsistent(t *testing.T) {
	_, ts := startSim(t, func(c *Config) { c.TTFT = time.Millisecond; c.ITL = time.Millisecond })
	const n, T = 12, 7
	var wg sync.WaitGroup
	streamed := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path, body := "/v1/completions", fmt.Sprintf(`{"prompt":"%08d","max_tokens":%d,"ignore_eos":true,"stream":true}`, i, T)
			if i%2 == 1 {
				path, body = "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"%08d"}],"max_tokens":%d,"ignore_eos":true,"stream":true}`, i, T)
			}
			resp := post(t, ts.URL+path, body)
			defer resp.Body.Close()
			res := readSSE(t, resp.Body)
			streamed[i] = len(res.events)
			if i%2 == 1 {
				streamed[i]-- // role event
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, s := range streamed {
		total += s
	}
	if total != n*T {
		t.Fatalf("streamed %d tokens, want %d", total, n*T)
	}
	mfs, _ := scrape(t, ts.URL)
	e := map[string]string{"engine": "0"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"vllm:generation_tokens_total", e, float64(total)},
		{"vllm:prompt_tokens_total", e, n * 2},
		{"vllm:prefix_cache_queries_total", e, n * 2},
		{"vllm:request_success_total", map[string]string{"finished_reason": "length"}, n},
		{"vllm:request_success_total", map[string]string{"finished_reason": "abort"}, 0},
		{"vllm:time_to_first_token_seconds", e, n},
		{"vllm:inter_token_latency_seconds", e, n * (T - 1)},
		{"vllm:iteration_tokens_total", e, n * T},
		{"vllm:e2e_request_latency_seconds", e, n},
		{"vllm:request_queue_time_seconds", e, n},
		{"vllm:request_prefill_time_seconds", e, n},
		{"vllm:request_decode_time_seconds", e, n},
		{"vllm:request_time_per_output_token_seconds", e, n},
		{"vllm:request_generation_tokens", e, n},
		{"vllm:num_requests_running", e, 0},
		{"vllm:num_requests_waiting", e, 0},
		{"vllm:kv_cache_usage_perc", e, 0},
	} {
		if got := value(t, mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := histSum(t, mfs, "vllm:request_generation_tokens", e); got != n*T {
		t.Errorf("request_generation_tokens_sum = %v, want %d", got, n*T)
	}
	if got := histSum(t, mfs, "vllm:iteration_tokens_total", e); got != n*T+n*2 {
		t.Errorf("iteration_tokens_total_sum = %v, want %d", got, n*T+n*2)
	}
}

// TestQueueing: with max_num_seqs 4 and 8 streams, 4 run and 4 wait, the
// waiting ones see their queue time in TTFT, and token rate matches the
// counter.
func TestQueueing(t *testing.T) {
	_, ts := startSim(t, func(c *Config) {
		c.MaxNumSeqs = 4
		c.TTFT = 20 * time.Millisecond
		// A first-wave request lasts about a second, so that on a loaded
		// machine the second wave still arrives while the first runs.
		c.ITL = 50 * time.Millisecond
	})
	const n, T = 8, 20
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := streamCompletion(t, ts.URL, fmt.Sprintf(`{"prompt":"q%d","max_tokens":%d,"ignore_eos":true,"stream":true}`, i, T))
			if len(res.events) != T || !res.done {
				t.Errorf("stream %d: %d events, done=%v", i, len(res.events), res.done)
			}
		}()
	}
	e := map[string]string{"engine": "0"}
	mfs := waitMetric(t, ts.URL, 10*time.Second, func(m map[string]*dto.MetricFamily) bool {
		return value(t, m, "vllm:num_requests_running", e) == 4 && value(t, m, "vllm:num_requests_waiting", e) == 4
	})
	if v := value(t, mfs, "vllm:num_requests_waiting_by_reason", map[string]string{"reason": "capacity"}); v != 4 {
		t.Errorf("waiting_by_reason{capacity} = %v, want 4", v)
	}
	if v := value(t, mfs, "vllm:kv_cache_usage_perc", e); v <= 0 || v > 1 {
		t.Errorf("kv_cache_usage_perc = %v while 4 requests run", v)
	}
	wg.Wait()
	mfs, _ = scrape(t, ts.URL)
	// The second wave waited for a whole first-wave request: at least
	// ttft + (T-1)*itl = 970ms each (less arrival skew, up to 770ms), so the
	// queue-time sum is at least 4*0.2s.
	if q := histSum(t, mfs, "vllm:request_queue_time_seconds", e); q < 4*0.2 {
		t.Errorf("queue time sum = %v, want >= %v", q, 4*0.2)
	}
	if ttft := histSum(t, mfs, "vllm:time_to_first_token_seconds", e); ttft < 4*0.2+8*0.02 {
		t.Errorf("TTFT sum = %v does not include queue time", ttft)
	}
	if v := value(t, mfs, "vllm:generation_tokens_total", e); v != n*T {
		t.Errorf("generation_tokens_total = %v, want %d", v, n*T)
	}
}

// TestPreemption: three requests whose contexts cannot all fit in the KV
// cache; the newest running request is preempted, requeued, and still
// streams every token.
func TestPreemption(t *testing.T) {
	_, ts := startSim(t, func(c *Config) {
		c.MaxModelLen = 64
		c.KVCacheTokens = 64 // 4 blocks of 16
		c.MaxNumSeqs = 8
		c.TTFT = time.Millisecond
		c.ITL = time.Millisecond
	})
	const n, T = 3, 40
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 4-token prompt + 40 tokens = 3 blocks each; 3 requests need 9 > 4.
			res := streamCompletion(t, ts.URL, fmt.Sprintf(`{"prompt":"p%03dabcdefghijkl","max_tokens":%d,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, i, T))
			if len(res.events) != T+1 || !res.done {
				t.Errorf("stream %d: %d events, done=%v", i, len(res.events), res.done)
				return
			}
			if u := decodeChunk(t, res.events[T]).Usage; u.CompletionTokens != T {
				t.Errorf("stream %d: completion_tokens = %d", i, u.CompletionTokens)
			}
		}()
	}
	wg.Wait()
	mfs, _ := scrape(t, ts.URL)
	e := map[string]string{"engine": "0"}
	p := value(t, mfs, "vllm:num_preemptions_total", e)
	if p < 1 {
		t.Fatalf("num_preemptions_total = %v, want > 0", p)
	}
	if s := histSum(t, mfs, "vllm:request_num_preemptions", e); s != p {
		t.Errorf("request_num_preemptions sum = %v, want %v", s, p)
	}
	if v := value(t, mfs, "vllm:generation_tokens_total", e); v != n*T {
		t.Errorf("generation_tokens_total = %v, want %d", v, n*T)
	}
	if v := value(t, mfs, "vllm:kv_cache_usage_perc", e); v != 0 {
		t.Errorf("kv_cache_usage_perc = %v after all finished", v)
	}
}

func TestDataParallel(t *testing.T) {
	_, ts := startSim(t, func(c *Config) { c.DataParallelSize = 3; c.MaxNumSeqs = 1; c.ITL = 50 * time.Millisecond })
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			streamCompletion(t, ts.URL, `{"prompt":"dp","max_tokens":20,"ignore_eos":true,"stream":true}`)
		}()
	}
	waitMetric(t, ts.URL, 5*time.Second, func(m map[string]*dto.MetricFamily) bool {
		for _, eng := range []string{"0", "1", "2"} {
			if value(t, m, "vllm:num_requests_running", map[string]string{"engine": eng}) != 1 {
				return false
			}
		}
		return true
	})
	wg.Wait()
	mfs, _ := scrape(t, ts.URL)
	var sum float64
	for _, eng := range []string{"0", "1", "2"} {
		v := value(t, mfs, "vllm:request_success_total", map[string]string{"engine": eng, "finished_reason": "length"})
		if v == 0 {
			t.Errorf("engine %s served nothing", eng)
		}
		sum += v
		value(t, mfs, "vllm:cache_config_info", map[string]string{"engine": eng})
	}
	if sum != 6 {
		t.Errorf("requests over engines = %v, want 6", sum)
	}
}

func TestLegacyFoldsEngines(t *testing.T) {
	_, ts := startSim(t, func(c *Config) { c.DataParallelSize = 2; c.MetricsNames = MetricsLegacy })
	for i := 0; i < 2; i++ {
		streamCompletion(t, ts.URL, `{"prompt":"x","max_tokens":2,"ignore_eos":true,"stream":true}`)
	}
	mfs, _ := scrape(t, ts.URL)
	if v := value(t, mfs, "vllm:generation_tokens_total", nil); v != 4 {
		t.Errorf("generation_tokens_total = %v, want 4", v)
	}
	if v := value(t, mfs, "vllm:e2e_request_latency_seconds", nil); v != 2 {
		t.Errorf("e2e count = %v, want 2", v)
	}
}

func TestPrefixCacheHits(t *testing.T) {
	_, ts := startSim(t, nil)
	prompt := strings.Repeat("abcd", 40) // 40 tokens
	for i := 0; i < 2; i++ {
		streamCompletion(t, ts.URL, `{"prompt":"`+prompt+`","max_tokens":1,"stream":true}`)
	}
	mfs, _ := scrape(t, ts.URL)
	if v := value(t, mfs, "vllm:prefix_cache_queries_total", nil); v != 80 {
		t.Errorf("queries = %v, want 80", v)
	}
	if v := value(t, mfs, "vllm:prefix_cache_hits_total", nil); v != 32 { // (40-1)/16*16
		t.Errorf("hits = %v, want 32", v)
	}
	if v := value(t, mfs, "vllm:prompt_tokens_by_source_total", map[string]string{"source": "local_compute"}); v != 48 {
		t.Errorf("local_compute = %v, want 48", v)
	}
}
