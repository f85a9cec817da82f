package host

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// Another local user who can write the state directory (or who made it
// first) must not get the host to write where they choose: a link at
// host.lock's place is refused, and its target is not truncated.
func TestLockStateDirRefusesWhatAnotherUserPlanted(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, StateLockName)); err != nil {
		t.Fatal(err)
	}
	if l, err := LockStateDir(dir); !errors.Is(err, fsutil.ErrPlanted) {
		if l != nil {
			l.Release()
		}
		t.Fatalf("a link at the lock's place: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the link's target was written: %q", b)
	}

	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if l, err := LockStateDir(open); !errors.Is(err, fsutil.ErrPlanted) {
		if l != nil {
			l.Release()
		}
		t.Fatalf("a state directory anyone may write to: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(open, StateLockName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("something was made in the refused directory: %v", err)
	}

	// Made 0700 whatever the umask (run the test under umask 000).
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o700); err != nil { // t.TempDir's follows the umask
		t.Fatal(err)
	}
	fresh := filepath.Join(parent, "state")
	l, err := LockStateDir(fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a new state directory: %v %v", fi.Mode(), err)
	}
}
