package mcp_test

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.MainNoLeaks(m)) }
