package aps

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Files.Run and the upload server's handlers must not outlive the tests.
func TestMain(m *testing.M) { os.Exit(testenv.MainNoLeaks(m)) }
