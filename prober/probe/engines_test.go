package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
)

// TestProbeEachEngine probes vllm_sim --engine=X for every engine: TTFT
// within 10 % of the configured TTFT (best of five), the output token
// count right, from usage, from llama.cpp's timings, or counted from the
// content events and marked estimated where the engine sends neither
// (Triton); /health and /v1/models answer; a wrong model fails with
// model_not_found whatever the engine's error body.
func TestProbeEachEngine(t *testing.T) {
	const tokens = 12
	const ttft = 60 * time.Millisecond
	for _, engine := range simulator.EngineNames() {
		t.Run(engine, func(t *testing.T) {
			_, ts, cfg := startSim(t, func(c *simulator.Config) {
				c.Engine, c.TTFT, c.ITL = engine, ttft, 2*time.Millisecond
			})
			for _, kind := range []string{config.ProberCompletions, config.ProberChat} {
				best := time.Duration(1 << 62)
				for range 5 {
					res := simSpec(t, kind, tokens).Run(context.Background(), ts.Client(),
						Call{BaseURL: ts.URL, Model: cfg.Model, StallTimeout: 2 * time.Second})
					if !res.Success {
						t.Fatalf("%s probe failed: %s: %s", kind, res.Reason, res.Err)
					}
					if res.OutputTokens != tokens {
						t.Errorf("%s: output tokens %d, want %d", kind, res.OutputTokens, tokens)
					}
					est := res.OutputTokensEstimated()
					switch engine {
					case simulator.EngineTriton:
						if !est {
							t.Errorf("%s: no usage sent, count not marked estimated (usage %v, timings %v)", kind, res.OutputTokensFromUsage, res.OutputTokensFromTimings)
						}
					case simulator.EngineLlamaCpp:
						if !res.OutputTokensFromUsage && !res.OutputTokensFromTimings || est {
							t.Errorf("%s: llama.cpp's count not read from its last chunk (usage %v, timings %v)", kind, res.OutputTokensFromUsage, res.OutputTokensFromTimings)
						}
					default:
						if !res.OutputTokensFromUsage {
							t.Errorf("%s: output tokens not from the usage chunk", kind)
						}
					}
					best = min(best, res.TTFT)
				}
				t.Logf("%s: TTFT %v (best of 5), configured %v", kind, best, ttft)
				if d := absDur(best - ttft); d > ttft/10 {
					t.Errorf("%s: TTFT %v (best of 5), configured %v: off by %v, more than 10 %%", kind, best, ttft, d)
				}
			}
			if err := vllmapi.Health(context.Background(), ts.Client(), ts.URL, "/health"); err != nil {
				t.Errorf("/health: %v", err)
			}
			models, err := vllmapi.Models(context.Background(), ts.Client(), ts.URL, nil)
			if err != nil || !slices.ContainsFunc(models, func(m vllmapi.Model) bool { return m.ID == cfg.Model }) {
				t.Errorf("/v1/models = %+v, %v: want %s listed", models, err, cfg.Model)
			}
			res := simSpec(t, config.ProberChat, tokens).Run(context.Background(), ts.Client(),
				Call{BaseURL: ts.URL, Model: "no-such-model", StallTimeout: 2 * time.Second})
			if res.Success || res.Reason != ReasonModelNotFound || res.StatusCode != http.StatusNotFound {
				t.Errorf("wrong model: success %v, reason %s, status %d, err %q; want model_not_found", res.Success, res.Reason, res.StatusCode, res.Err)
			}
		})
	}
}

// TestProbeTimingsWithoutUsage: a llama.cpp stream whose last chunk has
// timings but no usage gives the count from timings.predicted_n, not
// estimated.
func TestProbeTimingsWithoutUsage(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bc\"},\"finish_reason\":\"length\"}],\"timings\":{\"prompt_n\":3,\"predicted_n\":3,\"predicted_ms\":1.5}}\n\n" +
		"data: [DONE]\n\n"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}))
	defer ts.Close()
	res := simSpec(t, config.ProberChat, 3).Run(context.Background(), ts.Client(), Call{BaseURL: ts.URL, Model: "m"})
	if !res.Success || res.OutputTokens != 3 || !res.OutputTokensFromTimings || res.OutputTokensEstimated() {
		t.Errorf("success %v (%s %s), output %d, from timings %v, estimated %v; want 3 from timings",
			res.Success, res.Reason, res.Err, res.OutputTokens, res.OutputTokensFromTimings, res.OutputTokensEstimated())
	}
}

// TestProbeContextLengthEachEngine: a prompt longer than the context fails
// with context_length on every engine, in each one's own words (SGLang's
// and llama-server's differ from vLLM's); max_tokens beyond the context
// does too, except on llama.cpp, which stops generating at the end of the
// context: a success with fewer tokens.
func TestProbeContextLengthEachEngine(t *testing.T) {
	words := map[string]string{
		simulator.EngineSGLang:   "is longer than the model's context length",
		simulator.EngineLlamaCpp: "exceed_context_size_error: request (",
	}
	for _, engine := range simulator.EngineNames() {
		t.Run(engine, func(t *testing.T) {
			_, ts, cfg := startSim(t, func(c *simulator.Config) { c.Engine, c.MaxModelLen = engine, 64 })
			long, err := Compile(config.ProberCompletions, config.Module{Prober: config.ProberCompletions, MaxTokens: 4,
				Prompt: strings.Repeat("many words ", 100)})
			if err != nil {
				t.Fatal(err)
			}
			res := long.Run(context.Background(), ts.Client(), Call{BaseURL: ts.URL, Model: cfg.Model, StallTimeout: 2 * time.Second})
			if res.Success || res.Reason != ReasonContextLength || res.StatusCode != http.StatusBadRequest {
				t.Errorf("prompt over the context: success %v, reason %s, status %d, err %q; want context_length", res.Success, res.Reason, res.StatusCode, res.Err)
			}
			if w, ok := words[engine]; ok && !strings.Contains(res.Err, w) {
				t.Errorf("prompt over the context: %q, want %s's words %q", res.Err, engine, w)
			}
			res = simSpec(t, config.ProberChat, 100).Run(context.Background(), ts.Client(),
				Call{BaseURL: ts.URL, Model: cfg.Model, StallTimeout: 2 * time.Second})
			if engine == simulator.EngineLlamaCpp {
				if !res.Success || res.OutputTokens == 0 || res.OutputTokens >= 100 {
					t.Errorf("max_tokens over the context on llama.cpp: success %v (%s %s), %d tokens; want a success cut at the context", res.Success, res.Reason, res.Err, res.OutputTokens)
				}
				return
			}
			if res.Success || res.Reason != ReasonContextLength {
				t.Errorf("max_tokens over the context: success %v, reason %s, err %q; want context_length", res.Success, res.Reason, res.Err)
			}
		})
	}
}
