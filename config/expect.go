package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/vllm-prober/vllm_prober/internal/answer"
)

// ProberEmbeddings probes /v1/embeddings (pooling models).
const ProberEmbeddings = "embeddings"

// DefaultCheckSeed is the sampling seed of modules that check answers or
// structured output and set no seed of their own: with temperature 0 it
// makes the answer reproducible.
const DefaultCheckSeed = 1

// ModelsAll makes a target probe every model its /v1/models lists.
const ModelsAll = "all"

// Expect is the expected answer of a module or question: exactly one key.
type Expect struct {
	// Regex must match somewhere in the generated text (RE2 syntax).
	Regex string `yaml:"regex,omitempty"`
	// Equals is the whole answer after trimming surrounding white space.
	Equals *string `yaml:"equals,omitempty"`
	// JSONSchema: the generated text must be one JSON value valid against it.
	JSONSchema any `yaml:"json_schema,omitempty"`
	// OneOf lists accepted answers, each compared like equals.
	OneOf []string `yaml:"one_of,omitempty"`
}

// spec converts e for package answer (prober/probe has its own copy of this
// one line, since the public API names no internal type).
func (e *Expect) spec() answer.Spec {
	return answer.Spec{Regex: e.Regex, Equals: e.Equals, JSONSchema: e.JSONSchema, OneOf: e.OneOf}
}

// Question is one entry of a module's rotating questions: probes ask them in
// turn. Prompt replaces the module's prompt (chat: the content of its last
// user message).
type Question struct {
	Prompt string `yaml:"prompt"`
	Expect Expect `yaml:"expect"`
}

// ResponseFormat is the OpenAI response_format of a chat or completions
// module; vLLM enforces it with guided decoding.
type ResponseFormat struct {
	// Type is json_schema or json_object.
	Type       string          `yaml:"type" json:"type"`
	JSONSchema *JSONSchemaSpec `yaml:"json_schema,omitempty" json:"json_schema,omitempty"`
}

// JSONSchemaSpec is response_format.json_schema.
type JSONSchemaSpec struct {
	Name   string `yaml:"name" json:"name"`
	Schema any    `yaml:"schema" json:"schema"`
	Strict *bool  `yaml:"strict,omitempty" json:"strict,omitempty"`
}

// Tool is one OpenAI function tool of a chat module.
type Tool struct {
	Type     string       `yaml:"type" json:"type"`
	Function ToolFunction `yaml:"function" json:"function"`
}

// ToolFunction describes the function of a Tool.
type ToolFunction struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	Parameters  any    `yaml:"parameters,omitempty" json:"parameters,omitempty"`
}

// ChecksAnswers reports whether probes of m check the generated text.
func (m *Module) ChecksAnswers() bool { return m.Expect != nil || len(m.Questions) > 0 }

// ChecksStructure reports whether probes of m check structured output.
func (m *Module) ChecksStructure() bool { return m.ResponseFormat != nil || len(m.Tools) > 0 }

// ToolChoiceName is the function a named tool_choice asks for, else "".
func (m *Module) ToolChoiceName() string {
	if tc, ok := m.ToolChoice.(map[any]any); ok {
		if f, ok := tc["function"].(map[any]any); ok {
			s, _ := f["name"].(string)
			return s
		}
	}
	return ""
}

// ToolChoiceNone reports whether tool_choice is "none" (no call wanted).
func (m *Module) ToolChoiceNone() bool { s, _ := m.ToolChoice.(string); return s == "none" }

// applyCheckDefaults gives modules that check answers or structured output
// temperature 0, a fixed seed and ignore_eos false, unless the file sets
// them: a check needs a reproducible answer that ends where the model ends it.
func (m *Module) applyCheckDefaults(set map[string]any) {
	if !m.ChecksAnswers() && !m.ChecksStructure() {
		return
	}
	if _, ok := set["temperature"]; !ok {
		m.Temperature = 0
	}
	if _, ok := set["ignore_eos"]; !ok {
		m.IgnoreEOS = false
	}
	if m.Seed == nil {
		s := DefaultCheckSeed
		m.Seed = &s
	}
}

// validateChecks validates the keys of answer checks, structured output and
// embeddings. Its errors name the key's path, e.g. modules.math.expect.regex.
func (m *Module) validateChecks(name string) error {
	path := "modules." + name
	if m.Expect != nil && len(m.Questions) > 0 {
		return fmt.Errorf("%s: set expect or questions, not both (each question has its own expect)", path)
	}
	if m.Expect != nil {
		if _, err := answer.Compile(m.Expect.spec()); err != nil {
			return pathError(path+".expect", err)
		}
	}
	for i, q := range m.Questions {
		qp := fmt.Sprintf("%s.questions[%d]", path, i)
		if q.Prompt == "" {
			return fmt.Errorf("%s.prompt: is required", qp)
		}
		if _, err := answer.Compile(q.Expect.spec()); err != nil {
			return pathError(qp+".expect", err)
		}
	}
	if m.Prober == ProberEmbeddings {
		for _, k := range []struct {
			set bool
			key string
		}{{m.ChecksAnswers(), "expect and questions"}, {m.ResponseFormat != nil, "response_format"},
			{len(m.Tools) > 0 || m.ToolChoice != nil, "tools and tool_choice"}} {
			if k.set {
				return fmt.Errorf("%s: %s do not apply to prober embeddings", path, k.key)
			}
		}
		if m.ExpectedDimension < 0 {
			return fmt.Errorf("%s.expected_dimension: must not be negative, got %d", path, m.ExpectedDimension)
		}
		return nil
	}
	if m.ExpectedDimension != 0 {
		return fmt.Errorf("%s.expected_dimension: applies to prober embeddings only", path)
	}
	if m.Prober == ProberResponses && m.ResponseFormat != nil {
		// The Responses API asks for structured output in text.format.
		return fmt.Errorf("%s: response_format does not apply to prober responses", path)
	}
	if rf := m.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_schema":
			if rf.JSONSchema == nil || rf.JSONSchema.Schema == nil {
				return fmt.Errorf("%s.response_format.json_schema.schema: is required with type json_schema", path)
			}
			if rf.JSONSchema.Name == "" {
				return fmt.Errorf("%s.response_format.json_schema.name: is required", path)
			}
			if _, err := answer.CompileSchema(rf.JSONSchema.Schema); err != nil {
				return fmt.Errorf("%s.response_format.json_schema.schema: %w", path, err)
			}
		case "json_object":
			if rf.JSONSchema != nil {
				return fmt.Errorf("%s.response_format.json_schema: only with type json_schema", path)
			}
		default:
			return fmt.Errorf("%s.response_format.type: %q is not json_schema or json_object", path, rf.Type)
		}
	}
	if (len(m.Tools) > 0 || m.ToolChoice != nil) && m.Prober != ProberChat {
		return fmt.Errorf("%s: tools and tool_choice need prober chat", path)
	}
	var names []string
	for i, t := range m.Tools {
		tp := fmt.Sprintf("%s.tools[%d]", path, i)
		if t.Type != "function" {
			return fmt.Errorf("%s.type: %q is not function", tp, t.Type)
		}
		if t.Function.Name == "" {
			return fmt.Errorf("%s.function.name: is required", tp)
		}
		if slices.Contains(names, t.Function.Name) {
			return fmt.Errorf("%s.function.name: %q is listed twice", tp, t.Function.Name)
		}
		names = append(names, t.Function.Name)
		if t.Function.Parameters != nil {
			if _, err := answer.CompileSchema(t.Function.Parameters); err != nil {
				return fmt.Errorf("%s.function.parameters: %w", tp, err)
			}
		}
	}
	if m.ToolChoice != nil {
		if len(m.Tools) == 0 {
			return fmt.Errorf("%s.tool_choice: needs tools", path)
		}
		switch tc := m.ToolChoice.(type) {
		case string:
			if tc != "auto" && tc != "required" && tc != "none" {
				return fmt.Errorf("%s.tool_choice: %q is not auto, required, none or {type: function, function: {name: ...}}", path, tc)
			}
		case map[any]any:
			n := m.ToolChoiceName()
			if tc["type"] != "function" || n == "" {
				return fmt.Errorf("%s.tool_choice: must be {type: function, function: {name: ...}}", path)
			}
			if !slices.Contains(names, n) {
				return fmt.Errorf("%s.tool_choice.function.name: %q is not one of the module's tools", path, n)
			}
		default:
			return fmt.Errorf("%s.tool_choice: must be a string or {type: function, function: {name: ...}}", path)
		}
	}
	return nil
}

func pathError(path string, err error) error {
	var fe *answer.FieldError
	if errors.As(err, &fe) && fe.Key != "" {
		return fmt.Errorf("%s.%s: %w", path, fe.Key, fe.Err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// compileModels checks a target's models key: "all" or a regular expression
// that the listed model ids must match in full.
func compileModels(s string) (*regexp.Regexp, error) {
	if s == "" || s == ModelsAll {
		return nil, nil
	}
	if _, err := regexp.Compile(s); err != nil {
		return nil, fmt.Errorf("models: %q is neither %q nor a valid regular expression: %w", s, ModelsAll, err)
	}
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		return nil, fmt.Errorf("models: %q is neither %q nor a valid regular expression: %w", s, ModelsAll, err)
	}
	return re, nil
}

// ModelsMatcher returns whether a /v1/models id is probed on a target with
// models set; nil when the target probes one model.
func (t *Target) ModelsMatcher() func(id string) bool {
	if t.Models == "" {
		return nil
	}
	re, err := compileModels(t.Models)
	if err != nil || re == nil {
		return func(string) bool { return true }
	}
	return re.MatchString
}
