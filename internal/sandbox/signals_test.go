//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

func init() { testModes["signal-init"] = signalInit }

// signalPluginCode is what the signalling plugin exits with once it has
// sent every signal: the code the host must see.
const signalPluginCode = 7

// signalInit is a plugin that sends every signal, 1 to 64, to its init
// every way it can name it: as its parent, by pid (1, in its own pid
// namespace), to the init's process group, and to each of the init's
// threads. It ignores every signal itself (the init forwards the stop
// signals to it), prints how many of its sends the kernel accepted and
// whether its parent is still the init, and exits with
// signalPluginCode.
func signalInit() int {
	signal.Ignore()
	init := os.Getppid()
	pgid, _ := syscall.Getpgid(init)
	self := os.Getpid()
	sent := 0
	send := func(err error) {
		if err == nil {
			sent++
		}
	}
	for n := 1; n <= 64; n++ {
		s := syscall.Signal(n)
		send(syscall.Kill(init, s))
		if os.Getenv("SIGNAL_NS") != "" {
			send(syscall.Kill(1, s))
		}
		if pgid > 0 {
			send(syscall.Kill(-pgid, s))
		}
		// The init's threads: in its own namespace they have the pids
		// after its own and before the plugin's; elsewhere, near it.
		for tid := init; tid < init+64 && tid != self; tid++ {
			send(syscall.Tgkill(init, tid, s))
		}
	}
	// Were the init stopped, it could not reap the plugin.
	_ = syscall.Kill(init, syscall.SIGCONT)
	fmt.Printf("sent %d\nparent still the init: %v\n", sent, os.Getppid() == init)
	return signalPluginCode
}

// A plugin that sends its init every signal it can, every way it can
// name it, does not end the init: the plugin's own exit status comes
// back, nothing is reported as a limit, and no goroutine dump of the
// init's lands in the plugin's stderr (as it did when a plugin of an
// unprivileged host sent SIGQUIT, SIGSEGV or SIGILL to its init at the
// namespaces level, where the init is pid 1 but, being a Go program,
// handles every signal).
func TestInitSurvivesItsPluginsSignals(t *testing.T) {
	for _, level := range Detect().Levels() {
		t.Run(string(level), func(t *testing.T) {
			var env []string
			if level == LevelNamespaces {
				env = append(env, "SIGNAL_NS=1")
			}
			run := runPlugin(t, level, "signal-init", env...)
			t.Logf("uid %d: %s", os.Getuid(), strings.ReplaceAll(strings.TrimSpace(run.stdout), "\n", "; "))
			if run.code != signalPluginCode {
				t.Errorf("exit status %d, want the plugin's %d\nstdout:\n%s\nstderr:\n%.2000s", run.code, signalPluginCode, run.stdout, run.stderr)
			}
			if run.exit.Limit != "" || run.exit.Detail != "" || len(run.exit.Refused) > 0 {
				t.Errorf("the init reported %+v, want nothing", run.exit)
			}
			if !strings.Contains(run.stdout, "parent still the init: true") {
				t.Errorf("the plugin lost its init:\n%s", run.stdout)
			}
			if strings.Contains(run.stderr, "goroutine ") || strings.Contains(run.stderr, "SIG") {
				t.Errorf("a goroutine dump in the plugin's stderr:\n%.2000s", run.stderr)
			}
		})
	}
}
