//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInitRunByHandMountsNothing: an operator who runs the init's probe
// or its setup by hand, as root, outside the namespaces Airlock makes,
// gets a refusal, not the sandbox's mounts on the host (/ made private, a
// tmpfs over the temp directory). The child runs in user and mount
// namespaces of its own, so a regression mounts there and not on the test
// machine; it has no PID namespace, which is what the init checks.
func TestInitRunByHandMountsNothing(t *testing.T) {
	// A user namespace that maps the caller to root lets the child mount
	// in its mount namespace whether the test runs as root or not.
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	byHand := func(args ...string) *exec.Cmd {
		cmd := exec.Command("/proc/self/exe", args...)
		cmd.Env = initEnv()
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: ids, GidMappings: gids, Pdeathsig: syscall.SIGKILL}
		return cmd
	}

	out, err := byHand(initArg, "probe").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a command to run by hand") {
		t.Fatalf("the probe by hand: want the by-hand refusal, got %v: %s", err, out)
	}

	// The setup stage, given a description that asks for namespaces on
	// its spec descriptor and a control socket to report on.
	spec, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer spec.Close()
	if _, err := w.WriteString(`{"level":"namespaces"}`); err != nil {
		t.Fatal(err)
	}
	w.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "ctrl"), os.NewFile(uintptr(pair[1]), "ctrl-child")
	defer ours.Close()
	cmd := byHand(initArg)
	cmd.ExtraFiles = []*os.File{spec, theirs} // descriptors 3 (specFD) and 4 (ctrlFD)
	if specFD != 3 || ctrlFD != 4 {
		t.Fatalf("descriptors moved: spec %d, control %d", specFD, ctrlFD)
	}
	err = cmd.Run()
	theirs.Close()
	if err == nil {
		t.Fatal("the setup stage by hand exited 0")
	}
	report := make([]byte, 4096)
	n, err := ours.Read(report)
	if err != nil || !strings.Contains(string(report[:n]), "not a command to run by hand") {
		t.Fatalf("the setup stage by hand: want the by-hand refusal, got %v: %s", err, report[:n])
	}
}
