package sandbox

import (
	"slices"

	"golang.org/x/sys/unix"
)

// The seccomp filter's policy, as data: which system calls it refuses
// outright, which it checks the arguments of, and what it answers. The
// numbers of the calls are per architecture (seccomp_sysnum_linux.go) and
// the program is compiled from this table (seccomp_bpf_linux.go); a
// syscall not named here is allowed.

// verdict is the filter's answer to one call.
type verdict uint8

const (
	// allow lets the call through.
	allow verdict = iota
	// refuse fails the call with EPERM: it would reach around the
	// sandbox.
	refuse
	// absent fails the call with ENOSYS, as if the kernel lacked it:
	// clone3, whose flags live in memory the filter cannot read; libc
	// and language runtimes then fall back to clone, whose flags it can.
	absent
)

func (v verdict) String() string {
	switch v {
	case allow:
		return "allow"
	case refuse:
		return "refuse"
	case absent:
		return "absent"
	}
	return "unknown"
}

// cond holds when the low 32 bits of argument arg, masked, are one of in
// (or, with not, none of them). Every argument the table checks is an
// int, an unsigned int or flags the kernel reads only the low 32 bits of
// (clone's included), so the high word is never what decides.
type cond struct {
	arg  int
	mask uint32 // 0: the whole low word
	in   []uint32
	not  bool
}

// clause decides a call when all of its conditions hold.
type clause struct {
	when []cond
	then verdict
	what string // what the clause matches, for the docs and refusal counts
}

// sysRule is one system call's entry: its clauses in order, the first
// that holds decides; otherwise dflt does.
type sysRule struct {
	name    string // the kernel's name for the call
	clauses []clause
	dflt    verdict
	why     string
}

// holds reports whether k holds of args.
func (k cond) holds(args [6]uint64) bool {
	v := uint32(args[k.arg])
	if k.mask != 0 {
		v &= k.mask
	}
	return slices.Contains(k.in, v) != k.not
}

// decide is the rule's verdict on a call with args, and the reason: the
// clause that held (what it matches) or the rule's own.
func (r sysRule) decide(args [6]uint64) (verdict, string) {
	for _, c := range r.clauses {
		if !slices.ContainsFunc(c.when, func(k cond) bool { return !k.holds(args) }) {
			return c.then, c.what
		}
	}
	return r.dflt, r.why
}

// denied refuses each named call outright, for one reason.
func denied(why string, names ...string) []sysRule {
	out := make([]sysRule, len(names))
	for i, n := range names {
		out[i] = sysRule{name: n, dflt: refuse, why: why}
	}
	return out
}

// cloneNSFlags are clone's flags that make a namespace (CLONE_NEWTIME
// is clone3's and unshare's only: in clone's flags its bit is part of
// the exit signal, which the kernel masks off).
const cloneNSFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWPID |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// msgFastOpen is MSG_FASTOPEN: a send that connects (TCP Fast Open)
// without the connect call Landlock's TCP rules mediate.
const msgFastOpen = 0x20000000

// sockTypeMask leaves the type of socket's second argument, without
// SOCK_NONBLOCK and SOCK_CLOEXEC.
const sockTypeMask = 0xf

// fastOpen refuses a send whose flags, argument arg, ask for TCP Fast
// Open.
func fastOpen(name string, arg int) sysRule {
	return sysRule{name: name, dflt: allow, why: "TCP Fast Open connects without connect(2), which Landlock's TCP rules mediate",
		clauses: []clause{{when: []cond{{arg: arg, mask: msgFastOpen, in: []uint32{0}, not: true}}, then: refuse, what: "MSG_FASTOPEN"}}}
}

// seccompRules is the policy. Everything not named is allowed: this is a
// deny list on top of the namespaces or Landlock, not the sandbox itself.
var seccompRules = slices.Concat(
	denied("reaches into another process (Landlock and the pid namespace stop most of it; this stops the rest)",
		"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"),
	denied("makes or enters namespaces, or changes mounts: the sandbox's own building blocks",
		"unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "open_tree_attr", "move_mount",
		"fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr"),
	denied("kernel keyrings are shared beyond the sandbox",
		"keyctl", "add_key", "request_key"),
	denied("BPF and perf reach into the kernel and other processes",
		"bpf", "perf_event_open"),
	denied("io_uring's operations bypass this filter",
		"io_uring_setup", "io_uring_enter", "io_uring_register"),
	denied("loads or replaces kernel code, or changes the machine",
		"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
		"swapon", "swapoff", "reboot", "acct"),
	denied("userfaultfd stalls the kernel at will (a race amplifier for exploits)",
		"userfaultfd"),
	denied("opens a file by handle, around every path check",
		"open_by_handle_at", "name_to_handle_at"),
	denied("reads the kernel log, where other processes' records land",
		"syslog"),
	[]sysRule{
		{name: "clone", dflt: allow, why: "a new namespace is the sandbox's building block",
			clauses: []clause{{when: []cond{{arg: 0, mask: cloneNSFlags, in: []uint32{0}, not: true}}, then: refuse, what: "namespace flags"}}},
		{name: "clone3", dflt: absent, why: "its flags are in memory the filter cannot read; callers fall back to clone"},
		{name: "socket", dflt: refuse, why: "only unix and TCP sockets: UDP, raw, packet, netlink and MPTCP reach around the proxy",
			clauses: []clause{
				{when: []cond{{arg: 0, in: []uint32{unix.AF_UNIX}}}, then: allow, what: "unix socket"},
				{when: []cond{
					{arg: 0, in: []uint32{unix.AF_INET, unix.AF_INET6}},
					{arg: 1, mask: sockTypeMask, in: []uint32{unix.SOCK_STREAM}},
					// MPTCP (protocol 262) is a stream socket Landlock's TCP
					// rules do not see.
					{arg: 2, in: []uint32{0, unix.IPPROTO_TCP}},
				}, then: allow, what: "TCP socket"},
			}},
		{name: "socketpair", dflt: refuse, why: "only unix socket pairs",
			clauses: []clause{{when: []cond{{arg: 0, in: []uint32{unix.AF_UNIX}}}, then: allow, what: "unix socket pair"}}},
		// sendto(fd, buf, len, flags, …), sendmmsg(fd, vec, n, flags),
		// sendmsg(fd, msg, flags).
		fastOpen("sendto", 3),
		fastOpen("sendmmsg", 3),
		fastOpen("sendmsg", 2),
	},
)
