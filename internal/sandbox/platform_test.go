//go:build linux

package sandbox

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// linuxOnly are the packages that need Linux system calls; everything that
// runs a plugin imports one of them, so Airlock as a whole is Linux only.
var linuxOnly = []string{"internal/peerauth", "internal/sandbox", "internal/supervise", "internal/testenv"}

// On any other system each Linux-only package is reduced to one file that
// stops the build with a sentence saying Airlock runs on Linux only, not a
// list of undefined system calls from whichever file compiled first.
func TestOtherSystemsGetAClearMessage(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, goos := range []string{"darwin", "windows", "freebsd"} {
		ctx := build.Default
		ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = goos, "amd64", false
		for _, pkg := range linuxOnly {
			t.Run(goos+"/"+pkg, func(t *testing.T) {
				p, err := ctx.ImportDir(filepath.Join(root, pkg), 0)
				if err != nil {
					t.Fatal(err)
				}
				files := slices.Concat(p.GoFiles, p.TestGoFiles, p.XTestGoFiles)
				if !slices.Equal(files, []string{"unsupported.go"}) {
					t.Fatalf("files built on %s: %v; want only unsupported.go (add //go:build linux to the others)", goos, files)
				}
				err = typeCheck(filepath.Join(p.Dir, "unsupported.go"))
				if err == nil || !strings.Contains(err.Error(), "Airlock runs on Linux only: ") {
					t.Fatalf("build error on %s = %v; want one that says Airlock runs on Linux only", goos, err)
				}
			})
		}
	}
	// And on Linux the stop file is left out.
	for _, pkg := range linuxOnly {
		p, err := build.Default.ImportDir(filepath.Join(root, pkg), 0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(p.GoFiles, "unsupported.go") || !slices.Contains(p.IgnoredGoFiles, "unsupported.go") {
			t.Errorf("%s: unsupported.go is built on Linux (GoFiles %v)", pkg, p.GoFiles)
		}
	}
}

func typeCheck(path string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return err
	}
	_, err = (&types.Config{}).Check(f.Name.Name, fset, []*ast.File{f}, nil)
	return err
}
