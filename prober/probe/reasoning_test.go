package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestTimeToFirstAnswer runs vllm_sim as a reasoning model
// (--reasoning-tokens=20): the first 20 chat deltas are reasoning_content,
// so TTFT ends at the first of them and the time to first answer token 20
// inter-token gaps later, TTFA = TTFT + 20 × ITL within 5 %; the usage's
// reasoning tokens are counted. Without reasoning, TTFA = TTFT.
func TestTimeToFirstAnswer(t *testing.T) {
	const reasoning, maxTokens = 20, 30
	for _, r := range []int{reasoning, 0} {
		_, ts, cfg := startSim(t, func(c *simulator.Config) {
			c.ReasoningTokens = r
			c.TTFT, c.ITL = 50*time.Millisecond, 10*time.Millisecond
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res := Stream(ctx, ts.Client(), StreamRequest{BaseURL: ts.URL, Kind: config.ProberChat,
			Body: map[string]any{"model": cfg.Model, "max_tokens": maxTokens, "ignore_eos": true,
				"messages": []map[string]any{{"role": "user", "content": "hi"}}}})
		cancel()
		if !res.Success {
			t.Fatalf("reasoning %d: probe failed: %s %s", r, res.Reason, res.Err)
		}
		want := res.TTFT + time.Duration(r)*cfg.ITL
		if d := res.TTFA - want; d < -want/20 || d > want/20 {
			t.Errorf("reasoning %d: time to first answer %s, want TTFT %s + %d × ITL %s = %s within 5 %%", r, res.TTFA, res.TTFT, r, cfg.ITL, want)
		}
		if res.ReasoningTokens != r || res.OutputTokens != maxTokens {
			t.Errorf("reasoning %d: %d reasoning tokens of %d output, want %d of %d", r, res.ReasoningTokens, res.OutputTokens, r, maxTokens)
		}
	}
}

// TestRequireAnswer: a chat module with require_answer fails a probe of a
// reasoning model (20 reasoning tokens) whose max_tokens (10) the reasoning
// uses up, with reason no_answer; with room for an answer (max_tokens 30) it
// succeeds, and without require_answer the reasoning-only probe succeeds.
func TestRequireAnswer(t *testing.T) {
	_, ts, cfg := startSim(t, func(c *simulator.Config) {
		c.ReasoningTokens = 20
		c.TTFT, c.ITL = 5*time.Millisecond, time.Millisecond
	})
	run := func(maxTokens int, require bool) Result {
		mod := config.Module{Prober: config.ProberChat, MaxTokens: maxTokens, IgnoreEOS: true, RequireAnswer: require,
			Messages: []config.Message{{Role: "user", Content: "Name three primes."}}}
		spec, err := Compile("reasoner", mod)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return spec.Run(ctx, ts.Client(), Call{BaseURL: ts.URL, Target: "sim", Model: cfg.Model})
	}
	if res := run(10, true); res.Success || res.Reason != ReasonNoAnswer || !strings.Contains(res.Err, "reasoning only") {
		t.Errorf("reasoning only, require_answer: success %v reason %q (%s), want no_answer", res.Success, res.Reason, res.Err)
	} else {
		t.Logf("reasoning only, require_answer: %s: %s", res.Reason, res.Err)
	}
	if res := run(30, true); !res.Success {
		t.Errorf("an answer after the reasoning, require_answer: %s %s, want success", res.Reason, res.Err)
	}
	if res := run(10, false); !res.Success {
		t.Errorf("reasoning only, no require_answer: %s %s, want success", res.Reason, res.Err)
	}
}
