package prober

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

// TestGeneratedTextFullText: Capture keeps the generated text up to 64 KiB;
// FullText keeps all of it, as vLLM's benchmark client keeps generated_text
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
	stream := func(capture, full bool) Result {
		return Stream(context.Background(), ts.Client(), StreamRequest{BaseURL: ts.URL, Kind: config.ProberCompletions,
			Body: map[string]any{"model": "m", "prompt": "hi"}, Capture: capture, FullText: full})
	}

	res := stream(true, true)
	if !res.Success || res.OutputTokens != 5 {
		t.Fatalf("full: success %v tokens %d (%s %s)", res.Success, res.OutputTokens, res.Reason, res.Err)
	}
	if got := res.GeneratedText(); got != want {
		t.Errorf("full: GeneratedText has %d bytes, want the whole %d", len(got), len(want))
	}
	if len(res.Text) > 2*maxTextExcerpt {
		t.Errorf("full: Text has %d bytes, want the excerpt", len(res.Text))
	}

	res = stream(true, false)
	if got := res.GeneratedText(); len(got) > maxCapture || !strings.HasPrefix(want, got) || got == "" {
		t.Errorf("bounded: GeneratedText has %d bytes, want a prefix of at most %d", len(got), maxCapture)
	}
	if res = stream(false, false); res.GeneratedText() != "" {
		t.Errorf("without Capture: GeneratedText = %d bytes, want none", len(res.GeneratedText()))
	}
}
