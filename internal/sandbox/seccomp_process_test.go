//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	testModes["seccomp-probe"] = func() int { return seccompProbe(true) }
	testModes["x32-bare"] = func() int { return seccompProbe(false) }
}

// probeCall is one system call the probe makes, by the build's numbers.
type probeCall struct {
	name string
	nr   uintptr
	args [6]uintptr
}

func probeCalls() []probeCall {
	buf := []byte("x")
	return []probeCall{
		{"unshare user", unix.SYS_UNSHARE, [6]uintptr{unix.CLONE_NEWUSER}},
		{"unshare net", unix.SYS_UNSHARE, [6]uintptr{unix.CLONE_NEWNET}},
		{"ptrace traceme", unix.SYS_PTRACE, [6]uintptr{unix.PTRACE_TRACEME}},
		{"udp socket", unix.SYS_SOCKET, [6]uintptr{unix.AF_INET, unix.SOCK_DGRAM}},
		{"udp6 socket", unix.SYS_SOCKET, [6]uintptr{unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC}},
		{"mptcp socket", unix.SYS_SOCKET, [6]uintptr{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP}},
		{"packet socket", unix.SYS_SOCKET, [6]uintptr{unix.AF_PACKET, unix.SOCK_RAW}},
		{"tcp socket", unix.SYS_SOCKET, [6]uintptr{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}},
		{"unix socket", unix.SYS_SOCKET, [6]uintptr{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}},
		// Without the filter these fail otherwise: EFAULT (no params),
		// EINVAL (no clone_args).
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{1}},
		{"clone3", unix.SYS_CLONE3, [6]uintptr{0, 0}},
		{"fast open send", unix.SYS_SENDTO, [6]uintptr{^uintptr(0), uintptr(unsafe.Pointer(&buf[0])), 1, unix.MSG_FASTOPEN}},
	}
}

// seccompProbe runs in a re-executed test binary: it installs the real
// filter on this thread (withFilter) and makes each probe call, printing
// "name: errno" (0: it succeeded), then makes x32's socket(AF_INET,
// SOCK_DGRAM) — the filter kills the process there.
func seccompProbe(withFilter bool) int {
	runtime.LockOSThread()
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	if withFilter {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fmt.Println("no_new_privs:", err)
			return 1
		}
		if _, err := loadSeccomp(false); err != nil {
			fmt.Println("seccomp:", err)
			return 1
		}
		for _, c := range probeCalls() {
			r, _, e := unix.RawSyscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
			if e == 0 && strings.HasSuffix(c.name, "socket") {
				unix.Close(int(r))
			}
			fmt.Printf("%s: %d\n", c.name, int(e))
		}
	}
	fmt.Println("x32 next")
	r, _, e := unix.RawSyscall(x32Bit|unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, 0)
	if e == 0 {
		unix.Close(int(r))
	}
	fmt.Printf("x32 udp socket: %d\n", int(e))
	return 0
}

func runProbe(t *testing.T, mode string) (map[string]syscall.Errno, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), testModeEnv+"="+mode)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	got := map[string]syscall.Errno{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		name, errno, ok := strings.Cut(sc.Text(), ": ")
		var n int
		if _, perr := fmt.Sscan(errno, &n); ok && perr == nil {
			got[name] = syscall.Errno(n)
		} else if sc.Text() == "x32 next" {
			got["x32 next"] = 0
		} else {
			t.Logf("probe: %s", sc.Text())
		}
	}
	return got, err
}

// The filter, loaded for real in a process of its own, refuses what the
// table refuses (EPERM, ENOSYS for clone3: answers the kernel would not
// give these calls by itself), allows unix and TCP sockets, and kills
// the process at its first x32 call — before the kernel answers it: on a
// kernel with x32 off that answer would be ENOSYS, on one with x32 on a
// UDP socket.
func TestSeccompFilterInAProcess(t *testing.T) {
	bare, err := runProbe(t, "x32-bare")
	if err != nil {
		t.Fatalf("the probe without the filter failed: %v", err)
	}
	t.Logf("without the filter, x32's socket(AF_INET, SOCK_DGRAM) gives errno %d (%v)", bare["x32 udp socket"], bare["x32 udp socket"])
	got, err := runProbe(t, "seccomp-probe")
	if _, ok := got["x32 next"]; !ok {
		t.Error("the probe died before its x32 call")
	}
	if seccompArchs[runtime.GOARCH].x32 {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSYS {
			t.Errorf("the probe ended with %v, want killed by SIGSYS at its x32 call", err)
		}
		if e, ok := got["x32 udp socket"]; ok {
			t.Errorf("x32's socket returned (errno %d): the filter let it reach the kernel", e)
		}
	} else if err != nil {
		t.Errorf("the probe failed: %v", err) // no x32 here: the call is just an unknown number
	}
	want := map[string]syscall.Errno{
		"unshare user": unix.EPERM, "unshare net": unix.EPERM, "ptrace traceme": unix.EPERM,
		"udp socket": unix.EPERM, "udp6 socket": unix.EPERM, "mptcp socket": unix.EPERM, "packet socket": unix.EPERM,
		"tcp socket": 0, "unix socket": 0, "io_uring_setup": unix.EPERM, "clone3": unix.ENOSYS, "fast open send": unix.EPERM,
	}
	for name, w := range want {
		if e, ok := got[name]; !ok || e != w {
			t.Errorf("%s: errno %d (%v) (seen %v), want %d (%v)", name, int(e), e, ok, int(w), w)
		}
	}
}
