package probe

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestPrefillTokens: a module's prefill_tokens puts a fresh random prefix of
// about that many tokens in front of every probe's prompt, which the
// simulator counts and prefills (PrefillPerToken), and the token estimate
// counts; without it the same module's prompt is short.
func TestPrefillTokens(t *testing.T) {
	_, ts, cfg := startSim(t, func(c *simulator.Config) {
		c.TTFT, c.ITL, c.PrefillPerToken = 5*time.Millisecond, time.Millisecond, 50*time.Microsecond
	})
	run := func(prefill int) Result {
		t.Helper()
		mod := config.Module{Prober: config.ProberCompletions, Prompt: "Name three primes.", MaxTokens: 2, IgnoreEOS: true, PrefillTokens: prefill}
		spec, err := Compile(mod.Prober, mod)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := spec.PromptEstimate(), prefill+1; got < want {
			t.Errorf("prefill_tokens %d: estimate %d, want at least %d", prefill, got, want)
		}
		res := spec.Run(t.Context(), ts.Client(), Call{BaseURL: ts.URL, Model: cfg.Model})
		if !res.Success {
			t.Fatalf("probe with prefill_tokens %d failed: %s", prefill, res.Err)
		}
		return res
	}
	short, long1, long2 := run(0), run(2000), run(2000)
	t.Logf("prompt tokens %d / %d, TTFT %v / %v", short.PromptTokens, long1.PromptTokens, short.TTFT, long1.TTFT)
	if short.PromptTokens > 20 || long1.PromptTokens < 2000 {
		t.Errorf("prompt tokens %d without and %d with prefill_tokens 2000", short.PromptTokens, long1.PromptTokens)
	}
	if long1.TTFT-short.TTFT < 50*time.Millisecond {
		t.Errorf("TTFT %v with the long prompt, %v without: the simulator's 100 ms of prefill does not show", long1.TTFT, short.TTFT)
	}
	if long1.RequestBody == long2.RequestBody {
		t.Errorf("two probes sent the same long prompt: no prefix cache may answer it\n%.200s", long1.RequestBody)
	}
}

// TestRandomWords: one word per token, drawn from the seed.
func TestRandomWords(t *testing.T) {
	a := RandomWords(rand.New(rand.NewPCG(1, 2)), 50)
	if n := len(strings.Fields(a)); n != 50 {
		t.Errorf("%d words, want 50", n)
	}
	if b := RandomWords(rand.New(rand.NewPCG(1, 2)), 50); a != b {
		t.Error("the same seed gave two prompts")
	}
}
