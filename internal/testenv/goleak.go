//go:build linux

package testenv

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// MainNoLeaks is Main for a package whose code starts goroutines
// (servers, supervisors, watchers): once its tests pass, it fails them if
// any goroutine they started is still running (go.uber.org/goleak, which
// waits a little for goroutines that are ending). Call it from TestMain:
// os.Exit(testenv.MainNoLeaks(m)).
func MainNoLeaks(m *testing.M, opts ...goleak.Option) int {
	code := Main(m)
	if code != 0 {
		return code
	}
	// Idle keep-alive connections of the tests' own requests are the
	// client's, not the code's under test.
	http.DefaultClient.CloseIdleConnections()
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests:\n%v\n", err)
		return 1
	}
	return 0
}
