package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// installSeccomp confines this thread, and what it starts, to the
// seccomp filter compiled from seccompRules: it refuses, with EPERM,
// what no plugin needs and what would reach around the sandbox —
// sockets other than unix and TCP, new namespaces and mounts, kernel
// keyrings, BPF, perf, io_uring, ptrace and its kin, loading kernel
// code — and kills a process that calls through another ABI (i386, x32,
// arm32), whose numbers the rules do not cover. no_new_privs must be
// set.
func installSeccomp() error {
	prog, ok, err := seccompProgram(runtime.GOARCH, defaultRets)
	if err != nil || !ok {
		return err // !ok: an architecture without a table; namespaces/Landlock still hold
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return e
	}
	return nil
}

// seccompProgram compiles the filter for goarch; ok is false when the
// filter has no table for it.
func seccompProgram(goarch string, r filterRet) (prog []unix.SockFilter, ok bool, err error) {
	arch, ok := seccompArchs[goarch]
	if !ok {
		return nil, false, nil
	}
	prog, err = compileFilter(arch, seccompRules, r)
	if err != nil {
		return nil, true, fmt.Errorf("compiling the seccomp filter for %s: %w", goarch, err)
	}
	return prog, true, nil
}
