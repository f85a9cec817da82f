package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
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
	dir, err := os.MkdirTemp("", "airlock-launch-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Chmod(dir, 0o755)
	attackerDir = dir
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "attacker"), "./testdata/attacker").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build attacker: %v\n%s", err, out)
		os.Exit(1)
	}
	py, _ := os.ReadFile("testdata/attacker.py")
	if err := os.WriteFile(filepath.Join(dir, "attacker.py"), py, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
