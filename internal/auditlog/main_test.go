package auditlog

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The Writer's goroutine must end when the Writer is closed.
func TestMain(m *testing.M) { os.Exit(testenv.MainNoLeaks(m)) }
