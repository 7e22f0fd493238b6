package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vllm-prober/vllm_prober/config"
)

// TestGeneratedTextFullText: Output receives the generated text up to 64 KiB;
// with FullText all of it, as vLLM's benchmark client keeps generated_text
// (bench --save-detailed). Result.Text stays the short excerpt either way.
func TestGeneratedTextFullText(t *testing.T) {
	// Five 20 KiB content events (100 KiB, past maxCapture), each a distinct
	// letter so that a lost or reordered event shows.
	var pieces []string
	for i := range 5 {
		pieces = append(pieces, strings.Repeat(string(rune('a'+i)), 20<<10))
	}
	want := strings.Join(pieces, "")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range pieces {
			ev, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "text": p}}})
			fmt.Fprintf(w, "data: %s\n\n", ev)
		}
		_, _ = io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer ts.Close()
	stream := func(full bool) (Result, string) {
		var out string
		res := Stream(context.Background(), ts.Client(), StreamRequest{BaseURL: ts.URL, Kind: config.ProberCompletions,
			Body: map[string]any{"model": "m", "prompt": "hi"}, Output: &out, FullText: full})
		return res, out
	}

	res, got := stream(true)
	if !res.Success || res.OutputTokens != 5 {
		t.Fatalf("full: success %v tokens %d (%s %s)", res.Success, res.OutputTokens, res.Reason, res.Err)
	}
	if got != want {
		t.Errorf("full: Output has %d bytes, want the whole %d", len(got), len(want))
	}
	if len(res.Text) > 2*maxTextExcerpt {
		t.Errorf("full: Text has %d bytes, want the excerpt", len(res.Text))
	}

	if _, got = stream(false); len(got) > maxCapture || !strings.HasPrefix(want, got) || got == "" {
		t.Errorf("bounded: Output has %d bytes, want a prefix of at most %d", len(got), maxCapture)
	}

	// A spec run for bench: the whole text through Call.Output.
	spec, err := Compile("m", config.Module{Prober: config.ProberCompletions, Prompt: "hi", MaxTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if res := spec.Run(context.Background(), ts.Client(), Call{BaseURL: ts.URL, Model: "m", Output: &out}); !res.Success || out != want {
		t.Errorf("spec: success %v, Output %d bytes, want %d", res.Success, len(out), len(want))
	}
}
