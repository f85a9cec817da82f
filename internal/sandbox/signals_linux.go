package sandbox

import (
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Signals between the host, the init and the plugin.
//
// The plugin must not be able to end its init, which sweeps what the
// plugin leaves and reports why it ended. A Go program dies of most
// signals by default (SIGTERM, SIGHUP, SIGINT exit; SIGQUIT, SIGILL,
// SIGTRAP, SIGABRT, SIGSYS and a SIGSEGV, SIGBUS or SIGFPE sent by kill
// exit with a goroutine dump on stderr, which is the plugin's), and the
// kernel's protections of a pid namespace's init cover only signals it
// has no handler for, while the Go runtime has one for every signal. So:
//
//   - the init catches every catchable signal (catchSignals), and acts
//     only on the host's: its stop signals, forwarded to the plugin's
//     process group (harmless when the plugin sends them: it could signal
//     itself), and, at the landlock level, killSignal;
//   - at the namespaces level the init is pid 1 of the plugin's pid
//     namespace, where the plugin can send it any signal it handles, and
//     nothing tells the init who sent one: there it ignores killSignal,
//     and the host ends the sandbox with SIGKILL, which the kernel
//     delivers to a namespace's init only from outside the namespace and
//     which takes every process of the namespace with it; the init's
//     death signal (the host dying) is SIGKILL too;
//   - at the landlock level the plugin cannot signal the init: with a
//     root host it runs as another uid, and with an unprivileged one its
//     Landlock domain scopes its signals (ABI 6; on ABI 4 and 5 only the
//     first point holds, and SIGKILL or SIGSTOP from the plugin reach the
//     init);
//   - once the plugin runs, the init's own stderr is /dev/null: nothing
//     the init could still print belongs in the plugin's log.

// killSignal asks the init to kill the whole sandbox now and exit, at
// the landlock level: the host's last step of a stop, and the init's
// death signal, so that a dying host takes every process of the sandbox
// with it.
const killSignal = syscall.SIGUSR2

// stopSignals are the host's stop signals, which the init forwards to
// the plugin's process group.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// catchSignals has the init catch every signal that can be caught: those
// it may act on (stopSignals and killSignal) arrive on the returned
// channel, the rest are dropped.
func catchSignals() <-chan os.Signal {
	acted := append(slices.Clone(stopSignals), killSignal)
	var rest []os.Signal
	for n := 1; n <= 64; n++ {
		s := syscall.Signal(n)
		if s != syscall.SIGKILL && s != syscall.SIGSTOP && !slices.Contains(acted, os.Signal(s)) {
			rest = append(rest, s)
		}
	}
	dropped := make(chan os.Signal, 16)
	signal.Notify(dropped, rest...)
	go func() {
		for range dropped {
		}
	}()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, acted...)
	return sigs
}

// deathSignal is the init's parent-death signal at a level.
func deathSignal(level Level) syscall.Signal {
	if level == LevelNamespaces {
		return syscall.SIGKILL
	}
	return killSignal
}

// quietStderr points the init's stderr at /dev/null (the plugin has its
// own copy of the original).
func quietStderr() {
	fd, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_ = unix.Dup3(fd, 2, 0)
	unix.Close(fd)
}

// Kill ends a sandbox, given its init's process id, for
// supervise.ProcOptions.Kill: every process of the sandbox dies and the
// init exits. An init that is pid 1 of a pid namespace of its own (the
// namespaces level) gets SIGKILL, which kills the namespace whole; any
// other gets killSignal and sweeps the sandbox itself.
func Kill(pid int) {
	if namespaceInit(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(pid, killSignal)
}

// namespaceInit reports whether pid is process 1 of a pid namespace
// below ours: the last of its NSpid numbers is its pid in its own
// namespace.
func namespaceInit(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) > 1 && f[len(f)-1] == "1"
		}
	}
	return false
}
