//go:build linux

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Binary is a Go package a test package builds once in TestMain: a
// plugin, an attacker, the airlock command itself.
type Binary struct {
	Path  *string  // set to the built binary's path
	Pkg   string   // the package to build, relative to the test's directory
	Name  string   // the file's name; the package directory's when empty
	Flags []string // extra go build flags (-race)
}

// Binaries builds bins into one new directory and returns it; the caller
// removes it after m.Run. The directory is world-readable because a root
// host runs sandboxed plugins as an unprivileged uid. A failed build ends
// the test binary with the compiler's output.
func Binaries(prefix string, bins ...Binary) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Chmod(dir, 0o755)
	for _, b := range bins {
		name := b.Name
		if name == "" {
			name = filepath.Base(filepath.Clean(b.Pkg))
		}
		*b.Path = filepath.Join(dir, name)
		args := append(append([]string{"build"}, b.Flags...), "-o", *b.Path, b.Pkg)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.Pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	return dir
}
