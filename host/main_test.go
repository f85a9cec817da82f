package host

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The runtime starts supervisors, lease renewers and invocation
// watchers: none may outlive the tests that started them.
func TestMain(m *testing.M) { os.Exit(testenv.MainNoLeaks(m)) }
