package mixin

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
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
	files, err := Render(spec, "mixin/slo.yml")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
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

// yamlQuote quotes s as a YAML (JSON) double-quoted scalar, for test files
// written by hand.
func yamlQuote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestRenderRoundTrips parses every rendered rule file with Prometheus' own
// rulefmt.Parse (which validates expressions and templates) and checks that it
// holds exactly the generator's rules: the YAML library quoted every string so
// that it reads back unchanged.
func TestRenderRoundTrips(t *testing.T) {
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(spec, "mixin/slo.yml")
	if err != nil {
		t.Fatal(err)
	}
	var got []rulefmt.Rule
	for _, name := range RuleFileNames() {
		rg, errs := rulefmt.Parse(files[name], false, model.UTF8Validation, parser.NewParser(parser.Options{}))
		if len(errs) > 0 {
			t.Fatalf("%s: %v", name, errs)
		}
		for _, g := range rg.Groups {
			got = append(got, g.Rules...)
		}
	}
	var want []Rule
	for _, g := range spec.Groups() {
		want = append(want, g.Rules...)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rules read back, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Record != w.Record || g.Alert != w.Alert || g.Expr != w.Expr || (w.Alert != "" && g.For != w.For) ||
			!maps.Equal(g.Labels, pairMap(w.Labels)) || !maps.Equal(g.Annotations, pairMap(w.Annotations)) {
			t.Errorf("rule %d (%s%s) reads back as %+v", i, w.Record, w.Alert, g)
		}
	}
}
