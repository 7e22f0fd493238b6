package collector

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// engineFixtures are the payloads of every engine in testdata, with the
// engine their profile must detect. The real ones are copied from public
// sources (testdata/README.md); the -hand ones are written from the
// engine's source where no real payload was found.
var engineFixtures = []struct {
	file, engine string
}{
	{"sglang-0.4-docs.prom", "sglang"},
	{"sglang-0.3-hand.prom", "sglang"},
	{"sglang-pd-decode-hand.prom", "sglang"},
	{"triton-trtllm-2023-12.prom", "triton"},
	{"triton-base-23.11.prom", "triton"},
	{"triton-trtllm-readme-2026.prom", "triton"},
	{"llamacpp-ik-pr695.prom", "llamacpp"},
	{"llamacpp-0.4.0.prom", "llamacpp"},
	{"vllm-0.29-sleep.prom", "vllm"},
	{"vllm-spec-decode-hand.prom", "vllm"},
	{"vllm-2026-hand.prom", "vllm"},
	{"trtllm-serve-hand.prom", "trtllm"},
	{"trtllm-serve-unprefixed-hand.prom", "trtllm"},
	{"dynamo-frontend-hand.prom", "dynamo"},
	{"ray-vllm-hand.prom", "ray"},
	{"nim-hand.prom", "nim"},
}

// TestEngineGolden normalises every engine payload: the golden file pins
// every field, and the checks below name the values each payload states.
func TestEngineGolden(t *testing.T) {
	for _, fx := range engineFixtures {
		t.Run(fx.file, func(t *testing.T) {
			s := scrapeFixture(t, fx.file)
			if s.Engine != fx.engine {
				t.Errorf("engine = %q, want %q", s.Engine, fx.engine)
			}
			compareGolden(t, strings.TrimSuffix(fx.file, ".prom")+".golden", dumpSnapshot(s))
		})
	}
}

// TestEngineStatedValues checks the values each real payload states, so
// that a wrong -update of the golden files cannot slip through.
func TestEngineStatedValues(t *testing.T) {
	nan := math.NaN()
	type want struct {
		model                                 string
		running, waiting, kv, prompt, gen     float64
		kvCapacity                            float64
		ttftCount, itlCount, e2eCount, qCount float64 // -1: absent
	}
	for _, tc := range []struct {
		file string
		want want
	}{
		// 162 running, 2,826 queued, token_usage 0.28, the counters and
		// histogram counts as pasted into SGLang's docs.
		{"sglang-0.4-docs.prom", want{"meta-llama/Llama-3.1-8B-Instruct", 162, 2826, 0.28, 8128902, 7557572, nan, 11008, 7400757, 11228, -1}},
		{"sglang-0.3-hand.prom", want{"Qwen/Qwen2-7B", 4, 9, 0.5, 1200, 3400, nan, 10, -1, -1, -1}},
		// active 0; no waiting type before 2024; 1 of 6239 blocks used; 6239 blocks × 64 tokens.
		{"triton-trtllm-2023-12.prom", want{"tensorrt_llm", 0, nan, 1.0 / 6239, nan, nan, 6239 * 64, -1, -1, -1, -1}},
		// pending 0; request and queue durations (µs counters) with 0 requests.
		{"triton-base-23.11.prom", want{"tensorrt_llm", nan, 0, nan, nan, nan, nan, -1, -1, 0, 0}},
		// The README's current block: waiting 1, the fraction 0.4875 over used/max.
		{"triton-trtllm-readme-2026.prom", want{"tensorrt_llm", 0, 1, 0.4875, nan, nan, 6239 * 64, -1, -1, -1, -1}},
		// No cached counter: the prompt tokens are the evaluated ones; the
		// decode seconds over the predicted tokens make a mean ITL of 3469.
		{"llamacpp-ik-pr695.prom", want{"default", 0, 0, 0.491063, 6886, 3469, nan, -1, 3469, -1, -1}},
		// Evaluated 45 + cached 40 prompt tokens, as the requests' usage counts.
		{"llamacpp-0.4.0.prom", want{"default", 0, 0, nan, 45 + 40, 56, nan, -1, 56, -1, -1}},
		// Idle after 10 requests: 530 prompt and 584 generated tokens, 574 inter-token gaps.
		{"vllm-0.29-sleep.prom", want{"qwen2.5-1.5b", 0, 0, 0, 530, 584, 322944, 10, 574, 10, 10}},
		{"trtllm-serve-hand.prom", want{"nvidia/Llama-3.1-8B-Instruct-FP8", 3, 1, 0.25, 500, 2000, 32000, 5, -1, -1, -1}},
		{"dynamo-frontend-hand.prom", want{"qwen/qwen3-0.6b", 6, 2, nan, 9000, 4000, nan, 40, -1, 40, -1}},
		{"ray-vllm-hand.prom", want{"llama", 5, 1, 0.6, nan, 300, nan, -1, -1, -1, -1}},
		{"nim-hand.prom", want{"meta/llama-3.1-8b-instruct", 5, 1, 0.4, 700, 900, nan, 4, -1, -1, -1}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s := scrapeFixture(t, tc.file)
			// The scraper names an unlabelled model after /v1/models; alone it is "default".
			nameUnlabeledModel(s, ServerInfo{})
			m := s.Models[tc.want.model]
			if m == nil || len(s.Models) != 1 {
				t.Fatalf("models = %v, want only %q", keys(s.Models), tc.want.model)
			}
			w := tc.want
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"running", m.Running, w.running}, {"waiting", m.Waiting, w.waiting}, {"kv usage", m.KVUsage, w.kv},
				{"prompt tokens", m.PromptTokens, w.prompt}, {"generation tokens", m.GenerationTokens, w.gen},
				{"kv capacity", m.KVCapacityTokens, w.kvCapacity},
			} {
				if !(c.got == c.want || math.IsNaN(c.got) && math.IsNaN(c.want) || math.Abs(c.got-c.want) < 1e-12) {
					t.Errorf("%s = %g, want %g (NaN: absent)", c.name, c.got, c.want)
				}
			}
			for _, c := range []struct {
				name string
				h    *Histogram
				want float64
			}{{"ttft", m.TTFT, w.ttftCount}, {"itl", m.ITL, w.itlCount}, {"e2e", m.E2E, w.e2eCount}, {"queue", m.Queue, w.qCount}} {
				switch {
				case c.want == -1 && c.h != nil:
					t.Errorf("%s histogram present (count %g), want absent", c.name, c.h.Count)
				case c.want >= 0 && (c.h == nil || c.h.Count != c.want):
					t.Errorf("%s histogram = %+v, want count %g", c.name, c.h, c.want)
				}
			}
		})
	}
}

// TestTritonMicroseconds: Triton's cumulative microsecond counters become
// a mean in seconds, with no quantile.
func TestTritonMicroseconds(t *testing.T) {
	body := `# TYPE nv_inference_request_success counter
nv_inference_request_success{model="ensemble",version="1"} 4
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="ensemble",version="1"} 1
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="ensemble",version="1"} 2500000
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="ensemble",version="1"} 50000
`
	s := scrapeBody(t, body)
	m := s.Models["ensemble"]
	if s.Engine != "triton" || m == nil || m.E2E == nil || m.E2E.Count != 5 || m.E2E.Sum != 2.5 || math.Abs(m.Queue.Sum-0.05) > 1e-12 {
		t.Fatalf("snapshot = %s", dumpSnapshot(s))
	}
	if q := bucketQuantile(0.5, m.E2E.Buckets); !math.IsNaN(q) {
		t.Errorf("p50 = %g from a sum and a count, want NaN", q)
	}
}

func scrapeBody(t *testing.T, body string) *Snapshot {
	t.Helper()
	srv := textServer(t, []byte(body))
	s, err := Scrape(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEngineForced: a target's engine key reads the payload by that
// profile, whatever it would be detected as: TensorRT-LLM's older bare
// names, detected as trtllm, read as NIM's when the key says nim. A key
// whose profile reads none of the payload's families (sglang on NIM's
// names) does not leave the target silently empty: it is unrecognised,
// with the series and one warning naming the key.
func TestEngineForced(t *testing.T) {
	for _, tc := range []struct {
		fixture, engineKey, wantEngine, wantModel string
	}{
		{"trtllm-serve-unprefixed-hand.prom", "", "trtllm", "Qwen/Qwen3-8B"},
		{"trtllm-serve-unprefixed-hand.prom", "nim", "nim", "Qwen/Qwen3-8B"},
		{"nim-hand.prom", "sglang", EngineUnknown, ""},
	} {
		t.Run(tc.fixture+"/"+tc.engineKey, func(t *testing.T) {
			srv := textServer(t, readFixture(t, tc.fixture))
			reg := prometheus.NewPedanticRegistry()
			var logs bytes.Buffer
			m := NewManager(testOptions(reg, log.NewLogfmtLogger(log.NewSyncWriter(&logs))))
			cfg := configFor(t, srv.URL, "10s", 4)
			cfg.Targets[0].Engine = tc.engineKey
			if err := m.Apply(cfg); err != nil {
				t.Fatal(err)
			}
			s := m.target("a")
			s.scrapeOnce(context.Background())
			s.scrapeOnce(context.Background())
			s.client.CloseIdleConnections()
			recognized, ok := gathered(t, reg, "vllm_server_engine_recognized", map[string]string{"target": "a", "engine": tc.wantEngine})
			if want := b2f(tc.wantEngine != EngineUnknown); !ok || recognized != want {
				t.Errorf("vllm_server_engine_recognized{engine=%q} = %g (present %v), want %g", tc.wantEngine, recognized, ok, want)
			}
			_, info := gathered(t, reg, "vllm_server_info", map[string]string{"target": "a", "engine": tc.wantEngine})
			_, running := gathered(t, reg, "vllm_server_requests", map[string]string{"target": "a", "model": tc.wantModel, "state": "running"})
			if tc.wantEngine == EngineUnknown {
				if info || running {
					t.Errorf("unrecognised payload exports vllm_server_info (%v) or requests (%v)", info, running)
				}
				if n := strings.Count(logs.String(), "matches no engine profile"); n != 1 || !strings.Contains(logs.String(), "engine_key="+tc.engineKey) {
					t.Errorf("%d warnings over 2 scrapes, want 1 naming engine_key=%s:\n%s", n, tc.engineKey, logs.String())
				}
				return
			}
			if !info || !running {
				t.Errorf("vllm_server_info{engine=%q} present %v, vllm_server_requests{model=%q} present %v", tc.wantEngine, info, tc.wantModel, running)
			}
			if strings.Contains(logs.String(), "matches no engine profile") {
				t.Errorf("warning for a recognised payload:\n%s", logs.String())
			}
		})
	}
}

// TestUnknownPayload: a /metrics that answers but matches no profile gives
// vllm_server_engine_recognized{engine="unknown"} 0, one warning naming a
// few of its families (not one per scrape), and no engine series.
func TestUnknownPayload(t *testing.T) {
	srv := textServer(t, readFixture(t, "unknown-tgi.prom"))
	reg := prometheus.NewPedanticRegistry()
	var logs bytes.Buffer
	m := NewManager(testOptions(reg, log.NewLogfmtLogger(log.NewSyncWriter(&logs))))
	if err := m.Apply(configFor(t, srv.URL, "10s", 4)); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	for range 3 {
		s.scrapeOnce(context.Background())
	}
	s.client.CloseIdleConnections()
	if v, ok := gathered(t, reg, "vllm_server_engine_recognized", map[string]string{"target": "a", "engine": "unknown"}); !ok || v != 0 {
		t.Errorf("vllm_server_engine_recognized{engine=unknown} = %g (present %v), want 0", v, ok)
	}
	if n := strings.Count(logs.String(), "matches no engine profile"); n != 1 {
		t.Errorf("%d warnings over 3 scrapes, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "families_seen=tgi_queue_size,tgi_batch_current_size,tgi_batch_next_size,process_open_fds") {
		t.Errorf("the warning does not name the families seen:\n%s", logs.String())
	}
	if _, ok := gathered(t, reg, "vllm_server_info", nil); ok {
		t.Error("vllm_server_info exported for an unrecognised payload")
	}
}

// TestEnginesMatchConfig: the engine key's values are the profiles'.
func TestEnginesMatchConfig(t *testing.T) {
	got, want := slices.Sorted(slices.Values(Engines())), slices.Sorted(slices.Values(config.Engines))
	if !slices.Equal(got, want) {
		t.Errorf("collector engines %v, config engines %v", got, want)
	}
	if sim := slices.Sorted(slices.Values(simulator.EngineNames())); !slices.Equal(sim, want) {
		t.Errorf("simulator engines %v, config engines %v", sim, want)
	}
}

// simPayload is what vllm_sim --engine=engine serves on /metrics after a
// few requests, with speculative decoding on.
func simPayload(t *testing.T, engine string) []byte {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Engine = engine
	cfg.TTFT, cfg.ITL = time.Millisecond, time.Millisecond
	cfg.SpecDecodeTokens, cfg.SpecAcceptRate = 3, 0.5
	sim, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	// The third prompt repeats the second, long enough to fill blocks: it
	// hits the prefix cache.
	prefix := strings.Repeat("a shared system prompt ", 40)
	for i := range 3 {
		body := fmt.Sprintf(`{"model":%q,"prompt":"%shello %d","max_tokens":5}`, cfg.Model, prefix, min(i, 1))
		resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("completion: %s", resp.Status)
		}
	}
	return simMetrics(t, srv)
}

// availableSignals is the set of signals s exports.
func availableSignals(s *Snapshot) []string {
	var out []string
	for i, ok := range signalAvailability(s) {
		if ok {
			out = append(out, signals[i].name)
		}
	}
	return out
}

// TestSimulatorMatchesRealPayload: for each engine with a real payload in
// testdata, vllm_sim --engine=X exposes the same set of available signals
// (Triton's two README blocks are one server's families). Signals a
// payload lacks by release or configuration, such as speculative decoding
// or per-request histograms an older release did not have, are listed.
// Where no real payload was found, the simulator serves at least every
// signal of the payload written from the engine's source.
func TestSimulatorMatchesRealPayload(t *testing.T) {
	for _, tc := range []struct {
		engine  string
		files   []string
		simOnly []string // signals the simulator serves that this payload's release or configuration does not
	}{
		// The docs' paste predates queue_time_seconds and num_retracted_requests_total;
		// cached_tokens_total appears only once a prompt token was a cache hit.
		{"sglang", []string{"sglang-0.4-docs.prom"}, []string{"prefix_cache", "preemptions", "queue_time"}},
		// The README prints neither the opt-in first-response histogram
		// (histogram_latencies=true) nor any token counter.
		{"triton", []string{"triton-trtllm-readme-2026.prom", "triton-base-23.11.prom"}, []string{"ttft"}},
		// The fork's build has no speculative decoding and no server-metrics.cpp histograms.
		// It has no cached-prompt counter either (prefix_cache).
		{"llamacpp", []string{"llamacpp-ik-pr695.prom"}, []string{"e2e", "prefix_cache", "spec_decode", "ttft"}},
		// Upstream v0.4.0 has no KV usage gauge and this build no server-metrics.cpp histograms.
		{"llamacpp", []string{"llamacpp-0.4.0.prom"}, []string{"e2e", "kv_cache_usage", "ttft"}},
		{"vllm", []string{"vllm-0.29-sleep.prom"}, []string{"spec_decode"}},
		// No real payload found: those written from each engine's source (a subset).
		{"trtllm", []string{"trtllm-serve-hand.prom"}, nil},
		{"dynamo", []string{"dynamo-frontend-hand.prom"}, nil},
		{"ray", []string{"ray-vllm-hand.prom"}, nil},
		{"nim", []string{"nim-hand.prom"}, nil},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			sim := normaliseBytes(t, simPayload(t, tc.engine))
			if sim.Engine != tc.engine {
				t.Fatalf("simulator payload detected as %q", sim.Engine)
			}
			var body []byte
			for _, f := range tc.files {
				body = append(body, readFixture(t, f)...)
				body = append(body, '\n')
			}
			real := normaliseBytes(t, body)
			if real.Engine != tc.engine {
				t.Fatalf("%v detected as %q", tc.files, real.Engine)
			}
			want := availableSignals(real)
			got := availableSignals(sim)
			if strings.HasSuffix(tc.files[0], "-hand.prom") {
				for _, sig := range want {
					if !slices.Contains(got, sig) {
						t.Errorf("vllm_sim --engine=%s signals %v lack %s of %v", tc.engine, got, sig, tc.files)
					}
				}
				return
			}
			want = append(want, tc.simOnly...)
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("vllm_sim --engine=%s signals %v\n%v (+ %v) %v", tc.engine, got, tc.files, tc.simOnly, want)
			}
		})
	}
}

func normaliseBytes(t *testing.T, body []byte) *Snapshot {
	t.Helper()
	srv := textServer(t, body)
	s, err := Scrape(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEachProfileEntryIsRead removes each entry of each table-driven
// profile in turn and expects the snapshot of that engine's payloads (the
// fixtures and vllm_sim's) to change: an entry no payload exercises, or
// one that reads nothing, fails here.
func TestEachProfileEntryIsRead(t *testing.T) {
	for _, p := range profiles {
		if p.VLLMPrefixes != nil {
			continue // vLLM's rules: the schema and golden tests above
		}
		var payloads [][]byte
		for _, fx := range engineFixtures {
			if fx.engine == p.Engine {
				payloads = append(payloads, readFixture(t, fx.file))
			}
		}
		payloads = append(payloads, simPayload(t, p.Engine))
		dumps := func(q *Profile) string {
			var b strings.Builder
			for _, body := range payloads {
				fs, err := decodeFamilies(bytes.NewReader(body), decodeFormat(http.Header{"Content-Type": {"text/plain; version=0.0.4"}}), false)
				if err != nil {
					t.Fatal(err)
				}
				s := &Snapshot{Models: map[string]*Model{}}
				normaliseProfile(q, fs, s)
				b.WriteString(dumpSnapshot(s))
			}
			return b.String()
		}
		full := dumps(p)
		for i := range p.Scalars {
			for j := range p.Scalars[i].Sources {
				q := *p
				q.Scalars = slices.Clone(p.Scalars)
				q.Scalars[i].Sources = slices.Delete(slices.Clone(p.Scalars[i].Sources), j, j+1)
				if dumps(&q) == full {
					t.Errorf("%s: scalar rule %d source %q: removing it changes nothing", p.Engine, i, p.Scalars[i].Sources[j].Family)
				}
			}
		}
		for i, f := range p.RequestSuccess {
			q := *p
			q.RequestSuccess = slices.Delete(slices.Clone(p.RequestSuccess), i, i+1)
			if dumps(&q) == full {
				t.Errorf("%s: request success family %q: removing it changes nothing", p.Engine, f)
			}
		}
		for i := range p.Histograms {
			for j := range p.Histograms[i].Sources {
				q := *p
				q.Histograms = slices.Clone(p.Histograms)
				q.Histograms[i].Sources = slices.Delete(slices.Clone(p.Histograms[i].Sources), j, j+1)
				src := p.Histograms[i].Sources[j]
				if dumps(&q) == full {
					t.Errorf("%s: histogram rule %d source %q: removing it changes nothing", p.Engine, i, src.Family+src.SumFamily)
				}
			}
		}
	}
}

// TestSpecDecodeSeries: vllm_server_spec_decode_acceptance_ratio and
// ..._accepted_tokens_per_draft over a window equal the increases of the
// simulator's own counters (read straight from its /metrics); TensorRT-LLM
// counts no drafts, so only the ratio is there.
func TestSpecDecodeSeries(t *testing.T) {
	for _, tc := range []struct {
		engine, drafts, draftTokens, accepted string
	}{
		{"vllm", "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total"},
		{"llamacpp", "llamacpp:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_accepted_tokens_total"},
		{"trtllm", "", "trtllm_spec_decode_num_draft_tokens_total", "trtllm_spec_decode_num_accepted_tokens_total"},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			cfg := simulator.DefaultConfig()
			cfg.Engine, cfg.TTFT, cfg.ITL = tc.engine, time.Millisecond, time.Millisecond
			cfg.SpecDecodeTokens, cfg.SpecAcceptRate = 4, 0.6
			sim, err := simulator.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(sim.Handler())
			defer func() { srv.Close(); _ = sim.Close() }()
			reg := prometheus.NewPedanticRegistry()
			m := NewManager(testOptions(reg, nil))
			if err := m.Apply(configFor(t, srv.URL, "1h", 4)); err != nil {
				t.Fatal(err)
			}
			s := m.target("a")
			clock := time.Unix(1000, 0)
			s.now = func() time.Time { clock = clock.Add(10 * time.Second); return clock }
			s.scrapeOnce(context.Background())
			for i := range 4 {
				body := fmt.Sprintf(`{"model":%q,"prompt":"spec %d","max_tokens":%d,"ignore_eos":true}`, cfg.Model, i, 10+7*i)
				resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			s.scrapeOnce(context.Background())
			s.client.CloseIdleConnections()
			fs, err := decodeFamilies(bytes.NewReader(simMetrics(t, srv)), decodeFormat(http.Header{"Content-Type": {"text/plain; version=0.0.4"}}), false)
			if err != nil {
				t.Fatal(err)
			}
			total := func(name string) float64 {
				v := 0.0
				for _, mt := range fs[name].GetMetric() {
					x, _ := scalar(mt)
					v += x
				}
				return v
			}
			acc := total(tc.accepted)
			if acc == 0 {
				t.Fatal("the simulator accepted no draft token")
			}
			labels := map[string]string{"target": "a"}
			if got, ok := gathered(t, reg, "vllm_server_spec_decode_acceptance_ratio", labels); !ok || math.Abs(got-acc/total(tc.draftTokens)) > 1e-12 {
				t.Errorf("acceptance ratio %g (present %v), simulator's counters %g / %g", got, ok, acc, total(tc.draftTokens))
			}
			got, ok := gathered(t, reg, "vllm_server_spec_decode_accepted_tokens_per_draft", labels)
			switch {
			case tc.drafts == "" && ok:
				t.Errorf("accepted tokens per draft %g from an engine that counts no drafts", got)
			case tc.drafts != "" && (!ok || math.Abs(got-acc/total(tc.drafts)) > 1e-12):
				t.Errorf("accepted per draft %g (present %v), simulator's counters %g / %g", got, ok, acc, total(tc.drafts))
			}
		})
	}
}

func simMetrics(t *testing.T, srv *httptest.Server) []byte {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSleepStateOfRealPayload: vLLM 0.29's vllm:engine_sleep_state, as the
// real capture has it (awake), and with the 1 moved to each other state,
// gives the sleep level 0, 1 (weights offloaded) and 2 (discard all).
func TestSleepStateOfRealPayload(t *testing.T) {
	body := string(readFixture(t, "vllm-0.29-sleep.prom"))
	const state = `vllm:engine_sleep_state{engine="0",model_name="qwen2.5-1.5b",sleep_state="%s"} %s`
	for level, asleep := range []string{"awake", "weights_offloaded", "discard_all"} {
		b := body
		for _, st := range []string{"awake", "weights_offloaded", "discard_all"} {
			v := "0.0"
			if st == asleep {
				v = "1.0"
			}
			was := fmt.Sprintf(state, st, "1.0")
			if !strings.Contains(b, was) {
				was = fmt.Sprintf(state, st, "0.0")
			}
			if !strings.Contains(b, was) {
				t.Fatalf("the capture has no %s", was)
			}
			b = strings.Replace(b, was, fmt.Sprintf(state, st, v), 1)
		}
		s := normaliseBytes(t, []byte(b))
		if m := s.Models["qwen2.5-1.5b"]; m == nil || m.SleepLevel != float64(level) {
			t.Errorf("sleep_state %s: snapshot %s, want sleep_level %d", asleep, dumpSnapshot(s), level)
		}
	}
}

// TestSimulatorSurfaceMatchesRealPayload: every family that vllm_sim
// --engine=X and the engine's real payload both serve has the same type,
// and where the real series carry the model label the profile reads, the
// simulator's do too. HELP texts are not compared: they change between
// releases (SGLang added full stops after 0.4, the llama.cpp fork words
// them its own way), and the simulator follows the source its profile cites.
func TestSimulatorSurfaceMatchesRealPayload(t *testing.T) {
	// Prometheus' text parser, which keeps every family and type.
	decode := func(body []byte) map[string]*dto.MetricFamily {
		t.Helper()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fs, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	for _, tc := range []struct {
		engine string
		files  []string
	}{
		{"sglang", []string{"sglang-0.4-docs.prom"}},
		{"triton", []string{"triton-trtllm-readme-2026.prom", "triton-base-23.11.prom"}},
		{"llamacpp", []string{"llamacpp-ik-pr695.prom"}},
		{"vllm", []string{"vllm-0.29-sleep.prom"}},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			p, _ := ProfileOf(tc.engine)
			sim := decode(simPayload(t, tc.engine))
			common := 0
			for _, f := range tc.files {
				for name, real := range decode(readFixture(t, f)) {
					s := sim[name]
					if s == nil {
						continue
					}
					common++
					if s.GetType() != real.GetType() {
						t.Errorf("%s: simulator %v, %s %v", name, s.GetType(), f, real.GetType())
					}
					named := func(m *dto.Metric) bool {
						if p.VLLMPrefixes != nil {
							_, ok := labelValue(m, lModel)
							return ok
						}
						_, ok := p.modelOf(m)
						return ok
					}
					if !slices.ContainsFunc(real.GetMetric(), named) {
						continue // the real one names no model here either (vllm:cache_config_info)
					}
					for _, m := range s.GetMetric() {
						if !named(m) {
							t.Errorf("%s: simulator series %v without the model label of the profile", name, m.GetLabel())
						}
					}
				}
			}
			if common < 5 {
				t.Errorf("only %d families in common with %v", common, tc.files)
			}
		})
	}
}

// TestRayPrefixes: older Ray exports vLLM's families as ray_vllm:*, newer
// Ray as ray_vllm_* (OpenTelemetry-safe names): both read the same.
func TestRayPrefixes(t *testing.T) {
	underscore := readFixture(t, "ray-vllm-hand.prom")
	colon := bytes.ReplaceAll(underscore, []byte("ray_vllm_"), []byte("ray_vllm:"))
	if bytes.Equal(colon, underscore) {
		t.Fatal("the fixture has no ray_vllm_ family")
	}
	a, b := normaliseBytes(t, underscore), normaliseBytes(t, colon)
	a.Time, b.Time = time.Time{}, time.Time{}
	if a.Engine != "ray" || dumpSnapshot(a) != dumpSnapshot(b) {
		t.Errorf("ray_vllm_ read as\n%s\nray_vllm: read as\n%s", dumpSnapshot(a), dumpSnapshot(b))
	}
}

// TestSleepFromIsSleeping: a vLLM whose /metrics has no
// vllm:engine_sleep_state (0.10 names) is asked GET /is_sleeping at each
// scrape: vllm_server_sleep_level is 0 awake, 1 asleep (the route does not
// tell the level; the simulator sleeps at level 2), 0 after POST /wake_up.
// A server that does not answer /is_sleeping with JSON is asked once and
// has no sleep level.
func TestSleepFromIsSleeping(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.MetricsNames = simulator.MetricsV010
	sim, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer func() { srv.Close(); _ = sim.Close() }()
	if bytes.Contains(simMetrics(t, srv), []byte("vllm:engine_sleep_state")) {
		t.Fatal("the simulator's 0.10 names have vllm:engine_sleep_state")
	}
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	if err := m.Apply(configFor(t, srv.URL, "10s", 4)); err != nil {
		t.Fatal(err)
	}
	s := m.target("a")
	level := func() (float64, bool) {
		s.scrapeOnce(context.Background())
		return gathered(t, reg, "vllm_server_sleep_level", map[string]string{"target": "a"})
	}
	post := func(path string) {
		resp, err := srv.Client().Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, step := range []struct {
		post string
		want float64
	}{{"", 0}, {"/sleep?level=2", 1}, {"/wake_up", 0}} {
		if step.post != "" {
			post(step.post)
		}
		if v, ok := level(); !ok || v != step.want {
			t.Errorf("after %q: vllm_server_sleep_level = %g (present %v), want %g", step.post, v, ok, step.want)
		}
		if sleeping, known := m.SleepState("a"); sleeping != (step.want > 0) || !known {
			t.Errorf("after %q: SleepState = %v, %v", step.post, sleeping, known)
		}
	}
	s.client.CloseIdleConnections()

	// A server answering every path with its metrics text.
	var asked atomic.Int32
	text := readFixture(t, "v010.prom")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/is_sleeping" {
			asked.Add(1)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(text)
	}))
	defer other.Close()
	reg = prometheus.NewPedanticRegistry()
	m = NewManager(testOptions(reg, nil))
	if err := m.Apply(configFor(t, other.URL, "10s", 4)); err != nil {
		t.Fatal(err)
	}
	s = m.target("a")
	for range 3 {
		if v, ok := level(); ok {
			t.Errorf("vllm_server_sleep_level = %g from a server without /is_sleeping", v)
		}
	}
	s.client.CloseIdleConnections()
	if n := asked.Load(); n != 1 {
		t.Errorf("/is_sleeping asked %d times over 3 scrapes, want once", n)
	}
}
