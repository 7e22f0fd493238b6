package discovery

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTargetFileErrorsNameNoGoTypes: a file SD document of the wrong shape is
// refused with the group, the key and the shapes, never a Go type.
func TestTargetFileErrorsNameNoGoTypes(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, body, want string }{
		{"object.json", `{"targets": ["a:1"]}`, "parsing JSON: an object where a list is expected"},
		{"third.json", "[\n{\"targets\": [\"a:1\"]},\n{\"targets\": [\"b:1\"]},\n{\"targets\": \"c:1\"}\n]\n",
			"parsing JSON: target group 2: key targets: a string where a list is expected"},
		{"labels.json", `[{"targets": ["a:1"], "labels": {"x": 1}}]`, "parsing JSON: target group 0: key labels: a number where a string is expected"},
		{"object.yml", "targets: [a:1]\n", "parsing YAML: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!map into a list"},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readTargetFile(p)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "targetgroup.")) {
			t.Errorf("%s names a Go type: %v", c.name, err)
		}
	}
}
