package mcp_test

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
)

func TestMain(m *testing.M) {
	sandbox.Init() // plugins start through a re-executed test binary
	os.Exit(testenv.MainNoLeaks(m))
}
