package decodeerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// TestYAML11Strings: where a string is required and the YAML held a 1.1
// boolean (n, yes, on...) or a number, the error says so, names the key path
// and says to quote it; other errors stay as they are.
func TestYAML11Strings(t *testing.T) {
	var doc any
	if err := yaml.Unmarshal([]byte("type: object\nrequired: [n, 1.5, name]\nproperties: {a: {pattern: on}}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	base := errors.New("invalid schema: at '/required/0': got boolean, want string - at '/required/1': got number, want string" +
		" - at '/properties/a/pattern': got boolean, want string - at '/required/0': got boolean, want string")
	got := YAML11Strings(base, doc).Error()
	for _, want := range []string{
		`required[0] is the boolean false, not a string: YAML 1.1 reads an unquoted n, no, off and false (in any case) as false; quote the value (e.g. "n") where a string is meant`,
		`required[1] is the number 1.5, not a string: quote it ("1.5") where a string is meant`,
		`properties.a.pattern is the boolean true, not a string: YAML 1.1 reads an unquoted y, yes, on and true (in any case) as true; quote the value (e.g. "y")`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("error lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "required[0] is"); n != 1 {
		t.Errorf("required[0] hinted %d times, want once:\n%s", n, got)
	}
	if !errors.Is(YAML11Strings(base, doc), base) {
		t.Error("the hinted error does not wrap the original")
	}
	for _, e := range []error{
		errors.New("at '/type': got number, want object"),        // not about a string
		errors.New("at '/required/2': got boolean, want string"), // the value is a string: nothing to say
		errors.New("at '/nowhere': got boolean, want string"),
	} {
		if got := YAML11Strings(e, doc); got != e {
			t.Errorf("%v rewritten as %v", e, got)
		}
	}
	if YAML11Strings(nil, doc) != nil {
		t.Error("nil error rewritten")
	}
}
