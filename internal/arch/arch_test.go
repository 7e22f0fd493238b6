// Package arch holds the tests of the repository's structure: which package
// may import which, and how the managers are built.
package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/vllm-prober/vllm_prober"

// root is the module's directory.
func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// deps lists every package pkg imports, directly or not (go list -deps),
// within the module.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/"+pkg)
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var own []string
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module+"/"); ok && rest != pkg {
			own = append(own, rest)
		}
	}
	return own
}

// TestImports: the collector reads its own source only, so it imports
// neither the prober nor compare, which joins the two; the probe package
// owns one request and imports nothing of the runner that schedules it.
func TestImports(t *testing.T) {
	for _, rule := range []struct {
		pkg       string
		forbidden []string
		why       string
	}{
		{"collector", []string{"prober", "prober/probe", "internal/compare"}, "the collector reads its own source; joins are compare's"},
		{"prober/probe", []string{"prober", "collector", "internal/compare", "internal/daemon"}, "one probe knows nothing of the runner"},
		{"prober", []string{"collector", "internal/compare", "internal/daemon"}, "the prober reads the collector's load through a function it is given"},
		{"internal/compare", []string{"internal/daemon"}, "compare joins the managers, it does not run them"},
		{"config", []string{"internal/discovery", "internal/daemon", "prober", "collector", "internal/compare", "internal/shard"}, "the configuration holds the discovery sections' types (Prometheus' own); nothing it configures is imported upward"},
		{"internal/discovery", []string{"internal/daemon", "prober", "collector", "internal/compare", "internal/shard"}, "discovery turns discovered groups into targets; sharding and applying them is the daemon's"},
		{"internal/shard", []string{"internal/discovery", "internal/daemon"}, "sharding hashes target names, nothing more"},
	} {
		got := deps(t, rule.pkg)
		for _, f := range rule.forbidden {
			if slices.Contains(got, f) {
				t.Errorf("%s imports %s: %s", rule.pkg, f, rule.why)
			}
		}
	}
}

// TestManagersHaveNoSetters: every manager is built from one options struct
// and changed only by applying configurations (ApplyConfig) and targets
// (SetTargets): no other exported Set* method, which would be called after
// construction.
func TestManagersHaveNoSetters(t *testing.T) {
	dir := root(t)
	for pkg, typ := range map[string]string{
		"prober": "Manager", "collector": "Manager", "internal/compare": "Collector",
	} {
		fset := token.NewFileSet()
		entries, err := os.ReadDir(filepath.Join(dir, pkg))
		if err != nil {
			t.Fatal(err)
		}
		methods := 0
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, pkg, e.Name()), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
					continue
				}
				recv := fn.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				methods++
				if name := fn.Name.Name; strings.HasPrefix(name, "Set") && name != "SetTargets" {
					t.Errorf("%s.%s has a setter, %s: build it from its options instead", pkg, typ, name)
				}
			}
		}
		if methods == 0 {
			t.Errorf("found no method of %s.%s: the test reads the wrong files", pkg, typ)
		}
	}
}

// TestOnlyDiscoveryBuildsDiscoverers: one place owns the discoverers'
// lifecycle, so that a reload keeps those whose configuration did not
// change. Prometheus' discovery manager (discovery.NewManager) is built once,
// in the daemon's discovery set-up (internal/daemon/targets.go), and builds
// and runs every discoverer; a service discovery section's NewDiscoverer is
// called only by internal/discovery's load-time check, which never runs
// what it builds.
func TestOnlyDiscoveryBuildsDiscoverers(t *testing.T) {
	dir := root(t)
	builders := map[string]string{"NewDiscoverer": "internal/discovery/check.go", "NewManager": "internal/daemon/targets.go"}
	calls := map[string]int{}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == "testdata" || strings.HasPrefix(e.Name(), ".")) {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		// The names the file gives Prometheus' discovery package.
		sd := map[string]bool{}
		for _, imp := range f.Imports {
			if strings.Trim(imp.Path.Value, `"`) == "github.com/prometheus/prometheus/discovery" {
				name := "discovery"
				if imp.Name != nil {
					name = imp.Name.Name
				}
				sd[name] = true
			}
		}
		rel, _ := filepath.Rel(dir, path)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || builders[sel.Sel.Name] == "" {
				return true
			}
			x, isIdent := sel.X.(*ast.Ident)
			if sel.Sel.Name == "NewManager" && (!isIdent || !sd[x.Name]) {
				return true // another package's NewManager
			}
			calls[sel.Sel.Name]++
			if want := builders[sel.Sel.Name]; filepath.ToSlash(rel) != want {
				t.Errorf("%s builds discoverers (%s): only %s does", rel, sel.Sel.Name, want)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range builders {
		if calls[name] != 1 {
			t.Errorf("%d calls of %s, want one (in %s): the test reads the wrong files, or a second place builds discoverers", calls[name], name, want)
		}
	}
}
