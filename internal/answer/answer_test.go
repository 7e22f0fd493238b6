package answer

import (
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

func TestCheck(t *testing.T) {
	schema := map[any]any{"type": "object", "required": []any{"n"}, "properties": map[any]any{"n": map[any]any{"type": "integer"}}}
	for _, tc := range []struct {
		name string
		spec Spec
		text string
		ok   bool
		why  string
	}{
		{"regex match", Spec{Regex: `\b42\b`}, "The answer is 42.", true, ""},
		{"regex miss", Spec{Regex: `^42$`}, " 42", false, "does not match regex ^42$"},
		{"equals trims", Spec{Equals: strp(" 4 ")}, "\n4  ", true, ""},
		{"equals differs", Spec{Equals: strp("4")}, "four", false, `the answer is not "4"`},
		{"one_of", Spec{OneOf: []string{"8", "eight"}}, " eight\n", true, ""},
		{"one_of none", Spec{OneOf: []string{"8", "eight"}}, "seven", false, `none of ["8","eight"]`},
		{"json_schema valid", Spec{JSONSchema: schema}, `{"n": 3}`, true, ""},
		{"json_schema wrong type", Spec{JSONSchema: schema}, `{"n": "3"}`, false, "does not match the schema"},
		{"json_schema not JSON", Spec{JSONSchema: schema}, `{"n": 3`, false, "not valid JSON"},
	} {
		c, err := Compile(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ok, why := c.Check(tc.text)
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s: Check(%q) = %v %q, want %v and %q", tc.name, tc.text, ok, why, tc.ok, tc.why)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		spec     Spec
		key, msg string
	}{
		{Spec{}, "", "set exactly one of"},
		{Spec{Regex: "a", Equals: strp("a")}, "", "(2 set)"},
		{Spec{Regex: "(a"}, "regex", "missing closing )"},
		{Spec{JSONSchema: "object"}, "json_schema", "must be an object or a boolean"},
		{Spec{JSONSchema: map[string]any{"type": "objekt"}}, "json_schema", "invalid schema"},
		{Spec{JSONSchema: map[string]any{"$ref": "http://127.0.0.1:1/s.json"}}, "json_schema", "external references are not supported"},
		{Spec{OneOf: []string{}}, "one_of", "at least one"},
		{Spec{OneOf: []string{"a", " "}}, "one_of[1]", "must not be empty"},
	} {
		_, err := Compile(tc.spec)
		fe, ok := err.(*FieldError)
		if !ok || fe.Key != tc.key || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Compile(%+v) = %v, want key %q and %q", tc.spec, err, tc.key, tc.msg)
		}
	}
}
