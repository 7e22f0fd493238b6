package prober

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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

// BenchmarkAllStats reads the pair statistics of 1,000 targets × 2 modules
// with full histories (20 recent probes and 20 failures each), as the
// landing page does on every render.
func BenchmarkAllStats(b *testing.B) {
	var yml strings.Builder
	yml.WriteString("modules:\n  a: {prober: completions, prompt: hi, max_tokens: 8}\n  b: {prober: completions, prompt: hi, max_tokens: 8}\ntargets:\n")
	for i := range 1000 {
		fmt.Fprintf(&yml, "  - {name: t%04d, url: 'http://127.0.0.1:1', model: m, modules: [a, b]}\n", i)
	}
	cfg, err := config.Load([]byte(yml.String()), "")
	if err != nil {
		b.Fatal(err)
	}
	m := NewManager(nil, nil)
	if err := m.Apply(cfg); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, p := range m.pairs {
		for i := range 40 {
			r := &Result{Start: start.Add(time.Duration(i) * time.Second), Success: i%2 == 0, Reason: ReasonHTTP5xx, Err: "HTTP 500"}
			if r.Success {
				r.Reason, r.Err = "", ""
			}
			m.record(p, r)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(m.AllStats()); n != 2000 {
			b.Fatalf("%d summaries", n)
		}
	}
}
