package probe

import "testing"

// TestToolCallAssembly: parallel tool calls streamed with interleaved
// indexes are assembled per index, the name and id from the first delta.
func TestToolCallAssembly(t *testing.T) {
	g := &generated{}
	for _, e := range []string{
		`{"choices":[{"delta":{"tool_calls":[{"id":"call-a","type":"function","index":0,"function":{"name":"a","arguments":""}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\": "}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"id":"call-b","type":"function","index":1,"function":{"name":"b","arguments":"{}"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
	} {
		g.add([]byte(e))
	}
	if len(g.calls) != 2 || g.calls[0].id != "call-a" || string(g.calls[0].args) != `{"x": 1}` || g.calls[1].name != "b" {
		t.Fatalf("assembled %+v", g.calls)
	}
	if s := g.summary(); s != `a({"x": 1}); b({})` {
		t.Errorf("summary %q", s)
	}
	// Older vLLM repeated the name of a named tool_choice in every delta.
	old := &generated{}
	for _, e := range []string{
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"get_weather","arguments":"{\"city\""}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"get_weather","arguments":": \"Paris\"}"}}]}}]}`,
	} {
		old.add([]byte(e))
	}
	if s := old.summary(); s != `get_weather({"city": "Paris"})` {
		t.Errorf("repeated names: summary %q", s)
	}
	// The shapes of vLLM's serving_chat.py (chat_completion_stream_generator):
	// tool_choice "required" (extract_tool_call_required_streaming) sends the
	// id, type, name and a first arguments fragment, then "name": null with
	// each further fragment; vLLM before DeltaToolCall's id default was
	// dropped gave every delta a fresh id; an "auto" tool parser (hermes) sends
	// the name alone first, and the role chunk has content "".
	for _, tc := range []struct {
		name, id string
		events   []string
		want     string
	}{
		{"required", "chatcmpl-tool-1", []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-1","type":"function","index":0,"function":{"name":"get_weather","arguments":"{\"city\": "}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":null,"arguments":"\"Paris\"}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		}, `get_weather({"city": "Paris"})`},
		{"fresh ids", "chatcmpl-tool-a", []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-a","type":"function","index":0,"function":{"name":"f","arguments":"{\"x\""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-b","type":"function","index":0,"function":{"arguments":": 1}"}}]}}]}`,
		}, `f({"x": 1})`},
		{"auto", "chatcmpl-tool-c", []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"function","id":"chatcmpl-tool-c","function":{"name":"f"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\": "}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2}"}}]}}]}`,
		}, `f({"x": 2})`},
	} {
		g := &generated{}
		for _, e := range tc.events {
			g.add([]byte(e))
		}
		if s := g.summary(); s != tc.want || len(g.calls) != 1 || g.calls[0].id != tc.id {
			t.Errorf("%s: summary %q, calls %+v", tc.name, s, g.calls)
		}
	}
}

// TestAnswerTextNeverLeaksSecrets: a model that repeats the API key in its
// answer does not put the key in the kept text, even where the text is cut.
