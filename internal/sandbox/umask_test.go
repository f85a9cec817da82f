//go:build linux

package sandbox

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A host started under a strict umask (a unit's UMask=0077, a hardened
// root shell's 077 or 027) still runs its plugins: the sandbox's own
// mount points are made traversable by the plugin's uid whatever the
// umask (they were made 0700, root's, and a root host's plugin could not
// even enter its directory), and the plugin keeps the host's umask.
func TestPluginRunsUnderAStrictUmask(t *testing.T) {
	for _, level := range Detect().Levels() {
		t.Run(string(level), func(t *testing.T) {
			dir, _ := pluginBinary(t)
			priv, err := os.MkdirTemp(dir, "private-")
			if err != nil {
				t.Fatal(err)
			}
			spec := withUID(t, Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "echo from-the-shell; umask"}, Dir: priv, InstallDir: "/bin"}, level)
			cmd, box, err := Command(spec, level, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errOut
			old := syscall.Umask(0o077) // the init inherits it at fork
			err = cmd.Start()
			syscall.Umask(old)
			if err != nil {
				t.Fatal(err)
			}
			if err := box.Start(context.Background()); err != nil {
				_ = cmd.Wait()
				t.Fatalf("a plugin started by a host under umask 077: %v\n%s", err, errOut.String())
			}
			_ = cmd.Wait()
			box.Wait()
			if got := out.String(); !strings.Contains(got, "from-the-shell") || !strings.Contains(got, "0077") {
				t.Fatalf("the plugin said %q (want its greeting and the host's umask 0077)\n%s", got, errOut.String())
			}
		})
	}
}
