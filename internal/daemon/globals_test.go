package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// processGlobals are the calls that change state every part of the
// process shares: whoever makes them decides for everyone, so only main
// (or a function main calls once, named in mainOnly) may.
var processGlobals = map[string][]string{
	"redis":      {"SetLogger"},
	"signal":     {"Notify", "NotifyContext", "Ignore", "Reset"},
	"slog":       {"SetDefault", "SetLogLoggerLevel"},
	"log":        {"SetOutput", "SetFlags", "SetPrefix"},
	"os":         {"Setenv", "Unsetenv", "Chdir"},
	"prometheus": {"MustRegister", "Register", "Unregister"},
	"grpclog":    {"SetLoggerV2"},
	"debug":      {"SetGCPercent", "SetMemoryLimit", "SetMaxThreads"},
	"runtime":    {"GOMAXPROCS"},
	"otel":       {"SetTracerProvider", "SetMeterProvider"},
}

// mainOnly are the functions that exist for main to set a global once.
var mainOnly = map[string]bool{"daemon.LogRedis": true}

// The packages daemon wires set no process globals from their
// constructors or entry points, and assign no other package's
// variables: two Serves in one process (the tests run several) must not
// reach into each other.
func TestNoProcessGlobalsFromConstructors(t *testing.T) {
	for _, dir := range []string{".", "../../broker", "../../proxy", "../../tokens"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil || mainOnly[f.Name.Name+"."+fd.Name.Name] {
					continue
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.CallExpr:
						if pkg, fn, ok := pkgSelector(n.Fun); ok {
							for _, g := range processGlobals[pkg] {
								if fn == g {
									t.Errorf("%s: %s calls %s.%s", fset.Position(n.Pos()), fd.Name.Name, pkg, fn)
								}
							}
						}
					case *ast.AssignStmt:
						for _, lhs := range n.Lhs {
							if pkg, v, ok := pkgSelector(lhs); ok && isImported(f, pkg) {
								t.Errorf("%s: %s assigns %s.%s", fset.Position(n.Pos()), fd.Name.Name, pkg, v)
							}
						}
					}
					return true
				})
			}
		}
	}
}

// pkgSelector splits x.Sel where x is a bare identifier.
func pkgSelector(e ast.Expr) (pkg, sel string, ok bool) {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", "", false
	}
	id, ok := s.X.(*ast.Ident)
	if !ok || id.Obj != nil { // a local variable, not a package
		return "", "", false
	}
	return id.Name, s.Sel.Name, true
}

func isImported(f *ast.File, name string) bool {
	for _, im := range f.Imports {
		p := strings.Trim(im.Path.Value, `"`)
		if im.Name != nil && im.Name.Name == name || im.Name == nil && (filepath.Base(p) == name || strings.HasSuffix(p, "/"+name+"/v9")) {
			return true
		}
	}
	return false
}
