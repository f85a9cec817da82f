//go:build linux

package testenv

import (
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// CheckGoroutines snapshots the running goroutines and returns a function
// that fails tb when, within a few seconds, goroutines started since the
// snapshot are still running: a server that does not stop what it started.
// Call it before starting the server and the result after stopping it.
// It is goleak's check (as [MainNoLeaks] runs for a whole package) scoped
// to one test, for tests that share a package with long-lived fixtures.
func CheckGoroutines(tb testing.TB) func() {
	tb.Helper()
	before := goleak.IgnoreCurrent()
	return func() {
		tb.Helper()
		// The HTTP client's idle connections of the test's own requests
		// are the client's, not the code's under test.
		http.DefaultClient.CloseIdleConnections()
		opts := []goleak.Option{before,
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop")}
		err := goleak.Find(opts...)
		// goleak waits about half a second; a loaded machine may need
		// longer to end goroutines that are on their way out.
		for deadline := time.Now().Add(5 * time.Second); err != nil && time.Now().Before(deadline); {
			err = goleak.Find(opts...)
		}
		if err != nil {
			tb.Errorf("goroutines leaked: %v", err)
		}
	}
}
