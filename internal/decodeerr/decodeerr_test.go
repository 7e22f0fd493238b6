package decodeerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	yaml "go.yaml.in/yaml/v2"
)

type inner struct {
	N    int               `yaml:"n"`
	On   bool              `yaml:"on"`
	L    []string          `yaml:"l"`
	M    map[string]string `yaml:"m"`
	S    string            `yaml:"s"`
	Deep *inner            `yaml:"deep"`
}

// TestYAML: decoding errors name the place and the expected YAML shape, not
// a Go type, and rewriting twice (nested sections) changes nothing more.
func TestYAML(t *testing.T) {
	for _, c := range []struct{ doc, where, want string }{
		{"x: 1", "in global", "yaml: unmarshal errors:\n  line 1: field x not found in global"},
		{"deep: {x: 1}", "", "yaml: unmarshal errors:\n  line 1: field x not found"},
		{"n: abc", "", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `abc` into a number"},
		{"on: 3", "", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `3` into true or false"},
		{"l: 3", "", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `3` into a list"},
		{"m: [1]", "", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into a mapping"},
		{"s: [1]", "", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into a string"},
		{"deep: 3", "", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `3` into a mapping"},
		{"[1]", "", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into a mapping"},
	} {
		var v inner
		err := YAML(yaml.UnmarshalStrict([]byte(c.doc), &v), c.where)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.doc, err, c.want)
			continue
		}
		if again := YAML(fmt.Errorf("section: %w", err), ""); again.Error() != "section: "+c.want {
			t.Errorf("%q rewritten twice: %v", c.doc, again)
		}
	}
	if err := YAML(nil, "x"); err != nil {
		t.Errorf("YAML(nil) = %v", err)
	}
}

// TestJSON: a JSON value of the wrong shape is reported by key and shapes,
// without a Go type; other errors pass unchanged.
func TestJSON(t *testing.T) {
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
		Port    int               `json:"port"`
	}
	for _, c := range []struct{ doc, want string }{
		{`{"targets": ["a:1"]}`, "an object where a list is expected"},
		{"[\n {\"targets\": \"a:1\"}]", "key targets: a string where a list is expected"},
		{`[{"labels": {"a": 1}}]`, "key labels: a number where a string is expected"},
		{`[{"port": "x"}]`, "key port: a string where a number is expected"},
		{`[{"targets": [true]}]`, "key targets: true or false where a string is expected"},
	} {
		var v []*group
		err := JSON(json.Unmarshal([]byte(c.doc), &v))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
	syntax := json.Unmarshal([]byte("[{"), new([]*group))
	if err := JSON(syntax); !errors.Is(err, syntax) {
		t.Errorf("a syntax error became %v", err)
	}
}
