package pluginv1

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/sandbox"
)

// A plugin of either kind ends in every way there is — it crashes, it
// exits with status 0, its runtime is shut down, its runtime kills it,
// the host shuts down — and every time the handles it holds and its
// proxy pass are revoked once the end is over. One owner does it: the
// launch layer, after the exit of the process it started (and, for a
// Shutdown, before the plugin is told).
func TestEveryEndRevokesHandlesAndPass(t *testing.T) {
	// Each kind starts a plugin for an end, supervised by a host (h) or
	// as a bare runtime.
	kinds := []struct {
		name  string
		start func(t *testing.T, f *hostFixture, h *host.Host, end string) started
	}{
		{"plugin/v1", startProviderFor},
		{"executa", startExecutaFor},
	}
	ends := []string{"crash", "exit 0", "Shutdown", "kill", "host shutdown"}
	for _, k := range kinds {
		for _, end := range ends {
			t.Run(k.name+"/"+end, func(t *testing.T) {
				f := newHostFixtureWith(t, time.Hour) // passes on
				f.opts.Sandbox = sandbox.Config{Level: sandbox.LevelOff}
				h := newTestHost(t, f, nil) // the fixture's options, the sandbox off
				p := k.start(t, f, h, end)
				passes := f.b.issued()
				if len(passes) == 0 {
					t.Fatal("the plugin got no pass")
				}
				held := holdHandle(t, f, p.name)
				for _, hd := range append(passes, held) {
					if _, err := f.b.Resolve(context.Background(), hd); err != nil {
						t.Fatalf("a handle before the end: %v", err)
					}
				}
				p.end(t)
				for i, hd := range append(passes, held) {
					if _, err := f.b.Resolve(context.Background(), hd); !errors.Is(err, broker.ErrHandleRevoked) {
						t.Errorf("handle %d (of %d; the last is one the plugin held) after the end: %v, want revoked", i+1, len(passes)+1, err)
					}
				}
			})
		}
	}
}

// started is a plugin started for an end: end ends it and returns once
// the end is over (the process has exited; for a supervised plugin, the
// supervisor has seen it).
type started struct {
	name string
	end  func(t *testing.T)
}

// holdHandle is a handle the plugin holds outside any invocation in
// flight (one whose invocation's revocation is owed, say): only the
// plugin's end revokes it.
func holdHandle(t *testing.T, f *hostFixture, plugin string) string {
	t.Helper()
	iss, err := f.b.Broker.Issue(context.Background(), broker.IssueRequest{PluginID: plugin, InvocationID: "held",
		Intent: "tickets.executa", Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle
}

func (r *recordingBroker) issued() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.handles...)
}

// signalGroup sends sig to the plugin's process group, as a crash (or
// an operator) would.
func signalGroup(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if pid <= 0 {
		t.Fatal("the plugin has no pid")
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		t.Fatal(err)
	}
}

// supervisedEnd ends a plugin under h: crash and exit 0 from the
// plugin's side (the supervisor sees the exit), host shutdown from the
// host's.
func supervisedEnd(h *host.Host, name, end string, exit0 func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) {
		switch end {
		case "crash":
			signalGroup(t, statusOf(h, name).Pid, syscall.SIGKILL)
			waitState(t, h, name, "restarted after the crash", func(s host.Status) bool { return s.Restarts >= 1 })
		case "exit 0":
			exit0(t)
		case "host shutdown":
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h.Shutdown(ctx)
		default:
			t.Fatalf("no supervised end %q", end)
		}
	}
}

func startProviderFor(t *testing.T, f *hostFixture, h *host.Host, end string) started {
	name := f.inst.Name
	switch end {
	case "Shutdown", "kill":
		p, err := Launch(context.Background(), f.inst, f.opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Kill(); p.Release() })
		return started{name, func(t *testing.T) {
			if end == "kill" {
				p.Kill()
				<-p.Exited()
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			<-p.Exited()
		}}
	}
	if err := AddProvider(h, f.inst); err != nil {
		t.Fatal(err)
	}
	// A provider that exits with status 0 while it serves is a fault
	// too: the SDK exits 0 on SIGTERM.
	return started{name, supervisedEnd(h, name, end, func(t *testing.T) {
		signalGroup(t, statusOf(h, name).Pid, syscall.SIGTERM)
		waitState(t, h, name, "restarted after exiting 0", func(s host.Status) bool { return s.Restarts >= 1 })
	})}
}

func startExecutaFor(t *testing.T, f *hostFixture, h *host.Host, end string) started {
	name := "py-ends"
	switch end {
	case "Shutdown", "kill":
		opts := roomy(executa.Options{Broker: f.b, EgressProxy: f.opts.EgressProxy, InterceptCAFile: f.opts.InterceptCAFile,
			Sandbox: f.opts.Sandbox})
		p, err := executa.Start(context.Background(), pyPlugin(t, name), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		return started{name, func(t *testing.T) {
			if end == "kill" {
				p.Kill()
			} else if err := p.Shutdown(); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			<-p.Exited()
		}}
	}
	if err := executa.Add(h, pyPlugin(t, name, "exit-after-one"), roomy(executa.Options{})); err != nil {
		t.Fatal(err)
	}
	// An Executa plugin that exits 0 has ended cleanly: it is stopped
	// until the next call.
	return started{name, supervisedEnd(h, name, end, func(t *testing.T) {
		if _, err := invokeTool(h, name, "context"); err != nil {
			t.Fatal(err)
		}
		waitState(t, h, name, "stopped after exiting 0", func(s host.Status) bool { return s.State == host.StateStopped })
	})}
}
