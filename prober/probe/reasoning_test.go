package probe

import (
	"context"
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
