package pluginv1

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/testenv"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// The supervisor tests' helpers: hosts of test plugins, their states,
// calls and processes.

// pyPlugin is the Executa test plugin in the given behaviour.
func pyPlugin(t testing.TB, name string, args ...string) executa.PluginConfig {
	t.Helper()
	py, err := exec.LookPath(testenv.Python())
	if err != nil {
		t.Fatal("python3 is required (make tools installs it)")
	}
	script, _ := filepath.Abs("../executa/testdata/plugin.py")
	return executa.PluginConfig{Name: name, Command: py, Args: append([]string{script}, args...),
		Credentials: map[string]string{"API_KEY": "tickets.executa"}}
}

// newTestHost is a host over the fixture's broker and evidence, with fast
// restarts and probes, shut down when the test ends.
func newTestHost(t *testing.T, f *hostFixture, mutate func(*host.Options)) *host.Host {
	t.Helper()
	opts := f.opts
	opts.Restart = host.RestartPolicy{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond, Budget: 3, ResetAfter: time.Hour}
	opts.HealthInterval = time.Hour
	if mutate != nil {
		mutate(&opts)
	}
	h := host.New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	return h
}

func statusOf(h *host.Host, name string) host.Status {
	for _, s := range h.Status() {
		if s.Name == name {
			return s
		}
	}
	return host.Status{}
}

// waitState polls until the plugin's status satisfies ok.
func waitState(t *testing.T, h *host.Host, name string, what string, ok func(host.Status) bool) host.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if s := statusOf(h, name); ok(s) {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never %s: %+v", name, what, statusOf(h, name))
	return host.Status{}
}

func invokeList(h *host.Host, name string) (*host.Outcome, error) {
	return h.Invoke(context.Background(), name, host.InvokeRequest{Method: listTickets,
		Input: &ticketsv1.ListTicketsRequest{Project: "core"}, Deadline: time.Now().Add(20 * time.Second)})
}

func invokeTool(h *host.Host, name, tool string) (*host.Outcome, error) {
	return h.Invoke(context.Background(), name, host.InvokeRequest{Method: tool, Deadline: time.Now().Add(20 * time.Second)})
}

func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for testenv.ProcessAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) survived its plugin", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killPid SIGKILLs one process (never a group: pid 0 or -1 would hit the
// test's own).
func killPid(t *testing.T, pid int) {
	t.Helper()
	if pid <= 1 {
		t.Fatalf("no process to kill (pid %d)", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
