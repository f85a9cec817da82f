//go:build linux

package sandbox

import (
	"path/filepath"
	"testing"
)

// withUID gives spec the uid of its own a root host must run it under,
// claimed in a claims directory of the test's own (nothing on an
// unprivileged host).
func withUID(tb testing.TB, spec Spec, level Level) Spec {
	tb.Helper()
	spec, err := claimTestUID(tb.TempDir(), spec, level)
	if err != nil {
		tb.Fatal(err)
	}
	return spec
}

// claimTestUID is withUID for a test binary playing a part (no testing.TB):
// the claims live under dir.
func claimTestUID(dir string, spec Spec, level Level) (Spec, error) {
	c := Config{Owner: dir, ClaimsDir: filepath.Join(dir, "uids")}
	uid, ok, err := c.PluginUID(spec.Name, level)
	if ok {
		spec.UID = uid
	}
	return spec, err
}
