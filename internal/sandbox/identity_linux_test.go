package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// setgroupsEnv makes the test binary try setgroups: "outer" starts
// itself in a new user namespace as an unprivileged process may (its own
// uid and gid mapped, setgroups denied), "inner" tries to drop every
// supplementary group there and prints what happened.
const setgroupsEnv = "AIRLOCK_TEST_SETGROUPS"

func setgroupsChild(mode string) {
	if mode == "outer" {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = []string{setgroupsEnv + "=inner"}
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		uid, gid := os.Getuid(), os.Getgid()
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}}
		if err := cmd.Run(); err != nil {
			fmt.Println("inner:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	err := syscall.Setgroups(nil)
	fmt.Println("setgroups:", err)
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Groups:") {
			fmt.Println(l)
		}
	}
	os.Exit(0)
}

// What an unprivileged host can give a plugin: in the user namespace it
// may create, setgroups is denied (the kernel requires it before an
// unprivileged process may write the gid map), so the host's
// supplementary groups stay the plugin's — unmapped, they show as the
// overflow gid, and the kernel still grants what they grant. Root's
// hosts drop them (TestEachPluginItsOwnIdentity in internal/launch).
func TestUnprivilegedUserNamespaceKeepsGroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start an unprivileged process with a supplementary group")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv is required (util-linux)")
	}
	dir, err := os.MkdirTemp("", "airlock-setgroups-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := fsutil.CopyFile(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--groups=4242", "--inh-caps=-all", bin, "-test.run=^$")
	cmd.Env = []string{setgroupsEnv + "=outer"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "setgroups: operation not permitted") {
		t.Errorf("setgroups in an unprivileged user namespace did not fail with EPERM:\n%s", out)
	}
	if !strings.Contains(string(out), "Groups:\t65534") {
		t.Errorf("the supplementary group is not there (as the overflow gid):\n%s", out)
	}
}
