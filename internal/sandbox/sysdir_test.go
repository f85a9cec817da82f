//go:build linux

package sandbox

import (
	"context"
	"os"
	"strings"
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
			dir, _ := pluginBinary(t)
			priv, err := os.MkdirTemp(dir, "private-")
			if err != nil {
				t.Fatal(err)
			}
			spec := withUID(t, Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "echo from-the-shell"}, Dir: priv, InstallDir: "/bin"}, level)
			cmd, box, err := Command(spec, level, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := box.Start(context.Background()); err != nil {
				_ = cmd.Wait()
				t.Fatalf("a program in /bin with /bin as its install directory: %v", err)
			}
			_ = cmd.Wait()
			box.Wait()
			if !strings.Contains(out.String(), "from-the-shell") {
				t.Fatalf("the shell said %q", out.String())
			}
		})
	}
}
