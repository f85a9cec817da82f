//go:build linux

package sandbox

import (
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// What must hold of the filter whatever the call, written from what a
// plugin must not do rather than from the rule table, so that a rule
// dropped from the table or compiled wrong shows here.

// dangerous are calls a plugin must never make, whatever the arguments.
var dangerous = []string{"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "unshare", "setns",
	"mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsmount", "fspick", "mount_setattr",
	"bpf", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register", "init_module",
	"finit_module", "kexec_load", "kexec_file_load", "keyctl", "add_key", "request_key", "open_by_handle_at",
	"userfaultfd", "clone3"}

// namespaceFlags are clone's flags that make a namespace.
var namespaceFlags = []uint32{unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWNET, unix.CLONE_NEWPID,
	unix.CLONE_NEWIPC, unix.CLONE_NEWUTS, unix.CLONE_NEWCGROUP}

// socketAllowed says which sockets a plugin may open: unix ones of any
// type, and TCP (stream, protocol 0 or TCP) over IPv4 or IPv6. The
// kernel reads each argument as an int: its low 32 bits.
func socketAllowed(domain, typ, proto uint32) bool {
	if domain == unix.AF_UNIX {
		return true
	}
	inet := domain == unix.AF_INET || domain == unix.AF_INET6
	stream := typ&sockTypeMask == unix.SOCK_STREAM
	return inet && stream && (proto == 0 || proto == unix.IPPROTO_TCP)
}

// checkCall fails tb when the filter's answer to c breaks a property.
func checkCall(tb testing.TB, goarch string, f *filter, c call) {
	tb.Helper()
	arch := seccompArchs[goarch]
	got := f.eval(tb, c)
	if c.arch != arch.audit || arch.x32 && c.nr&x32Bit != 0 {
		if got != unix.SECCOMP_RET_KILL_PROCESS {
			tb.Fatalf("%s: a call of another ABI %+v = %#x, want kill", goarch, c, got)
		}
		return
	}
	name := ""
	for n, nr := range arch.nr {
		if nr == c.nr {
			name = n
		}
	}
	low := func(i int) uint32 { return uint32(c.args[i]) }
	var mayAllow bool
	switch {
	case slices.Contains(dangerous, name):
		mayAllow = false
	case name == "socket" && low(1)&^(sockTypeMask|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC) != 0:
		return // the kernel refuses a type with other flags (EINVAL)
	case name == "socket":
		mayAllow = socketAllowed(low(0), low(1), low(2))
	case name == "socketpair":
		mayAllow = low(0) == unix.AF_UNIX
	case name == "clone":
		mayAllow = !slices.ContainsFunc(namespaceFlags, func(fl uint32) bool { return low(0)&fl != 0 })
	case name == "sendto" || name == "sendmmsg":
		mayAllow = low(3)&unix.MSG_FASTOPEN == 0
	case name == "sendmsg":
		mayAllow = low(2)&unix.MSG_FASTOPEN == 0
	default:
		// Everything else a plugin may do, or the filter refuses it
		// for a reason this list does not know: either is fine here.
		return
	}
	if mayAllow != (got == unix.SECCOMP_RET_ALLOW) {
		tb.Fatalf("%s: %s%+v = %#x; allowed should be %v", goarch, name, c.args, got, mayAllow)
	}
	if !mayAllow && got != defaultRets.refuse && got != defaultRets.absent {
		tb.Fatalf("%s: %s%+v = %#x, want EPERM or ENOSYS", goarch, name, c.args, got)
	}
}

// interesting are values an argument is often worth taking.
var interesting = []uint64{0, 1, unix.AF_INET, unix.AF_INET6, unix.AF_UNIX, unix.AF_PACKET, unix.AF_NETLINK,
	unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_RAW, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK,
	unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_MPTCP, unix.MSG_FASTOPEN, unix.MSG_FASTOPEN | unix.MSG_NOSIGNAL,
	unix.CLONE_NEWUSER, unix.CLONE_NEWNET | uint64(unix.SIGCHLD), uint64(unix.SIGCHLD), 1 << 32, 1<<32 | unix.AF_INET, ^uint64(0)}

// fuzzCall turns fuzz input into a call: arch picks the architecture
// (and, with its high bit, another ABI's AUDIT_ARCH); pick chooses the
// number — raw, a rule's, or a rule's with the x32 bit.
func fuzzCall(archSel uint8, pick uint16, nr uint32, args [6]uint64) (string, call) {
	names := []string{"amd64", "arm64"}
	goarch := names[int(archSel&1)]
	arch := seccompArchs[goarch]
	c := call{arch: arch.audit, nr: nr, args: args}
	if archSel&0x80 != 0 {
		others := foreignArchs[goarch]
		c.arch = others[int(archSel>>1)%len(others)]
	}
	nrs := make([]uint32, 0, len(seccompRules))
	for _, r := range seccompRules {
		nrs = append(nrs, arch.nr[r.name])
	}
	switch pick % 3 {
	case 1:
		c.nr = nrs[int(pick/3)%len(nrs)]
	case 2:
		c.nr = nrs[int(pick/3)%len(nrs)] | x32Bit
	}
	return goarch, c
}

func compiledFilters(tb testing.TB) map[string]*filter {
	out := map[string]*filter{}
	for goarch := range seccompArchs {
		prog, _, err := seccompProgram(goarch, defaultRets)
		if err != nil {
			tb.Fatal(err)
		}
		out[goarch] = newFilter(tb, prog)
	}
	return out
}

// FuzzSeccompFilter: for any architecture, number and arguments, no
// dangerous call, refused socket, namespace clone or fast-open send is
// allowed, every allowed socket is, and a call of another ABI kills.
// The seed corpus is testdata/fuzz/FuzzSeccompFilter.
func FuzzSeccompFilter(f *testing.F) {
	filters := compiledFilters(f)
	f.Fuzz(func(t *testing.T, archSel uint8, pick uint16, nr uint32, a0, a1, a2, a3, a4, a5 uint64) {
		goarch, c := fuzzCall(archSel, pick, nr, [6]uint64{a0, a1, a2, a3, a4, a5})
		checkCall(t, goarch, filters[goarch], c)
	})
}

// The same properties over many random calls, in every test run: the
// rules' numbers with arguments drawn mostly from the interesting values.
func TestSeccompFilterProperties(t *testing.T) {
	filters := compiledFilters(t)
	r := rand.New(rand.NewPCG(0x5ecc0, 0x5))
	arg := func() uint64 {
		if r.IntN(4) == 0 {
			return r.Uint64()
		}
		return interesting[r.IntN(len(interesting))] | interesting[r.IntN(len(interesting))]*uint64(r.IntN(2))
	}
	for range 20000 {
		goarch, c := fuzzCall(uint8(r.Uint32()), uint16(r.Uint32()), r.Uint32()%1024,
			[6]uint64{arg(), arg(), arg(), arg(), arg(), arg()})
		checkCall(t, goarch, filters[goarch], c)
	}
}
