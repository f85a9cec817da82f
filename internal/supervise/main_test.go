//go:build linux

package supervise

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// A supervisor's restart loop and its process waiters must end with it.
func TestMain(m *testing.M) { os.Exit(testenv.MainNoLeaks(m)) }
