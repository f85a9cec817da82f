package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// installSeccomp confines this thread, and what it starts, to the
// seccomp filter compiled from seccompRules: it refuses what no plugin
// needs and what would reach around the sandbox — sockets other than
// unix and TCP, new namespaces and mounts, kernel keyrings, BPF, perf,
// io_uring, ptrace and its kin, loading kernel code — and kills a
// process that calls through another ABI (i386, x32, arm32), whose
// numbers the rules do not cover. Refusals go to a listener the init
// answers and counts (ip.refused; seccomp_notify_linux.go) where the
// kernel allows one. no_new_privs must be set.
func (ip *initProc) installSeccomp() error {
	fd, err := loadSeccomp(true)
	if err != nil || fd < 0 {
		return err
	}
	ip.refused = &refusals{first: ip.noticeRefusal}
	// At once: this thread is under the filter now, and a refused call
	// of its own would wait for an answer.
	go ip.refused.serve(fd, seccompArchs[runtime.GOARCH], seccompRules)
	return nil
}

// loadSeccomp loads the filter on this thread. With listen, refusals go
// to a listener whose descriptor (close-on-exec) it returns, when the
// kernel allows one; otherwise, and without listen, the filter answers
// them itself and fd is -1 (as on an architecture without a table,
// where no filter is loaded: namespaces and Landlock still hold).
func loadSeccomp(listen bool) (fd int, err error) {
	if listen && notifSizesMatch() {
		for _, flags := range []uintptr{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
			unix.SECCOMP_FILTER_FLAG_NEW_LISTENER} {
			fd, err := load(notifyRets, flags)
			if err == nil || !errors.Is(err, errNoListener) {
				return fd, err
			}
		}
	}
	_, err = load(defaultRets, 0)
	return -1, err
}

func load(r filterRet, flags uintptr) (int, error) {
	prog, ok, err := seccompProgram(runtime.GOARCH, r)
	if err != nil || !ok {
		return -1, err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	switch {
	case e == 0:
		return int(fd), nil
	case flags&unix.SECCOMP_FILTER_FLAG_NEW_LISTENER != 0 && (e == unix.EBUSY || e == unix.EINVAL):
		// EBUSY: a filter with a listener is already in the chain;
		// EINVAL: a kernel without listeners (or without
		// WAIT_KILLABLE_RECV).
		return -1, fmt.Errorf("%w: %w", errNoListener, e)
	}
	return -1, e
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
