package compare

import (
	"testing"

	"github.com/vllm-prober/vllm_prober/collector"
)

// TestServerModelOf: the probes of a model are joined with its own server
// figures, a LoRA adapter's base model's, the same name in another case
// (Dynamo's frontend lower-cases its model label) or the one model a
// server reports under another name (Triton's model name, llama.cpp).
func TestServerModelOf(t *testing.T) {
	// Base is what /v1/models lists, as the collector reads it: every
	// served model mapped to itself, an adapter to its base.
	view := func(names ...string) *collector.View {
		v := &collector.View{Base: map[string]string{"adapter": "base", "Qwen/Qwen3-0.6B": "Qwen/Qwen3-0.6B",
			"ensemble": "ensemble", "Adapter-Of-Lower": "Qwen/Qwen3-0.6B"}}
		for _, n := range names {
			v.Models = append(v.Models, collector.ModelView{Name: n})
		}
		return v
	}
	for _, tc := range []struct {
		name  string
		v     *collector.View
		probe string
		want  string
	}{
		{"same name", view("a", "b"), "b", "b"},
		{"adapter", view("base", "other"), "adapter", "base"},
		{"case", view("qwen/qwen3-0.6b", "x"), "Qwen/Qwen3-0.6B", "qwen/qwen3-0.6b"},
		{"only model", view("tensorrt_llm"), "ensemble", "tensorrt_llm"},
		{"adapter of a model in another case", view("qwen/qwen3-0.6b", "x"), "Adapter-Of-Lower", "qwen/qwen3-0.6b"},
		{"no match among several", view("a", "b"), "c", "c"},
	} {
		if got := serverModelOf(tc.v, tc.probe); got != tc.want {
			t.Errorf("%s: serverModelOf(%q) = %q, want %q", tc.name, tc.probe, got, tc.want)
		}
	}
}
