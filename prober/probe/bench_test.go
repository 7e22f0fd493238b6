package probe

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/vllm-prober/vllm_prober/config"
)

// A 256-token chat stream as vLLM sends it.
var benchStream = func() string {
	var b strings.Builder
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	for range 256 {
		b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"total_tokens":266,"completion_tokens":256}}` + "\n\ndata: [DONE]\n\n")
	return b.String()
}()

func BenchmarkSSEReader(b *testing.B) {
	b.SetBytes(int64(len(benchStream)))
	for b.Loop() {
		s := newSSEReader(strings.NewReader(benchStream))
		for {
			if _, err := s.next(); err != nil {
				break
			}
		}
	}
}

// BenchmarkStream is the client-side cost of measuring one 256-token stream
// (an in-memory transport: no network).
func BenchmarkStream(b *testing.B) {
	client := &http.Client{Transport: bodyTransport(benchStream)}
	b.SetBytes(int64(len(benchStream)))
	for b.Loop() {
		res := Stream(context.Background(), client, StreamRequest{BaseURL: "http://bench", Kind: config.ProberChat, Body: map[string]any{}})
		if !res.Success {
			b.Fatal(res.Err)
		}
	}
}

// BenchmarkStreamFullText is BenchmarkStream keeping the whole text, as
// bench --save-detailed does (and, bounded, a module with output checks).
func BenchmarkStreamFullText(b *testing.B) {
	client := &http.Client{Transport: bodyTransport(benchStream)}
	b.SetBytes(int64(len(benchStream)))
	for b.Loop() {
		var out string
		res := Stream(context.Background(), client, StreamRequest{BaseURL: "http://bench", Kind: config.ProberChat, Body: map[string]any{}, FullText: true, Output: &out})
		if !res.Success || len(out) != 256*len(" word") {
			b.Fatalf("success %v, %d bytes of text", res.Success, len(out))
		}
	}
}
