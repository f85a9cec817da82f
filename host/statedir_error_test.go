package host

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// A state directory this user may not make (a container's uid with
// HOME=/, a read-only root file system) is named with the fix, not only
// as "mkdir /.local: permission denied".
func TestStateDirErrorNamesTheFix(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS} {
		err := StateDirError(&fs.PathError{Op: "mkdir", Path: "/.local", Err: errno})
		if !strings.HasPrefix(err.Error(), "state directory: mkdir /.local: ") || !strings.Contains(err.Error(), "set state_dir, or XDG_STATE_HOME,") {
			t.Errorf("%v: %v", errno, err)
		}
	}
	if err := StateDirError(&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.ENOSPC}); strings.Contains(err.Error(), "set state_dir") {
		t.Errorf("a full disk: %v", err)
	}
}

// A state directory this user may enter but not write (a container's
// fresh volume, root's 0755) is named with whose it must be.
func TestLockStateDirNotWritableNamesTheFix(t *testing.T) {
	testenv.NeedsRoot(t, "a root-owned directory checked by another user")
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Setresuid(-1, 64997, -1); err != nil {
		t.Fatal(err)
	}
	l, err := LockStateDir(dir)
	if rerr := syscall.Setresuid(-1, 0, -1); rerr != nil {
		t.Fatal(rerr)
	}
	if l != nil {
		l.Release()
	}
	if err == nil || !strings.Contains(err.Error(), "permission denied (the state directory and what it holds must be this user's") {
		t.Fatalf("LockStateDir in root's 0755 directory as another user: %v", err)
	}
}

// What root's commands (an install or a port with no host running) make
// in a service user's state directory stays the service's: the state
// lock and a new evidence log belong to the directory's owner, so the
// service's host can still take them. A file root's own stays root's.
func TestRootMadeStateFilesStayTheServices(t *testing.T) {
	testenv.NeedsRoot(t, "giving a directory to a service user")
	const uid, gid = 64996, 64995
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	l, err := LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	ev, err := evidence.Open(filepath.Join(dir, "evidence.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ev.Close()
	for _, name := range []string{StateLockName, "evidence.jsonl"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, name), &st); err != nil || st.Uid != uid || st.Gid != gid {
			t.Errorf("%s: owner %d:%d (%v), want the directory's %d:%d", name, st.Uid, st.Gid, err, uid, gid)
		}
	}
	// The service's host takes them.
	if err := syscall.Setresuid(-1, uid, -1); err != nil {
		t.Fatal(err)
	}
	l, err = LockStateDir(dir)
	var evErr error
	if ev, evErr = evidence.Open(filepath.Join(dir, "evidence.jsonl")); evErr == nil {
		ev.Close()
	}
	if rerr := syscall.Setresuid(-1, 0, -1); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || evErr != nil {
		t.Fatalf("the service after root's command: lock %v, evidence %v", err, evErr)
	}
	l.Release()

	// An existing root-owned log in the directory is not given away.
	rootLog := filepath.Join(dir, "root.jsonl")
	if err := os.WriteFile(rootLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ev, err = evidence.Open(rootLog); err != nil {
		t.Fatal(err)
	}
	ev.Close()
	if st, _ := os.Stat(rootLog); st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatal("root's own file was given to the service")
	}
}
