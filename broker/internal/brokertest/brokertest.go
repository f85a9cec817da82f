// Package brokertest holds test helpers shared by the tests of package
// broker and of its subpackages. It does not import broker, so the core's
// own (internal) tests can use it too.
package brokertest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// WriteSecrets writes body (the file source's YAML) to a file in a
// temporary directory and returns its path.
func WriteSecrets(tb testing.TB, body string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "secrets.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// WaitFor polls cond until it holds, failing after a minute: a bound for
// a loaded machine, not a timing assertion.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for limit := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(limit) {
			tb.Fatalf("still waiting for %s", what)
		}
	}
}
