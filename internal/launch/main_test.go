package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// attackerDirEnv hands the attackers to the unprivileged run.
const attackerDirEnv = "AIRLOCK_TEST_ATTACKER_DIR"

// attackerDir holds the attacker plugins (Go binary and Python script),
// readable by the unprivileged uid a root host runs plugins as.
var attackerDir string

func TestMain(m *testing.M) {
	sandbox.Init() // plugins start through a re-executed test binary
	if tmp := os.Getenv(sessionChildEnv); tmp != "" {
		sessionChild(tmp) // TestPrivateDirsOfADeadHost's host
	}
	if d := os.Getenv(attackerDirEnv); d != "" {
		// The unprivileged run of the suite (TestEscapeUnprivileged).
		attackerDir = d
		os.Exit(m.Run())
	}
	var attacker string
	dir := testenv.Binaries("airlock-launch-test-", testenv.Binary{Path: &attacker, Pkg: "./testdata/attacker"})
	attackerDir = dir
	py, _ := os.ReadFile("testdata/attacker.py")
	if err := os.WriteFile(filepath.Join(dir, "attacker.py"), py, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.MainNoLeaks(m)
	os.RemoveAll(dir)
	os.Exit(code)
}
