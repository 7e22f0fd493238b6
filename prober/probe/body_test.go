package probe

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vllm-prober/vllm_prober/config"
)

// TestRequestBody: each kind's body, and the nonce at the front of the
// prompt (chat: of the first user message).
func TestRequestBody(t *testing.T) {
	var got map[string]any
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = nil
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("body %q: %v", b, err)
		}
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer ts.Close()
	run := func(mod config.Module) map[string]any {
		t.Helper()
		spec, err := Compile("m", mod)
		if err != nil {
			t.Fatal(err)
		}
		spec.Run(context.Background(), ts.Client(), Call{BaseURL: ts.URL, Model: "mdl"})
		return got
	}
	chat := config.Module{Prober: config.ProberChat, MaxTokens: 9, Temperature: 0.5, IgnoreEOS: true, Nonce: true,
		Messages:  []config.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "q"}},
		ExtraBody: map[string]any{"top_p": 0.9, "min_tokens": 2, "nested": map[any]any{"k": []any{map[any]any{"x": 1}}}},
	}
	b := run(chat)
	msgs, _ := b["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["content"] != "sys" || !strings.HasSuffix(msgs[1].(map[string]any)["content"].(string), " q") ||
		len(msgs[1].(map[string]any)["content"].(string)) != 12+2 {
		t.Errorf("messages %v: the nonce belongs at the front of the first user message", msgs)
	}
	if b["max_tokens"] != 9.0 || b["max_completion_tokens"] != 9.0 || b["ignore_eos"] != true || b["temperature"] != 0.5 || b["model"] != "mdl" || b["top_p"] != 0.9 ||
		b["stream"] != true {
		t.Errorf("chat body %v", b)
	}
	b = run(config.Module{Prober: config.ProberCompletions, Prompt: "p", MaxTokens: 3})
	if b["prompt"] != "p" || b["max_tokens"] != 3.0 || b["ignore_eos"] != nil || b["max_completion_tokens"] != nil {
		t.Errorf("completions body without nonce %v", b)
	}
	b = run(config.Module{Prober: config.ProberResponses, Prompt: "p", MaxTokens: 3, Nonce: true})
	if in, _ := b["input"].(string); !strings.HasSuffix(in, " p") || b["max_output_tokens"] != 3.0 || b["stream"] != true ||
		b["max_tokens"] != nil || b["prompt"] != nil || b["stream_options"] != nil {
		t.Errorf("responses body %v", b)
	}
	b = run(config.Module{Prober: config.ProberEmbeddings, Prompt: "p", MaxTokens: 1})
	if b["input"] != "p" || b["encoding_format"] != "float" || b["stream"] != nil {
		t.Errorf("embeddings body %v", b)
	}
}
