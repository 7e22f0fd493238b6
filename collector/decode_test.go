package collector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// pythonOpenMetrics is prometheus_client's own OpenMetrics shape: counter
// families named without _total, _created samples inside the family, # EOF.
const pythonOpenMetrics = `# HELP python_gc_objects_collected Objects collected during gc
# TYPE python_gc_objects_collected counter
python_gc_objects_collected_total{generation="0"} 123.0
# HELP vllm:generation_tokens Number of generation tokens processed.
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 42.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7882e+09
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1.0
# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.
# TYPE vllm:request_decode_time_seconds histogram
vllm:request_decode_time_seconds_bucket{engine="0",le="0.3",model_name="m"} 1.0
vllm:request_decode_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 1.0
vllm:request_decode_time_seconds_count{engine="0",model_name="m"} 1.0
vllm:request_decode_time_seconds_sum{engine="0",model_name="m"} 0.2
vllm:request_decode_time_seconds_created{engine="0",model_name="m"} 1.7882e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 9.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.41
vllm:time_to_first_token_seconds_created{engine="0",model_name="m"} 1.7882e+09
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# EOF
`

// exposition is one body and the format it is decoded in.
type exposition struct {
	name   string
	body   []byte
	format expfmt.Format
}

// expositions returns every fixture as written (text 0.0.4), re-encoded as
// OpenMetrics 1.0.0 by expfmt, and prometheus_client's own OpenMetrics body.
func expositions(t testing.TB) []exposition {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.prom"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []exposition
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		out = append(out, exposition{name + "/text", data, expfmt.FmtText})
		parser := expfmt.NewTextParser(model.UTF8Validation)
		// A real capture may lack its final newline (real-0.4.3.prom).
		if !bytes.HasSuffix(data, []byte("\n")) {
			data = append(slices.Clip(data), '\n')
		}
		fams, err := parser.TextToMetricFamilies(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var om bytes.Buffer
		enc := expfmt.NewEncoder(&om, expfmt.FmtOpenMetrics_1_0_0)
		for _, k := range keys(fams) {
			if err := enc.Encode(fams[k]); err != nil {
				t.Fatal(err)
			}
		}
		if c, ok := enc.(expfmt.Closer); ok {
			_ = c.Close()
		}
		out = append(out, exposition{name + "/openmetrics", om.Bytes(), expfmt.FmtOpenMetrics_1_0_0})
	}
	out = append(out, exposition{"python/openmetrics", []byte(pythonOpenMetrics), expfmt.FmtOpenMetrics_1_0_0})
	return out
}

func snapshotOf(t testing.TB, body []byte, format expfmt.Format, filter bool) (string, int, error) {
	t.Helper()
	fs, err := decodeFamilies(bytes.NewReader(body), format, filter)
	if err != nil {
		return "", 0, err
	}
	samples := 0
	for _, mf := range fs {
		samples += len(mf.GetMetric())
	}
	return dumpSnapshot(normalise(fs, time.Unix(0, 0), "", nil)), samples, nil
}

// The filter must not change what the collector reports: every fixture, in
// every format, normalises to the same snapshot with and without it, while
// fewer samples are decoded.
func TestFamilyFilterSameSnapshot(t *testing.T) {
	for _, e := range expositions(t) {
		t.Run(e.name, func(t *testing.T) {
			if strings.HasPrefix(e.name, "triton-") && e.format == expfmt.FmtOpenMetrics_1_0_0 {
				t.Skip("Triton's counters have no _total suffix, which OpenMetrics requires; Triton serves text 0.0.4 only")
			}
			whole, all, err := snapshotOf(t, e.body, e.format, false)
			if err != nil {
				t.Fatalf("unfiltered: %v", err)
			}
			filtered, kept, err := snapshotOf(t, e.body, e.format, true)
			if err != nil {
				t.Fatalf("filtered: %v", err)
			}
			if filtered != whole {
				t.Errorf("filtered snapshot differs:\n%s\nunfiltered:\n%s", filtered, whole)
			}
			if !strings.Contains(whole, "model ") && !strings.HasPrefix(e.name, "unknown-") {
				t.Errorf("fixture normalises to no model:\n%s", whole)
			}
			// Hand-written engine fixtures hold only families their
			// profile reads; real payloads hold many more.
			if kept > all || kept == all && !strings.Contains(e.name, "-hand") {
				t.Errorf("filter decoded %d samples of %d, want fewer", kept, all)
			}
			t.Logf("decoded %d of %d samples", kept, all)
		})
	}
}

func TestDecodeRejectsNonExposition(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"html", "<html><body>502 Bad Gateway</body></html>\n", `line 1: `},
		{"json", "vllm:num_requests_running 1\n{\"error\": \"x\"}\n", `line 2: `},
		{"digit-first", "# TYPE process_cpu_seconds_total counter\n3process_cpu_seconds_total 3\n", `line 2: `},
		{"later-line", "vllm:num_requests_running{model_name=\"m\"} 1\n\n\n* nope\n", `line 4: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeFamilies(strings.NewReader(tc.body), expfmt.FmtText, true)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to start with %q", err, tc.want)
			}
		})
	}
}

// Errors name the line of the body, in a family that is read or not.
func TestDecodeErrorLine(t *testing.T) {
	head := "# HELP process_cpu_seconds_total CPU.\n" + // 1
		"# TYPE process_cpu_seconds_total counter\n" + // 2
		"process_cpu_seconds_total 3\n" + // 3
		"# TYPE vllm:num_requests_running gauge\n" // 4
	for _, tc := range []struct{ name, body, want string }{
		{"read family", head + "vllm:num_requests_running{model_name=\"m\"} one\n", "line 5: "},
		{"after blank lines", head + "\n\nvllm:num_requests_running{model_name=\"m\"} one\n", "line 7: "},
		{"family not read", head + "vllm:num_requests_running{model_name=\"m\"} 1\nprocess_open_fds{x=\"1\" 3\n", "line 6: "},
		{"histogram bound", "# TYPE vllm:time_to_first_token_seconds histogram\n" +
			"vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"soon\"} 1\n", "line 2: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeFamilies(strings.NewReader(tc.body), expfmt.FmtText, true)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to start with %q", err, tc.want)
			}
		})
	}
}

// A family the collector does not read is parsed as strictly as one it
// reads, as Prometheus itself would parse it: a bad value there fails the
// scrape.
func TestDecodeSkippedFamilyValue(t *testing.T) {
	body := "# TYPE vllm:request_decode_time_seconds histogram\n" +
		"vllm:request_decode_time_seconds_sum{model_name=\"m\"} NaNaN\n" +
		"# TYPE vllm:num_requests_running gauge\n" +
		"vllm:num_requests_running{model_name=\"m\"} 2\n"
	if _, err := decodeFamilies(strings.NewReader(body), expfmt.FmtText, true); err == nil || !strings.HasPrefix(err.Error(), "line 2: ") {
		t.Fatalf("err = %v, want an error on line 2", err)
	}
}

// Long lines are read whole, in families read or not.
func TestDecodeLongLines(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	body := "# TYPE vllm:request_params_n histogram\n" +
		fmt.Sprintf("vllm:request_params_n_sum{model_name=\"m\",junk=%q} 1\n", long) +
		"# TYPE vllm:num_requests_running gauge\n" +
		fmt.Sprintf("vllm:num_requests_running{model_name=\"m\",junk=%q} 2\n", long) +
		"# TYPE vllm:num_requests_waiting gauge\n" +
		"vllm:num_requests_waiting{model_name=\"m\"} 3\n"
	fs, err := decodeFamilies(strings.NewReader(body), expfmt.FmtText, true)
	if err != nil {
		t.Fatal(err)
	}
	m := normalise(fs, time.Unix(0, 0), "", nil).Models["m"]
	if m == nil || m.Running != 2 || m.Waiting != 3 {
		t.Fatalf("model m = %+v", m)
	}
	if _, ok := fs["vllm:request_params_n"]; ok {
		t.Error("a family the collector does not read was decoded")
	}
}

// Only the families normalise reads are decoded, from a body read in small
// pieces; the families seen are named whether read or not.
func TestDecodeWantedFamilies(t *testing.T) {
	fs, seen, err := decodeFamiliesSeen(iotest.HalfReader(strings.NewReader(pythonOpenMetrics)), expfmt.FmtOpenMetrics_1_0_0, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vllm:generation_tokens_total", "vllm:cache_config_info", "vllm:time_to_first_token_seconds", "vllm:kv_cache_usage_perc"} {
		if fs[want] == nil {
			t.Errorf("family %s not decoded", want)
		}
	}
	if h := fs["vllm:time_to_first_token_seconds"]; h != nil && (len(h.Metric) != 1 || len(h.Metric[0].GetHistogram().GetBucket()) != 3 || h.Metric[0].GetHistogram().GetSampleCount() != 10) {
		t.Errorf("TTFT histogram = %v", h)
	}
	for name := range fs {
		if strings.Contains(name, "python_gc") || strings.Contains(name, "_created") || strings.Contains(name, "decode") {
			t.Errorf("family %s decoded", name)
		}
	}
	if want := []string{"python_gc_objects_collected", "vllm:generation_tokens", "vllm:cache_config_info", "vllm:request_decode_time_seconds", "vllm:time_to_first_token_seconds"}; !slices.Equal(seen, want) {
		t.Errorf("seen = %q, want %q", seen, want)
	}
}

// FuzzDecodeFamilies: decoding never panics, and whenever the whole body
// decodes, the filtered body decodes to the same snapshot.
func FuzzDecodeFamilies(f *testing.F) {
	// Seeds are the fixtures' first lines: small seeds keep the fuzzer's
	// mutation and minimisation fast.
	for _, e := range expositions(f) {
		lines := bytes.SplitAfter(e.body, []byte("\n"))
		f.Add(bytes.Join(lines[:min(len(lines), 40)], nil), e.format == expfmt.FmtOpenMetrics_1_0_0)
	}
	f.Add([]byte("<html>\n"), false)
	f.Add([]byte("vllm:num_requests_running{model_name=\"m\"} 1\n"), false)
	f.Add([]byte("vllm:spec_decode_num_drafts_total{model_name=\"m\"} 1\n"), false)
	// One cache for every input, as a Manager's scrapers share theirs: a
	// series cached from one body must mean the same in the next.
	cache := newLabelCache()
	f.Fuzz(func(t *testing.T, body []byte, openMetrics bool) {
		format := expfmt.FmtText
		if openMetrics {
			format = expfmt.FmtOpenMetrics_1_0_0
		}
		whole, _, werr := snapshotOf(t, body, format, false)
		filtered, _, ferr := snapshotOf(t, body, format, true)
		if werr != nil {
			return
		}
		if ferr != nil {
			t.Fatalf("the whole body decodes but the filtered one fails: %v", ferr)
		}
		if whole != filtered {
			t.Fatalf("filtered snapshot differs:\n%s\nunfiltered:\n%s", filtered, whole)
		}
		for _, filter := range []bool{false, true} {
			want, _ := decodeFamilies(bytes.NewReader(body), format, filter)
			got, err := decodeCached(t, body, format, filter, cache)
			if err != nil {
				t.Fatalf("filter=%v: decodes without the label cache, fails with it: %v", filter, err)
			}
			if w, g := familiesText(t, want), familiesText(t, got); w != g {
				t.Fatalf("filter=%v: the label cache changed the families:\n%s\nwithout it:\n%s", filter, g, w)
			}
		}
		// The other readers of a decoded body must not panic on it either:
		// the gateway profiles, and each engine's profile forced by a
		// target's engine key (one per input, picked by its length).
		fs, err := decodeFamilies(bytes.NewReader(body), format, false)
		if err != nil {
			t.Fatalf("decoded once, failed the second time: %v", err)
		}
		normaliseGateway(fs)
		forced := append([]string{""}, Engines()...)
		normalise(fs, time.Unix(0, 0), forced[len(body)%len(forced)], nil)
	})
}

// BenchmarkDecode compares decoding (and normalising) an exposition whole and
// filtered: the v1 fixture, and what vllm_sim serves after a few requests.
func BenchmarkDecode(b *testing.B) {
	fixture, err := os.ReadFile(filepath.Join("testdata", "v1.prom"))
	if err != nil {
		b.Fatal(err)
	}
	for _, body := range []struct {
		name string
		data []byte
	}{{"fixture", fixture}, {"simulator", simulatorBody(b)}} {
		for _, filter := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/filter=%v", body.name, filter), func(b *testing.B) {
				b.SetBytes(int64(len(body.data)))
				b.ReportAllocs()
				for b.Loop() {
					fs, err := decodeFamilies(bytes.NewReader(body.data), expfmt.FmtText, filter)
					if err != nil {
						b.Fatal(err)
					}
					normalise(fs, time.Unix(0, 0), "", nil)
				}
			})
		}
		// As a Manager's scrapes decode: filtered, the labels from the
		// cache the earlier scrapes filled.
		b.Run(body.name+"/filter=true/cached", func(b *testing.B) {
			cache := newLabelCache()
			b.SetBytes(int64(len(body.data)))
			b.ReportAllocs()
			for b.Loop() {
				fs, _, err := decodeFamiliesSeen(bytes.NewReader(body.data), expfmt.FmtText, true, cache)
				if err != nil {
					b.Fatal(err)
				}
				normalise(fs, time.Unix(0, 0), "", nil)
			}
		})
	}
}

// simulatorBody is vllm_sim's text /metrics after a few streamed requests.
func simulatorBody(b *testing.B) []byte {
	cfg := simulator.DefaultConfig()
	cfg.TTFT, cfg.ITL = time.Millisecond, time.Millisecond
	sim, err := simulator.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sim.Close()
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	load := streamLoad(ctx, srv.URL, cfg.Model, 4)
	time.Sleep(200 * time.Millisecond)
	cancel()
	load.Wait()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Contains(data, []byte("vllm:time_to_first_token_seconds_bucket")) {
		b.Fatalf("simulator /metrics: %v\n%s", err, data)
	}
	return data
}

// A body without a final newline is accepted whichever family its last line
// belongs to: one the collector reads, or one not decoded.
func TestFinalNewline(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"read family last", "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 1\n" +
			"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3"},
		{"dropped family last", "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n" +
			"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 1\n" +
			"# TYPE vllm:avg_generation_throughput_toks_per_s gauge\nvllm:avg_generation_throughput_toks_per_s{model_name=\"m\"} 0.0"},
		{"comment last", "vllm:num_requests_running{model_name=\"m\"} 3\nvllm:num_requests_waiting{model_name=\"m\"} 1\n# a comment"},
	} {
		for _, filter := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/filter=%v", tc.name, filter), func(t *testing.T) {
				// iotest.OneByteReader makes the newline land in a call of its own.
				for _, r := range []io.Reader{strings.NewReader(tc.body), iotest.OneByteReader(strings.NewReader(tc.body))} {
					fs, err := decodeFamilies(r, expfmt.FmtText, filter)
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if m := normalise(fs, time.Unix(0, 0), "", nil).Models["m"]; m == nil || m.Running != 3 || m.Waiting != 1 {
						t.Fatalf("model m = %+v", m)
					}
				}
			})
		}
	}
}
