package sandbox

import (
	"errors"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// How the host learns what the seccomp filter refused. A filter that
// answers EPERM itself leaves no trace the host can read: its log
// (SECCOMP_FILTER_FLAG_LOG, SECCOMP_RET_LOG) goes to the audit subsystem,
// that is to auditd or the kernel log, which an unprivileged host may not
// read (and which the kernel rate-limits); SECCOMP_RET_TRAP raises
// SIGSYS in the plugin, which a Go runtime and most others treat as a
// crash; ptrace is what the filter refuses. So a refusal is a
// SECCOMP_RET_USER_NOTIF instead: the kernel holds the call and hands it
// to the init on a listener descriptor (SECCOMP_FILTER_FLAG_NEW_LISTENER,
// Linux 5.0, no privilege needed), and the init answers it with the
// filter's errno and counts it. clone3's ENOSYS stays the filter's own
// answer: C libraries call it for every thread they start, and fall back.
// Where the kernel refuses a listener (an older kernel, or the host
// already under a filter with one: only one is allowed in a filter
// chain) the filter answers EPERM itself and nothing is counted.
// A call is counted once answered: one interrupted by a signal before
// its answer is restarted by the kernel and handed over again; with
// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19) only a fatal signal
// interrupts it once the init has taken it.

// Refusal is one kind of call the seccomp filter refused, and how often.
type Refusal struct {
	// Call is the system call, by the kernel's name.
	Call string `json:"call"`
	// Reason is the table's reason for refusing it: never the call's
	// arguments, which are the plugin's.
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	data  struct {
		nr   int32
		arch uint32
		ip   uint64
		args [6]uint64
	}
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// notifSizesMatch reports whether the kernel's notification structures
// are the ones above (SECCOMP_GET_NOTIF_SIZES).
func notifSizesMatch() bool {
	var sizes struct{ notif, resp, data uint16 }
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&sizes))); e != 0 {
		return false
	}
	return sizes.notif == uint16(unsafe.Sizeof(seccompNotif{})) && sizes.resp == uint16(unsafe.Sizeof(seccompNotifResp{})) &&
		sizes.data == 64
}

// refusals counts what the filter refused, by kind, and tells first
// about the first of each kind.
type refusals struct {
	first func(Refusal) // called once per kind, from the listener

	mu      sync.Mutex
	kinds   []Refusal
	noticed []bool // by kind: first was told
}

// add adds n calls of a kind (n < 0 takes back calls counted ahead of
// an answer that did not land), and returns the kind's index.
func (r *refusals) add(call, reason string, n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.kinds {
		if r.kinds[i].Call == call && r.kinds[i].Reason == reason {
			r.kinds[i].Count += n
			return i
		}
	}
	r.kinds = append(r.kinds, Refusal{Call: call, Reason: reason, Count: n})
	r.noticed = append(r.noticed, false)
	return len(r.kinds) - 1
}

// notice tells first about kind i, once.
func (r *refusals) notice(i int) {
	r.mu.Lock()
	k, told := r.kinds[i], r.noticed[i]
	r.noticed[i] = true
	r.mu.Unlock()
	if !told && r.first != nil {
		r.first(Refusal{Call: k.Call, Reason: k.Reason, Count: 1})
	}
}

// list is what was refused so far (nil-safe).
func (r *refusals) list() []Refusal {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Refusal
	for _, k := range r.kinds {
		if k.Count > 0 {
			out = append(out, k)
		}
	}
	return out
}

// serve answers the calls the filter hands the listener at fd, until the
// listener fails (every process under the filter is gone). It closes the
// listener when it stops: a call handed over then gets ENOSYS from the
// kernel, never waits for an answer that will not come.
func (r *refusals) serve(fd int, arch seccompArch, rules []sysRule) {
	defer unix.Close(fd)
	byNr := map[uint32]sysRule{}
	for _, rule := range rules {
		byNr[arch.nr[rule.name]] = rule
	}
	for {
		var n seccompNotif
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))
		if e == unix.EINTR || e == unix.ENOENT {
			continue // ENOENT: the caller died before we took its call
		}
		if e != 0 {
			return
		}
		resp := seccompNotifResp{id: n.id, error: -int32(unix.EPERM)}
		rule, ok := byNr[uint32(n.data.nr)]
		call, reason := "unknown", "not in the filter's table"
		if ok {
			var v verdict
			v, reason = rule.decide(n.data.args)
			call = rule.name
			if v == absent {
				resp.error = -int32(unix.ENOSYS)
			}
			// allow cannot happen (the filter hands over only what it
			// refuses); should it, the call is refused all the same.
		}
		// Counted before the answer: once answered, the plugin may exit
		// and the init report before this goroutine runs again.
		kind := r.add(call, reason, 1)
		_, _, e = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
		switch e {
		case 0:
			r.notice(kind)
		case unix.ENOENT, unix.EINTR:
			// The caller was interrupted (its call is restarted, and
			// handed over again) or died: nothing was answered.
			r.add(call, reason, -1)
		default:
			r.add(call, reason, -1)
			return
		}
	}
}

// notifyRets refuse through the listener; the rest as defaultRets.
var notifyRets = filterRet{
	allow:   defaultRets.allow,
	refuse:  unix.SECCOMP_RET_USER_NOTIF,
	absent:  defaultRets.absent,
	foreign: defaultRets.foreign,
}

// errNoListener: the kernel would not give the filter a listener.
var errNoListener = errors.New("no seccomp listener")
