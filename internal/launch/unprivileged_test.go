package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// The escape suite again, with the host as an unprivileged user
// (setpriv to nobody): no level needs root.
func TestEscapeUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("this run is already unprivileged: it is the inner run of TestEscapeUnprivileged")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv is required (util-linux)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(attackerDir, "launch.test")
	if err := fsutil.CopyFile(self, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
		bin, "-test.run=^(TestEscape(Grandchild|Limits|Disk)?|TestPriorityIsThePluginsOnly|TestEachPluginItsOwnIdentity)$", "-test.v", "-test.count=1")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", attackerDirEnv + "=" + attackerDir}
	cmd.Dir = attackerDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the suite failed as an unprivileged user: %v\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestEscape/namespaces/go", "--- PASS: TestEscape/landlock/python",
		"--- PASS: TestEscapeLimits/namespaces/python/forkbomb", "--- PASS: TestEscapeGrandchild/landlock/go",
		"--- PASS: TestEscapeLimits/landlock/python/nodump", "--- PASS: TestPriorityIsThePluginsOnly/namespaces",
		"--- PASS: TestEscapeDisk/namespaces/diskunlinked", "--- PASS: TestEscapeDisk/landlock/diskfill",
		"--- PASS: TestEachPluginItsOwnIdentity/landlock"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the unprivileged run lacks %q:\n%s", want, out)
		}
	}
}
