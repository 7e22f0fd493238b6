package prober

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/prober/probe"

	"github.com/vllm-prober/vllm_prober/config"
)

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
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(cfg); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, p := range m.pairs {
		for i := range 40 {
			r := &probe.Result{Start: start.Add(time.Duration(i) * time.Second), Success: i%2 == 0, Reason: probe.ReasonHTTP5xx, Err: "HTTP 500"}
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
