package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The init's descriptors, set by Command.
const (
	specFD = 3
	ctrlFD = 4
)

// Init runs the sandbox init when this process was started as one by
// Command, and never returns then; otherwise it returns at once. Call it
// first thing in main (and in TestMain of packages whose tests launch
// plugins).
func Init() {
	if len(os.Args) < 2 || os.Args[1] != initArg {
		return
	}
	// Every privileged step, the confinement and the fork of the plugin
	// happen on this one thread: capabilities, no_new_privs, Landlock
	// and seccomp are per thread, and the plugin inherits the forking
	// thread's.
	runtime.LockOSThread()
	if len(os.Args) > 2 && os.Args[2] == "probe" {
		os.Exit(probeMain())
	}
	if len(os.Args) > 2 && os.Args[2] == "exec" {
		os.Exit(execMain(os.Args[3:]))
	}
	os.Exit(runInit())
}

type initProc struct {
	spec    initSpec
	ctrl    *os.File
	limits  string    // the plugin's rlimits, set by the exec stage
	refused *refusals // what the seccomp filter refused (nil: not counted)
}

func runInit() int {
	ip := &initProc{ctrl: os.NewFile(ctrlFD, "control")}
	// Every catchable signal is caught before anything else, and before
	// the plugin exists: none it sends can end the init
	// (signals_linux.go). Until the level is known the death signal is
	// SIGKILL (Command's).
	sigs := catchSignals()
	data, err := io.ReadAll(io.LimitReader(os.NewFile(specFD, "spec"), 1<<20))
	if err == nil {
		err = json.Unmarshal(data, &ip.spec)
	}
	if err != nil {
		ip.report(setupReport{Err: "the sandbox description is not readable"}, nil)
		return 127
	}
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(deathSignal(ip.spec.Level)), 0, 0, 0)
	if os.Getppid() == 1 && ip.ctrl != nil {
		// The host died before we got here; nothing to serve.
		return 137
	}
	var fds []int
	switch ip.spec.Level {
	case LevelNamespaces:
		fds, err = setupNamespaces(&ip.spec)
	case LevelLandlock:
		err = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	default:
		err = fmt.Errorf("unknown level %q", ip.spec.Level)
	}
	ip.limits = encodeLimits(limitValues(&ip.spec))
	if err != nil {
		ip.report(setupReport{Err: err.Error()}, nil)
		return 127
	}
	cmd, err := ip.confineAndStart()
	if err != nil {
		ip.report(setupReport{Err: err.Error()}, nil)
		return 127
	}
	ip.report(setupReport{}, fds)
	for _, fd := range fds {
		unix.Close(fd)
	}
	quietStderr()
	// The init is the host's own binary, re-executed: its package
	// initialisers allocated a few MiB (schemas, registries) that it
	// never touches again, and the heap is too small for the collector to
	// have run. Before it idles for the plugin's lifetime, it gives that
	// back: with many plugins, this is most of each one's memory.
	debug.FreeOSMemory()
	return ip.supervise(cmd, sigs)
}

// noticeRefusal tells the host of the first refusal of a kind at once;
// the exit report counts them all.
func (ip *initProc) noticeRefusal(r Refusal) {
	ip.report(initMessage{Refusal: &r}, nil)
}

func (ip *initProc) report(v any, fds []int) {
	data, _ := json.Marshal(v)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = unix.Sendmsg(int(ip.ctrl.Fd()), data, oob, nil, 0)
}

// supervise waits for the plugin, forwarding the stop signals to its
// process group and watching its limits; when the plugin exits (or a
// limit or killSignal ends it) every other process of the sandbox is
// killed and reaped before the init exits with the plugin's status.
func (ip *initProc) supervise(plugin *os.Process, sigs <-chan os.Signal) int {
	type result struct {
		status unix.WaitStatus
		maxRSS int64 // KiB
	}
	exited := make(chan result, 1)
	go func() {
		for {
			var ws unix.WaitStatus
			var ru unix.Rusage
			pid, err := unix.Wait4(plugin.Pid, &ws, 0, &ru)
			if err == unix.EINTR {
				continue
			}
			if pid == plugin.Pid || err != nil {
				exited <- result{ws, ru.Maxrss}
				return
			}
		}
	}()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	w := newWatcher(&ip.spec)
	var end Exit
	code := -1
	for code < 0 {
		select {
		case r := <-exited:
			code = exitCode(r.status)
			if mem := int64(ip.spec.Limits.MemoryMB) << 10; code != 0 && mem > 0 && r.maxRSS >= mem {
				// It died of its memory (an allocation past RLIMIT_DATA
				// failed) before the watcher saw it at the limit.
				end = Exit{Limit: "memory", Detail: fmt.Sprintf("the plugin used %d MiB, over its limit of %d MiB", r.maxRSS>>10, ip.spec.Limits.MemoryMB)}
			} else if r.status.Signaled() && r.status.Signal() == unix.SIGXFSZ {
				end = fsizeExit(ip.spec.Limits)
			} else if lim, detail := w.final(); code != 0 && lim != "" {
				// It failed at a limit (a fork or thread past
				// RLIMIT_NPROC) and what it left shows which.
				end = Exit{Limit: lim, Detail: detail}
			}
		case s := <-sigs:
			if s == killSignal && ip.spec.Level == LevelNamespaces {
				break // maybe the plugin's: the host sends SIGKILL here (Kill)
			}
			if s == killSignal {
				code = 137
				break
			}
			_ = unix.Kill(-plugin.Pid, s.(syscall.Signal))
		case <-tick.C:
			if lim, detail := w.check(); lim != "" {
				end = Exit{Limit: lim, Detail: detail}
				code = 137
			}
		}
	}
	sweep(ip.spec.Level == LevelNamespaces)
	end.Refused = ip.refused.list()
	ip.report(end, nil)
	return code
}

func exitCode(ws unix.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 1
}
