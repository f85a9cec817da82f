//go:build linux

package sandbox

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A program in a system directory (an Executa command of /bin/sh) has
// that directory as its install directory; on a merged-/usr system /bin
// is a link, which the namespaces level recreates inside and a second
// bind of the same path collided with ("symlink usr/bin /bin: file
// exists"). It runs at each level.
func TestProgramInASystemDirectory(t *testing.T) {
	for _, level := range Detect().Levels() {
		t.Run(string(level), func(t *testing.T) {
			out, errOut, err := runShell(t, level, "echo from-the-shell", -1)
			if err != nil {
				t.Fatalf("a program in /bin with /bin as its install directory: %v\n%s", err, errOut)
			}
			if !strings.Contains(out, "from-the-shell") {
				t.Fatalf("the shell said %q", out)
			}
		})
	}
}

// runShell runs /bin/sh -c script as a plugin at level (its install
// directory /bin), started under umask when it is not negative (the init
// inherits it at fork), and returns what it wrote and the sandbox's start
// error.
func runShell(t *testing.T, level Level, script string, umask int) (out, errOut string, err error) {
	t.Helper()
	dir, _ := pluginBinary(t)
	priv, err := os.MkdirTemp(dir, "private-")
	if err != nil {
		t.Fatal(err)
	}
	spec := withUID(t, Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, Dir: priv, InstallDir: "/bin"}, level)
	cmd, box, err := Command(spec, level, nil)
	if err != nil {
		t.Fatal(err)
	}
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if umask >= 0 {
		old := syscall.Umask(umask)
		err = cmd.Start()
		syscall.Umask(old)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	err = box.Start(context.Background())
	_ = cmd.Wait()
	if err == nil {
		box.Wait()
	}
	return o.String(), e.String(), err
}
