// Package answer compiles and applies the answer checks of probe modules
// (expect: regex, equals, json_schema, one_of) and the JSON schemas of
// structured output (response_format, tool parameters). Configuration
// validation and the prober use the same compiled form, so --config.check
// rejects exactly what a probe could not check.
package answer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/vllm-prober/vllm_prober/internal/decodeerr"
)

// Spec is one expected answer: exactly one of its fields is set.
type Spec struct {
	Regex      string
	Equals     *string
	JSONSchema any // decoded JSON or YAML value
	OneOf      []string
}

// FieldError is a problem with one key of a Spec; Key is the key's name
// (regex, equals, json_schema, one_of) or "" for the spec as a whole.
type FieldError struct {
	Key string
	Err error
}

func (e *FieldError) Error() string {
	if e.Key == "" {
		return e.Err.Error()
	}
	return e.Key + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Checker checks generated text against a Spec.
type Checker struct {
	desc   string
	re     *regexp.Regexp
	equals *string
	schema *jsonschema.Schema
	oneOf  []string
}

// Compile checks spec and returns its Checker. Errors are *FieldError.
func Compile(spec Spec) (*Checker, error) {
	n := 0
	if spec.Regex != "" {
		n++
	}
	if spec.Equals != nil {
		n++
	}
	if spec.JSONSchema != nil {
		n++
	}
	if spec.OneOf != nil {
		n++
	}
	if n != 1 {
		return nil, &FieldError{Err: fmt.Errorf("set exactly one of regex, equals, json_schema, one_of (%d set)", n)}
	}
	c := &Checker{}
	switch {
	case spec.Regex != "":
		re, err := regexp.Compile(spec.Regex)
		if err != nil {
			return nil, &FieldError{Key: "regex", Err: err}
		}
		c.re, c.desc = re, "regex "+spec.Regex
	case spec.Equals != nil:
		v := strings.TrimSpace(*spec.Equals)
		c.equals, c.desc = &v, fmt.Sprintf("equals %q", v)
	case spec.JSONSchema != nil:
		s, err := CompileSchema(spec.JSONSchema)
		if err != nil {
			return nil, &FieldError{Key: "json_schema", Err: err}
		}
		b, _ := json.Marshal(JSONable(spec.JSONSchema))
		c.schema, c.desc = s, "json_schema "+string(b)
	default:
		if len(spec.OneOf) == 0 {
			return nil, &FieldError{Key: "one_of", Err: errors.New("must list at least one answer")}
		}
		for i, a := range spec.OneOf {
			c.oneOf = append(c.oneOf, strings.TrimSpace(a))
			if c.oneOf[i] == "" {
				return nil, &FieldError{Key: fmt.Sprintf("one_of[%d]", i), Err: errors.New("must not be empty")}
			}
		}
		b, _ := json.Marshal(c.oneOf)
		c.desc = "one_of " + string(b)
	}
	return c, nil
}

// String says what the checker expects, for humans.
func (c *Checker) String() string { return c.desc }

// Check reports whether text is a correct answer; why says what was wrong.
// equals and one_of compare after trimming surrounding white space.
func (c *Checker) Check(text string) (ok bool, why string) {
	switch {
	case c.re != nil:
		if c.re.MatchString(text) {
			return true, ""
		}
		return false, "the answer does not match " + c.desc
	case c.equals != nil:
		if strings.TrimSpace(text) == *c.equals {
			return true, ""
		}
		return false, "the answer is not " + c.desc[len("equals "):]
	case c.schema != nil:
		if err := ValidateJSON(c.schema, text); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
	t := strings.TrimSpace(text)
	for _, a := range c.oneOf {
		if t == a {
			return true, ""
		}
	}
	return false, "the answer is none of " + c.desc[len("one_of "):]
}

// CompileSchema compiles a JSON schema given as a decoded JSON or YAML value.
// References are resolved within the document only: nothing is loaded from
// files or the network.
func CompileSchema(doc any) (*jsonschema.Schema, error) {
	switch doc.(type) {
	case map[string]any, map[any]any, bool:
	default:
		return nil, fmt.Errorf("a JSON schema must be an object or a boolean, got %T", doc)
	}
	b, err := json.Marshal(JSONable(doc))
	if err != nil {
		return nil, fmt.Errorf("encoding schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decoding schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const loc = "mem:///schema.json"
	if err := c.AddResource(loc, v); err != nil {
		return nil, fmt.Errorf("invalid schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		msg := strings.ReplaceAll(oneLine(err).Error(), `"`+loc+`#" `, "the schema ")
		// A YAML 1.1 boolean or number where the metaschema wants a string
		// ("required: [n]") is said as such, with the key path to quote.
		return nil, decodeerr.YAML11Strings(fmt.Errorf("invalid schema: %s", msg), doc)
	}
	return s, nil
}

// ValidateJSON parses text as one JSON value and validates it against s.
func ValidateJSON(s *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("does not match the schema: %w", oneLine(err))
	}
	return nil
}

// oneLine flattens the multi-line messages of jsonschema's errors.
func oneLine(err error) error {
	return errors.New(strings.Join(strings.Fields(err.Error()), " "))
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s: external references are not supported", url)
}

// JSONable converts YAML-decoded values (map[any]any) into JSON-encodable ones.
func JSONable(v any) any {
	switch v := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = JSONable(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = JSONable(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = JSONable(e)
		}
		return out
	}
	return v
}
