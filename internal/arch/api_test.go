package arch

import (
	"go/ast"
	"go/token"
	"sort"
	"strings"
	"testing"
)

// publicPackages are the module's packages another module may import.
// The configuration is one of them (config/, as blackbox_exporter's): the
// others take its types.
var publicPackages = []string{"config", "collector", "prober", "prober/probe"}

// apiInternalAllowed are the internal packages the public API may still
// name: none.
var apiInternalAllowed = []string{}

// TestPublicAPINamesNoInternalType: the exported API of the public packages
// (the signatures of exported functions and of exported methods of exported
// types, the fields of exported structs, the methods of exported interfaces,
// the types of exported variables and constants) names no type of an
// internal/ package, which another module could not name (see
// apiInternalAllowed): the public packages define small interfaces of their
// own (prober.ClientPool, probe.Scrubber, ...) for what they are given.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	var found []string
	names := 0
	for _, pkg := range publicPackages {
		for file, f := range parseDir(t, pkg) {
			pkgOf := importNames(f)
			report := func(what string, n ast.Node) {
				if n == nil {
					return
				}
				names++
				ast.Inspect(n, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					x, ok := sel.X.(*ast.Ident)
					if !ok {
						return true
					}
					p := pkgOf[x.Name]
					if strings.HasPrefix(p, "internal/") && !isAllowedInternal(p) {
						found = append(found, pkg+"/"+file+": "+what+" names "+p+"."+sel.Sel.Name)
					}
					return false
				})
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
						continue
					}
					name := d.Name.Name
					if d.Recv != nil {
						report(name+" (receiver)", d.Recv)
					}
					report(name, d.Type)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							exportedParts(s.Name.Name, s.Type, report)
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									report(n.Name, s.Type)
									for _, v := range s.Values {
										report(n.Name, v)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
	if names == 0 {
		t.Error("found no exported identifier in the public packages: the test reads the wrong files")
	}
}

// exportedParts reports the parts of an exported type that another package
// sees: an exported field's type, an exported interface method's signature,
// the whole of any other type (an alias, a func type, a map ...).
func exportedParts(name string, typ ast.Expr, report func(string, ast.Node)) {
	switch typ := typ.(type) {
	case *ast.StructType:
		for _, f := range typ.Fields.List {
			if len(f.Names) == 0 { // embedded: its exported fields are promoted
				report(name+" (embedded)", f.Type)
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					report(name+"."+n.Name, f.Type)
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range typ.Methods.List {
			if len(m.Names) == 0 {
				report(name+" (embedded)", m.Type)
				continue
			}
			for _, n := range m.Names {
				if n.IsExported() {
					report(name+"."+n.Name, m.Type)
				}
			}
		}
	default:
		report(name, typ)
	}
}

// exportedRecv: a method's receiver is an exported type (T, *T, T[P]).
func exportedRecv(recv *ast.FieldList) bool {
	if len(recv.List) != 1 {
		return false
	}
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && token.IsExported(id.Name)
}

func isAllowedInternal(p string) bool {
	for _, a := range apiInternalAllowed {
		if p == a {
			return true
		}
	}
	return false
}
