package host

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
