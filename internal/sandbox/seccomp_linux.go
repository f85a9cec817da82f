package sandbox

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter refuses, with EPERM, what no plugin needs and what
// would reach around the sandbox: sockets other than unix and TCP (UDP,
// raw, packet, netlink, …), new namespaces and mounts, kernel keyrings,
// BPF, perf, io_uring (whose operations bypass this filter), ptrace, and
// loading kernel code. Everything else is allowed: this is a deny list on
// top of the namespaces or Landlock, not the sandbox itself.
func installSeccomp() error {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return nil // unknown architecture: namespaces/Landlock still hold
	}
	prog := seccompProgram(arch)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return e
	}
	return nil
}

var auditArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}

// deniedSyscalls are refused outright.
var deniedSyscalls = []uint32{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSMOUNT, unix.SYS_FSCONFIG, unix.SYS_FSPICK,
	unix.SYS_MOUNT_SETATTR, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_BPF,
	unix.SYS_PERF_EVENT_OPEN, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE, unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_USERFAULTFD, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_ACCT,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
}

// checkedRange is the lowest and highest syscall number the filter
// checks: denied ones, and those it checks arguments of.
func checkedRange() (lo, hi uint32) {
	all := append([]uint32{unix.SYS_SOCKET, unix.SYS_SOCKETPAIR, unix.SYS_CLONE, unix.SYS_CLONE3,
		unix.SYS_SENDTO, unix.SYS_SENDMSG, unix.SYS_SENDMMSG}, deniedSyscalls...)
	lo, hi = all[0], all[0]
	for _, nr := range all {
		lo, hi = min(lo, nr), max(hi, nr)
	}
	return lo, hi
}

// BPF program layout over struct seccomp_data: nr at 0, arch at 4, args
// at 16 + 8·i (low 32 bits first on little-endian).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	offArg2 = 32
	offArg3 = 40
)

// msgFastOpen is MSG_FASTOPEN: a send that connects (TCP Fast Open)
// without the connect call Landlock's TCP rules mediate.
const msgFastOpen = 0x20000000

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

const (
	ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeqK = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	ret  = unix.BPF_RET | unix.BPF_K
	andK = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
)

// seccompProgram builds the filter for one architecture.
func seccompProgram(arch uint32) []unix.SockFilter {
	allow := stmt(ret, unix.SECCOMP_RET_ALLOW)
	deny := stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	p := []unix.SockFilter{
		stmt(ldW, offArch),
		jump(jeqK, arch, 1, 0),
		stmt(ret, unix.SECCOMP_RET_KILL_PROCESS), // another ABI (x32, i386): no way around the list
		stmt(ldW, offNr),
	}
	// Most calls (read, write, mmap, futex, epoll, …) are outside the
	// range the checks below look at: allow them at once, so the filter
	// costs a plugin's hot path a few instructions, not the whole list.
	lo, hi := checkedRange()
	p = append(p,
		jump(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, lo, 1, 0), allow,
		jump(unix.BPF_JMP|unix.BPF_JGT|unix.BPF_K, hi, 0, 1), allow,
	)
	for _, nr := range deniedSyscalls {
		p = append(p, jump(jeqK, nr, 0, 1), deny)
	}
	// clone/clone3 with namespace flags: clone's flags are arg0; clone3
	// passes a struct pointer the filter cannot read, so it is refused
	// (libc falls back to clone).
	p = append(p, jump(jeqK, unix.SYS_CLONE3, 0, 1), stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS)))
	nsFlags := uint32(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWPID |
		unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	p = append(p,
		jump(jeqK, unix.SYS_CLONE, 0, 4),
		stmt(ldW, offArg0),
		stmt(andK, nsFlags),
		jump(jeqK, 0, 1, 0), // no namespace flag: go on below
		deny,
		stmt(ldW, offNr),
	)
	// socket(domain, type, protocol): unix any type; inet/inet6 stream
	// with protocol 0 or TCP only (MPTCP, protocol 262, is a stream
	// socket Landlock's TCP rules do not see).
	p = append(p,
		jump(jeqK, unix.SYS_SOCKET, 0, 13),
		stmt(ldW, offArg0),
		jump(jeqK, unix.AF_UNIX, 0, 1), allow,
		jump(jeqK, unix.AF_INET, 1, 0),
		jump(jeqK, unix.AF_INET6, 0, 6),
		stmt(ldW, offArg1),
		stmt(andK, 0xf), // SOCK_NONBLOCK/SOCK_CLOEXEC masked off
		jump(jeqK, unix.SOCK_STREAM, 0, 3),
		stmt(ldW, offArg2),
		jump(jeqK, 0, 2, 0),
		jump(jeqK, unix.IPPROTO_TCP, 1, 0),
		deny,
		allow,
	)
	// TCP Fast Open: sendto/sendmmsg (flags in arg3) and sendmsg (arg2)
	// with MSG_FASTOPEN connect without connect(2).
	for _, c := range []struct {
		nr  uint32
		off uint32
	}{{unix.SYS_SENDTO, offArg3}, {unix.SYS_SENDMMSG, offArg3}, {unix.SYS_SENDMSG, offArg2}} {
		p = append(p,
			jump(jeqK, c.nr, 0, 4),
			stmt(ldW, c.off),
			stmt(andK, msgFastOpen),
			jump(jeqK, 0, 1, 0),
			deny,
			stmt(ldW, offNr), // A holds the flags on the fall-through path: reload
		)
	}
	// socketpair: unix only.
	p = append(p,
		jump(jeqK, unix.SYS_SOCKETPAIR, 0, 4),
		stmt(ldW, offArg0),
		jump(jeqK, unix.AF_UNIX, 1, 0),
		deny,
		allow,
		allow, // everything else
	)
	return p
}
