//go:build linux

package sandbox

import (
	"strings"
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
			out, errOut, err := runShell(t, level, "echo from-the-shell; umask", 0o077)
			if err != nil {
				t.Fatalf("a plugin started by a host under umask 077: %v\n%s", err, errOut)
			}
			if !strings.Contains(out, "from-the-shell") || !strings.Contains(out, "0077") {
				t.Fatalf("the plugin said %q (want its greeting and the host's umask 0077)\n%s", out, errOut)
			}
		})
	}
}
