package probe

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/answer"
)

// maxCapture bounds the generated text a probe keeps for its checks.
const maxCapture = 64 << 10

// generated is the text and the tool calls of a stream, assembled from its
// deltas. Only probes that check their output capture it.
type generated struct {
	text      strings.Builder
	calls     []toolCall
	overflow  bool
	unbounded bool // keep the whole text (StreamRequest.FullText)
}

// toolCall is one tool call assembled from vLLM's streamed deltas: the first
// delta of a call carries its index, id, type and function.name (and maybe a
// first arguments fragment); later deltas carry the index and further
// fragments of function.arguments (vLLM's serving_chat.py,
// chat_completion_stream_generator; OpenAI's streaming format).
type toolCall struct {
	index int
	id    string
	name  string
	args  []byte
}

// captureChunk is the part of a stream event the capture reads.
type captureChunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content   string          `json:"content"`
			ToolCalls []toolCallDelta `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
}

// toolCallDelta is one element of a delta's tool_calls.
type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// add records the text and tool-call fragments of one event. The event was
// already decoded once by the reader, so an error here cannot happen on
// valid JSON; it is ignored.
func (g *generated) add(data []byte) {
	var c captureChunk
	if json.Unmarshal(data, &c) != nil {
		return
	}
	for _, ch := range c.Choices {
		g.write(&g.text, ch.Text)
		g.write(&g.text, ch.Delta.Content)
		g.addToolCalls(ch.Delta.ToolCalls)
	}
}

// addToolCalls records the tool-call fragments of one delta.
func (g *generated) addToolCalls(deltas []toolCallDelta) {
	for _, d := range deltas {
		tc := g.call(d.Index)
		if tc == nil {
			continue
		}
		if d.ID != "" && tc.id == "" {
			tc.id = d.ID
		}
		// The name comes whole in the first delta; vLLM before the
		// function_name_returned fix (serving_chat.py) repeated it in
		// every delta of a named tool_choice, so later ones are ignored.
		if tc.name == "" {
			tc.name = d.Function.Name
		}
		if len(tc.args)+len(d.Function.Arguments) > maxCapture {
			g.overflow = true
		} else {
			tc.args = append(tc.args, d.Function.Arguments...)
		}
	}
}

func (g *generated) write(b *strings.Builder, s string) {
	if s == "" {
		return
	}
	if !g.unbounded && b.Len()+len(s) > maxCapture {
		g.overflow = true
		return
	}
	b.WriteString(s)
}

// call returns the call with index i, adding it on its first delta.
func (g *generated) call(i int) *toolCall {
	for k := range g.calls {
		if g.calls[k].index == i {
			return &g.calls[k]
		}
	}
	if len(g.calls) >= 16 {
		g.overflow = true
		return nil
	}
	g.calls = append(g.calls, toolCall{index: i})
	return &g.calls[len(g.calls)-1]
}

// summary is the generated output as the debug report shows it: the text,
// else the tool calls as name(arguments).
func (g *generated) summary() string {
	if g.text.Len() > 0 || len(g.calls) == 0 {
		return g.text.String()
	}
	var b strings.Builder
	for i := range g.calls {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s(%s)", g.calls[i].name, g.calls[i].args)
	}
	return b.String()
}

// structure checks the structured output a module asks for.
type structure struct {
	schema   *jsonschema.Schema // response_format json_schema; nil for json_object
	jsonOnly bool               // response_format given: the text must be JSON
	tools    map[string]*jsonschema.Schema
	named    string // tool_choice names this function
	wantCall bool   // tools given and tool_choice is not "none"
}

func compileStructure(mod *config.Module) (*structure, error) {
	if !mod.ChecksStructure() {
		return nil, nil
	}
	st := &structure{named: mod.ToolChoiceName()}
	if rf := mod.ResponseFormat; rf != nil {
		st.jsonOnly = true
		if rf.JSONSchema != nil {
			s, err := answer.CompileSchema(rf.JSONSchema.Schema)
			if err != nil {
				return nil, fmt.Errorf("response_format: %w", err)
			}
			st.schema = s
		}
	}
	if len(mod.Tools) > 0 {
		st.tools = map[string]*jsonschema.Schema{}
		st.wantCall = !mod.ToolChoiceNone()
		for _, t := range mod.Tools {
			var s *jsonschema.Schema
			if t.Function.Parameters != nil {
				var err error
				if s, err = answer.CompileSchema(t.Function.Parameters); err != nil {
					return nil, fmt.Errorf("tool %s: %w", t.Function.Name, err)
				}
			}
			st.tools[t.Function.Name] = s
		}
	}
	return st, nil
}

// check returns why the output is not the structured output asked for, ""
// when it is. With tools it returns, as checked, the text the answer check
// applies to: the first call's arguments.
func (st *structure) check(g *generated) (why, checked string) {
	checked = g.text.String()
	if g.overflow {
		return "the output exceeds what a probe keeps (64 KiB or 16 tool calls)", checked
	}
	if st.wantCall {
		if len(g.calls) == 0 {
			return "no tool call in the response", checked
		}
		for i := range g.calls {
			c := &g.calls[i]
			schema, ok := st.tools[c.name]
			switch {
			case !ok:
				return fmt.Sprintf("tool call %d names %q, which is not one of the module's tools", c.index, c.name), checked
			case st.named != "" && c.name != st.named:
				return fmt.Sprintf("tool call %d names %q, tool_choice asked for %q", c.index, c.name, st.named), checked
			}
			if err := validJSON(schema, string(c.args)); err != nil {
				return fmt.Sprintf("tool call %d (%s): arguments: %v", c.index, c.name, err), checked
			}
		}
		return "", string(g.calls[0].args)
	}
	if st.jsonOnly {
		if err := validJSON(st.schema, checked); err != nil {
			return "output: " + err.Error(), checked
		}
	}
	return "", checked
}

// validJSON checks that text is one JSON value, valid against schema if any.
func validJSON(schema *jsonschema.Schema, text string) error {
	if schema != nil {
		return answer.ValidateJSON(schema, text)
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	return nil
}

// addStructureFields puts a module's response_format, tools, tool_choice and
// seed into a request body.
func addStructureFields(body map[string]any, mod *config.Module) {
	if mod.Seed != nil {
		body["seed"] = *mod.Seed
	}
	if rf := mod.ResponseFormat; rf != nil {
		v := map[string]any{"type": rf.Type}
		if rf.JSONSchema != nil {
			js := map[string]any{"name": rf.JSONSchema.Name, "schema": answer.JSONable(rf.JSONSchema.Schema)}
			if rf.JSONSchema.Strict != nil {
				js["strict"] = *rf.JSONSchema.Strict
			}
			v["json_schema"] = js
		}
		body["response_format"] = v
	}
	if len(mod.Tools) > 0 {
		tools := make([]any, len(mod.Tools))
		for i, t := range mod.Tools {
			f := map[string]any{"name": t.Function.Name}
			if t.Function.Description != "" {
				f["description"] = t.Function.Description
			}
			if t.Function.Parameters != nil {
				f["parameters"] = answer.JSONable(t.Function.Parameters)
			}
			tools[i] = map[string]any{"type": t.Type, "function": f}
		}
		body["tools"] = tools
	}
	if mod.ToolChoice != nil {
		body["tool_choice"] = answer.JSONable(mod.ToolChoice)
	}
}
