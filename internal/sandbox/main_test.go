//go:build linux

package sandbox

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// testModeEnv makes the test binary, re-executed by a test, play a part
// (a probe, a plugin) instead of running the tests.
const testModeEnv = "AIRLOCK_SANDBOX_TEST_MODE"

// testModes are the parts, by the value of testModeEnv.
var testModes = map[string]func() int{}

func TestMain(m *testing.M) {
	Init()
	if spec := os.Getenv(claimHostEnv); spec != "" {
		claimHost(spec) // TestUIDClaims's hosts
	}
	if mode := os.Getenv(setgroupsEnv); mode != "" {
		setgroupsChild(mode) // TestUnprivilegedUserNamespaceKeepsGroups
	}
	if mode, ok := testModes[os.Getenv(testModeEnv)]; ok {
		os.Exit(mode())
	}
	os.Exit(testenv.MainNoLeaks(m))
}
