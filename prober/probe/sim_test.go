package probe

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/simulator/simtest"
)

// startSim runs vllm_sim in-process behind a real HTTP server (simtest.Start).
func startSim(t *testing.T, mutate func(*simulator.Config)) (*simulator.Simulator, *httptest.Server, simulator.Config) {
	t.Helper()
	return simtest.Start(t, mutate)
}

type traceLine struct {
	RequestID    string `json:"request_id"`
	Event        int    `json:"event"`
	Kind         string `json:"kind"`
	Token        int    `json:"token"`
	TimeUnixNano int64  `json:"time_unix_nano"`
}

// readTrace returns the flush times of the "token" events of every request,
// ordered by event index.
func readTrace(t *testing.T, path string) map[string][]time.Time {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byID := map[string][]traceLine{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l traceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		if l.Kind == "token" {
			byID[l.RequestID] = append(byID[l.RequestID], l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string][]time.Time{}
	for id, ls := range byID {
		slices.SortFunc(ls, func(a, b traceLine) int { return a.Event - b.Event })
		for _, l := range ls {
			out[id] = append(out[id], time.Unix(0, l.TimeUnixNano))
		}
	}
	return out
}

// TestSimulatorTimings: TTFT, ITL and TPOT within 2 ms of the simulator's
// settings, and the event times, in the median, within 2 ms of its trace.
// The precision at p99 is figure P1 (perf/accuracy), not a unit test's.
func TestSimulatorTimings(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	_, ts, cfg := startSim(t, func(c *simulator.Config) { c.TraceFile = trace })
	const tokens = 40
	for _, kind := range []string{config.ProberCompletions, config.ProberChat, config.ProberResponses} {
		t.Run(kind, func(t *testing.T) {
			retryTiming(t, func() []string {
				var problems []string
				bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
				var ttfts, tpots, itls, eventErr []time.Duration
				type probe struct {
					id  string
					res Result
				}
				var probes []probe
				for i := range 5 {
					id := fmt.Sprintf("sim-%s-%d-%d", kind, i, time.Now().UnixNano())
					res := simSpec(t, kind, tokens).Run(context.Background(), ts.Client(),
						Call{BaseURL: ts.URL, Model: cfg.Model, RequestID: id, StallTimeout: 2 * time.Second})
					if !res.Success {
						t.Fatalf("probe failed: %s: %s", res.Reason, res.Err)
					}
					if res.OutputTokens != tokens || !res.OutputTokensFromUsage {
						t.Fatalf("output tokens %d (from usage %v), want %d from usage", res.OutputTokens, res.OutputTokensFromUsage, tokens)
					}
					probes = append(probes, probe{id, res})
					ttfts = append(ttfts, res.TTFT)
					tpots = append(tpots, res.TPOT)
					itls = append(itls, res.ITLs...)
				}
				tr := readTrace(t, trace)
				for _, p := range probes {
					flushes := tr[p.id]
					if len(flushes) != tokens {
						t.Fatalf("trace has %d token events for %s, want %d", len(flushes), p.id, tokens)
					}
					// The timeline records each content event at the moment
					// its bytes were read: the same moments TTFT and the ITLs
					// are measured from, exactly.
					var timeline []time.Duration
					for _, ev := range p.res.Events {
						if ev.Kind == EventContent {
							timeline = append(timeline, ev.Offset)
						}
					}
					if len(timeline) != tokens {
						t.Fatalf("timeline has %d content events, want %d", len(timeline), tokens)
					}
					off := p.res.TTFT
					for k := range flushes {
						if k > 0 {
							off += p.res.ITLs[k-1]
						}
						if timeline[k] != off {
							t.Fatalf("content event %d at %v in the timeline, %v by TTFT and ITLs", k+1, timeline[k], off)
						}
						eventErr = append(eventErr, absDur(p.res.Start.Add(off).Sub(flushes[k])))
					}
				}
				const tol = 2 * time.Millisecond
				// The simulator's TTFT counts from admission; ours includes the
				// request's transit, which the best of five keeps small.
				if d := absDur(slices.Min(ttfts) - cfg.TTFT); d > tol {
					bad("TTFT %v, set %v: off by %v", slices.Min(ttfts), cfg.TTFT, d)
				}
				if d := absDur(median(itls) - cfg.ITL); d > tol {
					bad("median ITL %v, set %v: off by %v", median(itls), cfg.ITL, d)
				}
				if d := absDur(median(tpots) - cfg.ITL); d > tol {
					bad("median TPOT %v, set %v: off by %v", median(tpots), cfg.ITL, d)
				}
				// The method, not the machine's precision (see TestStreamTimings).
				if p := median(eventErr); p > tol {
					bad("median |measured - trace| = %v over %d events", p, len(eventErr))
				}
				return problems
			})
		})
	}
}

// TestSimulatorFaults: each simulator fault (and error condition) maps to its reason.
func TestSimulatorFaults(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*simulator.Config)
		model  string
		prompt string
		maxTok int
		want   Reason
	}{
		{name: "http_status 500", mutate: func(c *simulator.Config) { c.Fault = simulator.FaultHTTPStatus }, want: ReasonHTTP5xx},
		{name: "http_status 503", mutate: func(c *simulator.Config) { c.Fault, c.FaultStatus = simulator.FaultHTTPStatus, 503 }, want: ReasonHTTP5xx},
		{name: "http_status 429", mutate: func(c *simulator.Config) { c.Fault, c.FaultStatus = simulator.FaultHTTPStatus, 429 }, want: ReasonRateLimited},
		{name: "http_status 403", mutate: func(c *simulator.Config) { c.Fault, c.FaultStatus = simulator.FaultHTTPStatus, 403 }, want: ReasonUnauthorized},
		{name: "http_status 418", mutate: func(c *simulator.Config) { c.Fault, c.FaultStatus = simulator.FaultHTTPStatus, 418 }, want: ReasonHTTP4xx},
		{name: "hang_before_headers", mutate: func(c *simulator.Config) { c.Fault = simulator.FaultHangBeforeHeaders }, want: ReasonTimeout},
		{name: "stall", mutate: func(c *simulator.Config) { c.Fault, c.FaultAfter = simulator.FaultStall, 3 }, want: ReasonStalled},
		{name: "stall before first token", mutate: func(c *simulator.Config) { c.Fault, c.FaultAfter = simulator.FaultStall, 0 }, want: ReasonStalled},
		{name: "cut_stream", mutate: func(c *simulator.Config) { c.Fault = simulator.FaultCutStream }, want: ReasonTruncated},
		{name: "malformed_chunk", mutate: func(c *simulator.Config) { c.Fault = simulator.FaultMalformedChunk }, want: ReasonMalformed},
		{name: "error_event", mutate: func(c *simulator.Config) { c.Fault = simulator.FaultErrorEvent }, want: ReasonStreamError},
		{name: "error_event flat", mutate: func(c *simulator.Config) { c.Fault, c.ErrorShape = simulator.FaultErrorEvent, simulator.ErrorShapeFlat }, want: ReasonStreamError},
		{name: "huge_line", mutate: func(c *simulator.Config) { c.Fault, c.HugeLineBytes = simulator.FaultHugeLine, 2<<20 }, want: ReasonMalformed},
		{name: "engine_dead", mutate: func(c *simulator.Config) { c.Fault = simulator.FaultEngineDead }, want: ReasonHTTP5xx},
		{name: "api key missing", mutate: func(c *simulator.Config) { c.APIKey = "sk-sim-secret" }, want: ReasonUnauthorized},
		{name: "unknown model", model: "no-such-model", want: ReasonModelNotFound},
		{name: "unknown model flat", mutate: func(c *simulator.Config) { c.ErrorShape = simulator.ErrorShapeFlat }, model: "no-such-model", want: ReasonModelNotFound},
		{name: "max_tokens over context", mutate: func(c *simulator.Config) { c.MaxModelLen = 64 }, maxTok: 100, want: ReasonContextLength},
		{name: "prompt over context", mutate: func(c *simulator.Config) { c.MaxModelLen = 64 }, prompt: strings.Repeat("many words ", 100), want: ReasonContextLength},
		{name: "legacy context wording", mutate: func(c *simulator.Config) { c.MaxModelLen, c.MetricsNames = 64, simulator.MetricsLegacy }, maxTok: 100, want: ReasonContextLength},
	}
	for _, tc := range tests {
		for _, kind := range []string{config.ProberCompletions, config.ProberChat, config.ProberResponses} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				_, ts, cfg := startSim(t, tc.mutate)
				model, prompt, maxTok := cfg.Model, "Hello", 8
				if tc.model != "" {
					model = tc.model
				}
				if tc.prompt != "" {
					prompt = tc.prompt
				}
				if tc.maxTok != 0 {
					maxTok = tc.maxTok
				}
				mod := config.Module{Prober: kind, MaxTokens: maxTok, IgnoreEOS: true}
				if kind == config.ProberChat {
					mod.Messages = []config.Message{{Role: "user", Content: prompt}}
				} else {
					mod.Prompt = prompt
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				// A short stall timeout where a stall is the point; elsewhere
				// one a loaded machine cannot reach while the simulator is
				// still writing (a 2 MiB line is one event).
				stall := 1500 * time.Millisecond
				if tc.want == ReasonStalled {
					stall = 300 * time.Millisecond
				}
				spec, err := Compile(kind, mod)
				if err != nil {
					t.Fatal(err)
				}
				res := spec.Run(ctx, ts.Client(), Call{BaseURL: ts.URL, Model: model, StallTimeout: stall})
				if res.Success || res.Reason != tc.want {
					t.Fatalf("success %v reason %q (%s), want %q", res.Success, res.Reason, res.Err, tc.want)
				}
				if strings.Contains(res.Err, "sk-sim-secret") {
					t.Errorf("err leaks the key: %q", res.Err)
				}
			})
		}
	}
}

// simSpec compiles a module of kind that asks for tokens tokens.
func simSpec(t *testing.T, kind string, tokens int) *Spec {
	t.Helper()
	mod := config.Module{Prober: kind, MaxTokens: tokens, IgnoreEOS: true}
	if kind == config.ProberChat {
		mod.Messages = []config.Message{{Role: "user", Content: "Name three primes."}}
	} else {
		mod.Prompt = "Name three primes."
	}
	spec, err := Compile(kind, mod)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}
