package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDaemonAndWebApart: the daemon runs the configuration and the
// managers, the web package serves pages from what web.Options give it, and
// internal/daemonweb (used by cmd/vllm_prober) joins them. Neither half
// imports the other, and the daemon does not link the rule generator (mixin)
// for the one threshold the pages colour.
func TestDaemonAndWebApart(t *testing.T) {
	for _, rule := range []struct {
		pkg       string
		forbidden []string
		why       string
	}{
		{"internal/daemon", []string{"internal/web", "internal/daemonweb"}, "the daemon serves the handler it is given; internal/daemonweb builds it"},
		{"internal/daemon", []string{"mixin"}, "the regression threshold reaches the pages through internal/daemonweb, not the daemon"},
		{"internal/web", []string{"internal/daemon", "internal/daemonweb", "internal/discovery", "internal/shard", "mixin"}, "the pages see the daemon through web.Options only"},
	} {
		got := deps(t, rule.pkg)
		for _, f := range rule.forbidden {
			if slices.Contains(got, f) {
				t.Errorf("%s imports %s: %s", rule.pkg, f, rule.why)
			}
		}
	}
}

// managerTypes are the types that own a part of the running daemon. The
// pages reach them through the small interfaces and functions of
// web.Options, so that what a page may read or do is listed in one place;
// web may import their packages for the values they return (a probe's
// result, a pair's statistics, a verdict), never name the owners.
var managerTypes = map[string][]string{
	"prober":              {"Manager", "Burster", "Options"},
	"collector":           {"Manager", "Options"},
	"internal/compare":    {"Collector", "Options"},
	"config":              {"SafeConfig"},
	"internal/httpclient": {"Pool", "New"},
	"internal/redact":     {"Redactor", "New"},
}

// TestWebNamesNoManager: no non-test file of internal/web names a manager
// type (managerTypes), or builds one.
func TestWebNamesNoManager(t *testing.T) {
	files := parseDir(t, "internal/web")
	selectors := 0
	for name, f := range files {
		pkgOf := importNames(f)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			pkg, ok := pkgOf[x.Name]
			if !ok {
				return true
			}
			selectors++
			if slices.Contains(managerTypes[pkg], sel.Sel.Name) {
				t.Errorf("internal/web/%s names %s.%s: the pages get what they need through web.Options", name, pkg, sel.Sel.Name)
			}
			return true
		})
	}
	if selectors == 0 {
		t.Error("found no use of the module's packages in internal/web: the test reads the wrong files")
	}
}

// parseDir parses the non-test Go files of the module's directory rel, by
// file name.
func parseDir(t *testing.T, rel string) map[string]*ast.File {
	t.Helper()
	dir := filepath.Join(root(t), rel)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = f
	}
	if len(files) == 0 {
		t.Fatalf("no Go file in %s", rel)
	}
	return files
}

// importNames maps the names f gives the module's packages to their paths
// within the module ("prober", "config").
func importNames(f *ast.File) map[string]string {
	names := map[string]string{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		rel, ok := strings.CutPrefix(p, module+"/")
		if !ok {
			continue
		}
		name := filepath.Base(rel)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = rel
	}
	return names
}
