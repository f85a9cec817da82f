//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// otherCalls are calls no rule names, by architecture: a plugin's hot
// path, and neighbours of the checked numbers.
var otherCalls = map[string]map[string]uint32{
	"amd64": {"read": 0, "write": 1, "mmap": 9, "connect": 42, "accept4": 288, "bind": 49, "futex": 202,
		"openat": 257, "epoll_pwait": 281, "execve": 59, "kill": 62, "pidfd_open": 434, "landlock_restrict_self": 446},
	"arm64": {"read": 63, "write": 64, "mmap": 222, "connect": 203, "accept4": 242, "bind": 200, "futex": 98,
		"openat": 56, "epoll_pwait": 22, "execve": 221, "kill": 129, "pidfd_open": 434, "landlock_restrict_self": 446},
}

// foreignArchs are the AUDIT_ARCH values of other ABIs a process of each
// architecture can call through.
var foreignArchs = map[string][]uint32{
	"amd64": {unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64, 0},
	"arm64": {unix.AUDIT_ARCH_ARM, unix.AUDIT_ARCH_X86_64, 0},
}

// argCases are the calls whose arguments decide, with the verdict each
// must get; every rule with clauses must have cases here.
var argCases = []struct {
	name string
	call string
	args [6]uint64
	want verdict
}{
	{"unix stream socket", "socket", [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow},
	{"unix datagram socket", "socket", [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, allow},
	{"unix seqpacket socket, cloexec", "socket", [6]uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET | unix.SOCK_CLOEXEC}, allow},
	{"TCP", "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, allow},
	{"TCP over IPv6, nonblocking, protocol named", "socket", [6]uint64{unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.IPPROTO_TCP}, allow},
	{"TCP, garbage in the domain's high word (the kernel reads an int)", "socket", [6]uint64{1<<32 | unix.AF_INET, unix.SOCK_STREAM}, allow},
	{"UDP", "socket", [6]uint64{unix.AF_INET, unix.SOCK_DGRAM}, refuse},
	{"UDP over IPv6", "socket", [6]uint64{unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP}, refuse},
	{"UDP, garbage in the domain's high word", "socket", [6]uint64{1<<32 | unix.AF_INET, unix.SOCK_DGRAM}, refuse},
	{"ICMP", "socket", [6]uint64{unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP}, refuse},
	{"raw IP", "socket", [6]uint64{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW}, refuse},
	{"MPTCP", "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP}, refuse},
	{"MPTCP over IPv6", "socket", [6]uint64{unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP}, refuse},
	{"SCTP stream", "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP}, refuse},
	{"inet seqpacket", "socket", [6]uint64{unix.AF_INET, unix.SOCK_SEQPACKET}, refuse},
	{"packet", "socket", [6]uint64{unix.AF_PACKET, unix.SOCK_RAW}, refuse},
	{"netlink", "socket", [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW}, refuse},
	{"vsock", "socket", [6]uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, refuse},
	{"unix pair", "socketpair", [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow},
	{"inet pair", "socketpair", [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, refuse},
	{"fork", "clone", [6]uint64{uint64(unix.SIGCHLD)}, allow},
	{"thread", "clone", [6]uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID}, allow},
	{"vfork", "clone", [6]uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}, allow},
	{"new user namespace", "clone", [6]uint64{unix.CLONE_NEWUSER}, refuse},
	{"new mount namespace", "clone", [6]uint64{unix.CLONE_NEWNS | uint64(unix.SIGCHLD)}, refuse},
	{"new network namespace", "clone", [6]uint64{unix.CLONE_NEWNET}, refuse},
	{"new pid namespace", "clone", [6]uint64{unix.CLONE_NEWPID}, refuse},
	{"new IPC namespace", "clone", [6]uint64{unix.CLONE_NEWIPC}, refuse},
	{"new UTS namespace", "clone", [6]uint64{unix.CLONE_NEWUTS}, refuse},
	{"new cgroup namespace", "clone", [6]uint64{unix.CLONE_NEWCGROUP}, refuse},
	{"clone3", "clone3", [6]uint64{}, absent},
	{"sendto", "sendto", [6]uint64{3, 0, 10, unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT}, allow},
	{"sendto with fast open", "sendto", [6]uint64{3, 0, 10, msgFastOpen}, refuse},
	{"sendto with fast open among other flags", "sendto", [6]uint64{3, 0, 10, msgFastOpen | unix.MSG_NOSIGNAL}, refuse},
	{"sendmsg", "sendmsg", [6]uint64{3, 0, unix.MSG_NOSIGNAL}, allow},
	{"sendmsg with fast open", "sendmsg", [6]uint64{3, 0, msgFastOpen}, refuse},
	{"sendmsg, the fast open bit in an argument that is not its flags", "sendmsg", [6]uint64{3, 0, 0, msgFastOpen}, allow},
	{"sendmmsg", "sendmmsg", [6]uint64{3, 0, 2, 0}, allow},
	{"sendmmsg with fast open", "sendmmsg", [6]uint64{3, 0, 2, msgFastOpen}, refuse},
}

// The compiled filter, run through two interpreters, answers every rule
// of the table as the rule says, on each architecture: a call refused
// outright is refused whatever its arguments; a call with clauses gets
// each case's verdict; a call of another ABI (i386, arm32, x32's
// numbers on amd64) kills; any other call is allowed.
func TestSeccompFilterFollowsTheTable(t *testing.T) {
	withCases := map[string]bool{}
	for _, c := range argCases {
		withCases[c.call] = true
	}
	for goarch, arch := range seccompArchs {
		t.Run(goarch, func(t *testing.T) {
			prog, ok, err := seccompProgram(goarch, defaultRets)
			if err != nil || !ok {
				t.Fatalf("compile: %v (ok %v)", err, ok)
			}
			t.Logf("%d instructions", len(prog))
			f := newFilter(t, prog)
			at := func(name string, args [6]uint64) call { return call{arch: arch.audit, nr: arch.nr[name], args: args} }
			for _, r := range seccompRules {
				if len(r.clauses) == 0 {
					for _, args := range [][6]uint64{{}, {^uint64(0), 1, 2, 3, 4, 5}, {unix.AF_UNIX, unix.SOCK_STREAM}} {
						if got := f.eval(t, at(r.name, args)); got != defaultRets.of(r.dflt) {
							t.Errorf("%s%v = %#x, want %s", r.name, args, got, r.dflt)
						}
					}
				} else if !withCases[r.name] {
					t.Errorf("%s has clauses but no case in argCases", r.name)
				}
				if arch.x32 {
					if got := f.eval(t, call{arch: arch.audit, nr: x32Bit | arch.nr[r.name]}); got != unix.SECCOMP_RET_KILL_PROCESS {
						t.Errorf("x32 %s = %#x, want kill", r.name, got)
					}
				}
				for _, other := range foreignArchs[goarch] {
					if got := f.eval(t, call{arch: other, nr: arch.nr[r.name]}); got != unix.SECCOMP_RET_KILL_PROCESS {
						t.Errorf("%s with AUDIT_ARCH %#x = %#x, want kill", r.name, other, got)
					}
				}
			}
			for _, c := range argCases {
				if got := f.eval(t, at(c.call, c.args)); got != defaultRets.of(c.want) {
					t.Errorf("%s: %s%v = %#x, want %s", c.name, c.call, c.args, got, c.want)
				}
			}
			for name, nr := range otherCalls[goarch] {
				if got := f.eval(t, call{arch: arch.audit, nr: nr}); got != unix.SECCOMP_RET_ALLOW {
					t.Errorf("%s = %#x, want allow", name, got)
				}
				if arch.x32 {
					if got := f.eval(t, call{arch: arch.audit, nr: x32Bit | nr}); got != unix.SECCOMP_RET_KILL_PROCESS {
						t.Errorf("x32 %s = %#x, want kill", name, got)
					}
				}
			}
			// Just outside and inside the checked range, and past every
			// real number.
			lo, hi := ^uint32(0), uint32(0)
			for _, nr := range arch.nr {
				lo, hi = min(lo, nr), max(hi, nr)
			}
			for _, nr := range []uint32{0, lo - 1, hi + 1, 1000, x32Bit - 1} {
				if got := f.eval(t, call{arch: arch.audit, nr: nr}); got != unix.SECCOMP_RET_ALLOW {
					t.Errorf("number %d = %#x, want allow", nr, got)
				}
			}
		})
	}
}

// sysnumRE matches a line of x/sys's zsysnum_linux_GOARCH.go.
var sysnumRE = regexp.MustCompile(`^\s*SYS_([A-Z0-9_]+)\s*=\s*(\d+)`)

// The per-architecture numbers written into seccompArchs are those of
// x/sys's generated lists for each architecture (not only the build's:
// its source holds them all).
func TestSeccompNumbersMatchXSys(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("finding x/sys: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	for goarch, arch := range seccompArchs {
		f, err := os.Open(filepath.Join(dir, "unix", "zsysnum_linux_"+goarch+".go"))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint32{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if m := sysnumRE.FindStringSubmatch(sc.Text()); m != nil {
				n, _ := strconv.ParseUint(m[2], 10, 32)
				want[strings.ToLower(m[1])] = uint32(n)
			}
		}
		f.Close()
		for name, nr := range arch.nr {
			if w, ok := want[name]; !ok || w != nr {
				t.Errorf("%s %s = %d; x/sys has %d (listed: %v)", goarch, name, nr, w, ok)
			}
		}
		for name, nr := range otherCalls[goarch] {
			if want[name] != nr {
				t.Errorf("test table: %s %s = %d; x/sys has %d", goarch, name, nr, want[name])
			}
		}
		for _, r := range seccompRules {
			if _, ok := arch.nr[r.name]; !ok {
				t.Errorf("%s: no number for %s", goarch, r.name)
			}
		}
	}
	// And the build's own architecture agrees with its constants.
	if arch, ok := seccompArchs["amd64"]; ok && unix.SYS_SOCKET == 41 {
		if arch.nr["socket"] != unix.SYS_SOCKET || arch.nr["clone3"] != unix.SYS_CLONE3 {
			t.Error("amd64 numbers disagree with x/sys/unix's constants")
		}
	}
}

// The compiler refuses a table it cannot turn into a correct program,
// and says which rule.
func TestSeccompCompilerRefuses(t *testing.T) {
	arch := seccompArch{audit: 1, nr: map[string]uint32{"a": 10, "b": 11, "c": 10}}
	many := make([]uint32, 300)
	for i := range many {
		many[i] = uint32(i)
	}
	for _, c := range []struct {
		name  string
		rules []sysRule
		want  error
	}{
		{"unknown call", []sysRule{{name: "z", dflt: refuse}}, errUnknownCall},
		{"same number twice", []sysRule{{name: "a", dflt: refuse}, {name: "c", dflt: refuse}}, errDuplicate},
		{"a condition with no value", []sysRule{{name: "a", clauses: []clause{{when: []cond{{arg: 0}}, then: refuse}}}}, errBadCond},
		{"a seventh argument", []sysRule{{name: "a", clauses: []clause{{when: []cond{{arg: 6, in: []uint32{1}}}, then: refuse}}}}, errBadCond},
		// The number's compare jumps past the rule's body: a load, 253
		// compares and two returns are 256 instructions.
		{"a jump past 255 instructions", []sysRule{{name: "a", clauses: []clause{{when: []cond{{arg: 0, in: many[:253]}}, then: refuse}}}}, errJumpTooFar},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileFilter(arch, c.rules, defaultRets)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	// One compare fewer is a body of 255 instructions, the longest
	// jump there is.
	prog, err := compileFilter(arch, []sysRule{{name: "a", clauses: []clause{{when: []cond{{arg: 0, in: many[:252]}}, then: refuse}}}}, defaultRets)
	if err != nil {
		t.Fatalf("252 values: %v", err)
	}
	for _, v := range []uint64{0, 251, 252} {
		want := defaultRets.refuse
		if v == 252 {
			want = defaultRets.allow
		}
		if got := evaluate(t, prog, call{arch: 1, nr: 10, args: [6]uint64{v}}); got != want {
			t.Errorf("a(%d) = %#x, want %#x", v, got, want)
		}
	}
}
