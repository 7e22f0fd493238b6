package simulator

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Output faults: they change what a request generates, not how it streams.
const (
	FaultWrongAnswer   = "wrong_answer"      // a scripted answer is replaced by wrongAnswer
	FaultBrokenJSON    = "broken_json"       // structured output (JSON or tool arguments) loses its last byte
	FaultNoToolCall    = "no_tool_call"      // a request with tools is answered with text
	FaultZeroEmbedding = "zero_embedding"    // /v1/embeddings returns a vector of zeros
	FaultAdapterGone   = "adapter_not_found" // LoRA adapters stay listed but their requests 404
)

// adapterGone reports whether a request served under model (a LoRA
// adapter's name, not the base model) gets the adapter_not_found fault: the
// adapter is listed in /v1/models but vLLM no longer has it loaded.
func (s *Simulator) adapterGone(model string) bool {
	k := s.currentKnobs()
	return model != s.cfg.Model && k.Fault == FaultAdapterGone && s.drawFault(k)
}

// wrongAnswer is the text of the wrong_answer fault.
const wrongAnswer = "I am not sure."

// answers maps prompt substrings to scripted answers (--answers FILE).
type answers struct {
	keys []string // longest first, so the most specific key wins
	text map[string]string
}

// loadAnswers reads a JSON object {"prompt substring": "answer", ...}.
func loadAnswers(path string) (*answers, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading answers file: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("answers file %s: want a JSON object of prompt substrings to answers: %w", path, err)
	}
	a := &answers{text: m}
	for k := range m {
		if k == "" {
			return nil, fmt.Errorf("answers file %s: empty prompt key", path)
		}
		a.keys = append(a.keys, k)
	}
	slices.SortFunc(a.keys, func(x, y string) int {
		if len(x) != len(y) {
			return len(y) - len(x)
		}
		return strings.Compare(x, y)
	})
	return a, nil
}

// lookup returns the answer whose key the prompt contains.
func (a *answers) lookup(prompt string) (string, bool) {
	if a == nil {
		return "", false
	}
	for _, k := range a.keys {
		if strings.Contains(prompt, k) {
			return a.text[k], true
		}
	}
	return "", false
}

// toolSpec is one function tool of a chat request.
type toolSpec struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// outputSpec is what a request asks the output to be.
type outputSpec struct {
	prompt     string          // completions prompt, chat: the last user message
	jsonSchema json.RawMessage // response_format json_schema (or guided_json); "{}" for json_object
	tools      []toolSpec
	toolChoice json.RawMessage
}

// responseFormat is OpenAI's response_format.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// parse validates the structured-output fields of a request as vLLM does
// (400 on what it rejects) and records them.
func (o *outputSpec) parse(rf *responseFormat, guided json.RawMessage, tools []toolSpec, toolChoice json.RawMessage) error {
	switch {
	case rf != nil && rf.Type == "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
			return &apiError{400, "response_format json_schema needs json_schema.schema", strPtr("response_format")}
		}
		o.jsonSchema = rf.JSONSchema.Schema
	case rf != nil && rf.Type == "json_object":
		o.jsonSchema = json.RawMessage(`{"type":"object"}`)
	case rf != nil && rf.Type != "text" && rf.Type != "":
		return &apiError{400, fmt.Sprintf("response_format type %q is not supported", rf.Type), strPtr("response_format")}
	case len(guided) > 0 && string(guided) != "null":
		o.jsonSchema = guided
	}
	if o.jsonSchema != nil {
		var v any
		if json.Unmarshal(o.jsonSchema, &v) != nil {
			return &apiError{400, "the JSON schema is not valid JSON", strPtr("response_format")}
		}
		if _, ok := v.(string); ok { // guided_json may be a JSON string holding the schema
			o.jsonSchema = json.RawMessage(v.(string))
		}
	}
	o.tools = tools
	o.toolChoice = toolChoice
	if len(toolChoice) > 0 && string(toolChoice) != "null" && len(tools) == 0 {
		return &apiError{400, "When using `tool_choice`, `tools` must be set.", strPtr("tool_choice")}
	}
	if n := o.namedTool(); n != "" && o.tool(n) == nil {
		return &apiError{400, fmt.Sprintf("Tool '%s' has not been passed in `tools`.", n), strPtr("tool_choice")}
	}
	return nil
}

func (o *outputSpec) namedTool() string {
	var tc struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(o.toolChoice, &tc) != nil {
		return ""
	}
	return tc.Function.Name
}

func (o *outputSpec) tool(name string) *toolSpec {
	for i := range o.tools {
		if o.tools[i].Function.Name == name {
			return &o.tools[i]
		}
	}
	return nil
}

// script is a request's scripted output: its tokens as JSON string
// literals, plain text or the arguments of one tool call.
type script struct {
	pieces [][]byte
	tool   *toolSpec // the arguments are this tool's
	callID string
	finish string // finish_reason once every piece was sent
}

// buildScript decides what a request generates under the active output
// fault; nil means the default word stream.
func (s *Simulator) buildScript(g *genRequest, fault string) *script {
	o := &g.out
	// A tool call when tools are given and tool_choice is not "none": the
	// named tool, else the first (vLLM's tool parsers pick what the model
	// calls; the simulated model calls the first).
	if len(o.tools) > 0 && string(o.toolChoice) != `"none"` && fault != FaultNoToolCall && g.chat {
		t := &o.tools[0]
		finish := "tool_calls"
		if n := o.namedTool(); n != "" {
			t, finish = o.tool(n), "stop" // vLLM ends a named-function call with "stop"
		}
		args := string(marshalNoEscape(instance(t.Function.Parameters)))
		switch fault {
		case FaultWrongAnswer:
			args = "{}"
		case FaultBrokenJSON:
			args = args[:len(args)-1]
		}
		return &script{pieces: splitPieces(args), tool: t, finish: finish,
			callID: "chatcmpl-tool-" + strconv.FormatUint(hashString(g.id), 16)}
	}
	var text string
	switch a, ok := s.answers.lookup(o.prompt); {
	case o.jsonSchema != nil:
		text = string(marshalNoEscape(instance(o.jsonSchema)))
		if fault == FaultBrokenJSON {
			text = text[:len(text)-1]
		}
	case ok:
		text = a
	case s.cfg.Echo:
		text = o.prompt
	case len(o.tools) > 0 && fault == FaultNoToolCall:
		text = "I will answer without calling a tool."
	default:
		return nil
	}
	if fault == FaultWrongAnswer {
		text = wrongAnswer
	}
	return &script{pieces: splitPieces(text), finish: "stop"}
}

// splitPieces cuts text into tokens: words with their leading space, long
// words in runs of at most 8 bytes, each as a JSON string literal.
func splitPieces(text string) [][]byte {
	var out [][]byte
	for len(text) > 0 {
		n := 0
		for n < len(text) && text[n] == ' ' {
			n++
		}
		for n < len(text) && text[n] != ' ' && n < 8 {
			n++
		}
		if n == 0 {
			n = 1
		}
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		out = append(out, marshalNoEscape(text[:n]))
		text = text[n:]
	}
	if len(out) == 0 {
		out = append(out, []byte(`""`))
	}
	return out
}

// instance returns a deterministic value valid against a JSON schema: the
// first enum or const; objects with every property; arrays of minItems
// items; strings of minLength; numbers at their minimum. anyOf and oneOf
// take their first branch. It covers the schemas probes use; $ref is not
// resolved.
func instance(raw json.RawMessage) any {
	var sch map[string]any
	if json.Unmarshal(raw, &sch) != nil {
		return map[string]any{}
	}
	return instanceOf(sch)
}

func instanceOf(sch map[string]any) any {
	if c, ok := sch["const"]; ok {
		return c
	}
	if e, ok := sch["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if l, ok := sch[k].([]any); ok && len(l) > 0 {
			if m, ok := l[0].(map[string]any); ok {
				return instanceOf(m)
			}
		}
	}
	typ, _ := sch["type"].(string)
	if l, ok := sch["type"].([]any); ok && len(l) > 0 {
		typ, _ = l[0].(string)
	}
	if typ == "" {
		if _, ok := sch["properties"]; ok {
			typ = "object"
		}
	}
	num := func(k string) (float64, bool) { f, ok := sch[k].(float64); return f, ok }
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := sch["properties"].(map[string]any)
		for k, v := range props {
			if m, ok := v.(map[string]any); ok {
				out[k] = instanceOf(m)
			}
		}
		return out
	case "array":
		n, _ := num("minItems")
		items, _ := sch["items"].(map[string]any)
		out := make([]any, 0, int(n))
		for i := 0; i < int(max(n, 1)); i++ {
			out = append(out, instanceOf(items))
		}
		return out
	case "string":
		n, _ := num("minLength")
		return "sim" + strings.Repeat("x", max(0, int(n)-3))
	case "integer", "number":
		if v, ok := num("minimum"); ok {
			return v
		}
		if v, ok := num("exclusiveMinimum"); ok {
			return v + 1
		}
		if v, ok := num("maximum"); ok && v < 1 {
			return v
		}
		return 1
	case "boolean":
		return true
	case "null":
		return nil
	}
	return "sim"
}
