//go:build linux

package supervise

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// A leader that spawns a child and exits: the child is killed with the
// group and the private directory is gone by the time Exited closes.
func TestProcKillsGroupAndRemovesDirs(t *testing.T) {
	for _, tt := range []struct {
		name string
		stop func(*Proc)
	}{
		{"leader crashes", func(*Proc) {}},
		{"killed", func(p *Proc) { p.Kill() }},
		{"stopped", func(p *Proc) {
			p.Stop(Step{Wait: 10 * time.Millisecond, Signal: 15}, Step{Wait: time.Second, Signal: 9})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			private := filepath.Join(dir, "private")
			if err := os.Mkdir(private, 0o700); err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(dir, "child.pid")
			script := `sleep 300 & echo $! > ` + pidFile + `; `
			if tt.name == "leader crashes" {
				script += `exit 3`
			} else {
				script += `sleep 300`
			}
			p, err := Start(exec.Command("/bin/sh", "-c", script), ProcOptions{Dirs: []string{private}})
			if err != nil {
				t.Fatal(err)
			}
			child := waitPid(t, pidFile)
			tt.stop(p)
			select {
			case <-p.Exited():
			case <-time.After(10 * time.Second):
				t.Fatal("no exit")
			}
			// Exited closes once the group has been sent SIGKILL and the
			// child has let go of the stderr pipe, which it does on its way
			// out, before it has exited: wait for the exit itself.
			testenv.WaitGone(t, child, "the child, which survived its plugin")
			if _, err := os.Stat(private); !os.IsNotExist(err) {
				t.Fatalf("private dir left behind: %v", err)
			}
		})
	}
}

func waitPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no child pid")
	return 0
}

// One record per line whatever the Write boundaries; values redacted;
// an over-long line clipped and marked.
func TestLineLog(t *testing.T) {
	var buf bytes.Buffer
	l := NewLineLog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), slog.LevelWarn, nil)
	for _, w := range []string{"first ha", "lf\nsecond password=hun", "ter2\n", strings.Repeat("x", MaxLine+10), "\ntail"} {
		if _, err := l.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	l.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d records, want 4:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`"line":"first half"`, `"line":"second password=[REDACTED]"`, `"clipped":true`, `"line":"tail"`} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], `"level":"WARN"`) {
			t.Errorf("record %d = %s, want %s at WARN", i, lines[i], want)
		}
	}
	if strings.Contains(buf.String(), "hunter2") {
		t.Fatal("secret logged")
	}
}

// A PEM private key printed to stderr a line at a time is masked from its
// BEGIN line to its END line; the lines around it are kept.
func TestLineLogMasksAPrivateKeyOverLines(t *testing.T) {
	var buf bytes.Buffer
	l := NewLineLog(slog.New(slog.NewJSONHandler(&buf, nil)), slog.LevelWarn, nil)
	key := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBc3kZ7Qp2\nAwEHoUQDQgAEx9Vw\n-----END EC PRIVATE KEY-----\n"
	if _, err := l.Write([]byte("loading\n" + key + "loaded\n")); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, body := range []string{"MHcCAQEEIBc3kZ7Qp2", "AwEHoUQDQgAEx9Vw"} {
		if strings.Contains(out, body) {
			t.Fatalf("a line of the key was logged: %s", out)
		}
	}
	if !strings.Contains(out, `"line":"loading"`) || !strings.Contains(out, `"line":"loaded"`) {
		t.Fatalf("the lines around the key were lost: %s", out)
	}
}
