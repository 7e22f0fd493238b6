package mixin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite alerts/ rule files and dashboards/ from the generator")

// repoRoot is the repository root relative to this package's directory.
const repoRoot = ".."

func root(p string) string { return filepath.Join(repoRoot, filepath.FromSlash(p)) }

// TestRulesUpToDate asserts that the committed rule files are exactly the
// generator's default output for the committed mixin/slo.yml.
func TestRulesUpToDate(t *testing.T) {
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range Render(spec, "mixin/slo.yml") {
		path := root("alerts/" + name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./mixin/... -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the output of the generator for mixin/slo.yml; run `go test ./mixin/... -update` or `vllm_prober rules generate`", path)
		}
	}
}
