package yamlerr

import (
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

// TestRewrite: decoding errors name the place and the expected YAML shape, not
// a Go type, and rewriting twice (nested sections) changes nothing more.
func TestRewrite(t *testing.T) {
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
		err := Rewrite(yaml.UnmarshalStrict([]byte(c.doc), &v), c.where)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.doc, err, c.want)
			continue
		}
		if again := Rewrite(fmt.Errorf("section: %w", err), ""); again.Error() != "section: "+c.want {
			t.Errorf("%q rewritten twice: %v", c.doc, again)
		}
	}
	if err := Rewrite(nil, "x"); err != nil {
		t.Errorf("Rewrite(nil) = %v", err)
	}
}
