//go:build linux

package plugin_test

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Serve starts servers and a reporter: none may outlive the tests.
func TestMain(m *testing.M) { os.Exit(testenv.MainNoLeaks(m)) }
