package sampling

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The OpenAI backend keeps a pool of connections and host.EndInvocation
// may retry in the background: none of it may outlive the tests.
func TestMain(m *testing.M) { os.Exit(testenv.MainNoLeaks(m)) }
