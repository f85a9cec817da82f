package pluginv1

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// A plugin that fails every health probe exhausts its budget even when
// each run outlasts reset_after (probe interval and timeout longer than
// it): only uptime up to a passed probe resets the count.
func TestUnhealthyUptimeDoesNotResetBudget(t *testing.T) {
	f := newHostFixture(t)
	h := newTestHost(t, f, func(o *host.Options) {
		o.HealthInterval = 100 * time.Millisecond
		o.Restart = host.RestartPolicy{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond, Budget: 2, ResetAfter: time.Millisecond}
	})
	inst := f.install(t, badBin, "health-error")
	if err := AddProvider(h, inst); err != nil {
		t.Fatal(err)
	}
	s := waitState(t, h, inst.Name, "failed", func(s host.Status) bool { return s.State == host.StateFailed })
	if !strings.Contains(s.LastFailure, "health probe failed (restart budget of 2 exhausted)") {
		t.Fatalf("after three failed probes: %+v", s)
	}
}

// A plugin of either kind that dies at start shows why in its status:
// the exit status in the last failure, and the last stderr lines
// (redacted as logged) beside it, never inside the failure's text.
func TestFailedPluginShowsExitAndStderr(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	script := filepath.Join(t.TempDir(), "provider")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho loading config >&2\necho 'config invalid: password=hunter2' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inst := f.install(t, script, "")
	if err := AddProvider(h, inst); !errors.Is(err, ErrHandshake) {
		t.Fatalf("first launch: %v", err)
	}
	if err := executa.Add(h, pyPlugin(t, "py-dies", "die-at-start"), roomy(executa.Options{})); err == nil {
		t.Fatal("an Executa plugin that exits at start started")
	}
	for _, tt := range []struct{ name, status string }{{inst.Name, "exit status 3"}, {"py-dies", "exit status 4"}} {
		s := waitState(t, h, tt.name, "failed", func(s host.Status) bool { return s.State == host.StateFailed })
		if !strings.Contains(s.LastFailure, tt.status) {
			t.Errorf("%s: last failure %q does not name %q", tt.name, s.LastFailure, tt.status)
		}
		want := []string{"loading config", "config invalid: password=[REDACTED]"}
		if !slices.Equal(s.LastStderr, want) {
			t.Errorf("%s: last stderr %q, want %q", tt.name, s.LastStderr, want)
		}
		if strings.Contains(s.LastFailure, "config invalid") || strings.Contains(fmt.Sprint(s), "hunter2") {
			t.Errorf("%s: stderr in the failure text or unredacted: %+v", tt.name, s)
		}
	}
}

// A provider whose program the plugin's own uid cannot execute (a root
// host gives each plugin one) fails with a stderr line that names the
// program and the uid.
func TestUnexecutableProgramNamed(t *testing.T) {
	testenv.NeedsRoot(t, "only a root host runs plugins as uids of their own")
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	inst := f.install(t, providerBin, "")
	if err := os.Chmod(inst.Binary, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := AddProvider(h, inst); !errors.Is(err, ErrHandshake) {
		t.Fatalf("launch: %v", err)
	}
	s := waitState(t, h, inst.Name, "failed", func(s host.Status) bool { return s.State == host.StateFailed })
	want := "cannot execute the plugin's program " + inst.Binary + ": permission denied"
	if !slices.ContainsFunc(s.LastStderr, func(l string) bool { return strings.Contains(l, want) && strings.Contains(l, "uid ") }) {
		t.Fatalf("status %+v does not say %q", s, want)
	}
}
