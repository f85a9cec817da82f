package h1

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// TestMain fails the package if any goroutine the tests started (a
// connection's loop, a hangup watch) outlives them.
func TestMain(m *testing.M) {
	os.Exit(testenv.MainNoLeaks(m))
}
