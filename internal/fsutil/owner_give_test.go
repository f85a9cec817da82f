package fsutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The owner of a directory root opens a lock file in can put there
// (rename) a file of another user's that sits in a directory it may
// write. Root must not take that file for its lock (the state lock is
// truncated to hold the pid) nor give it to the directory's owner, who
// could then read and change it: only root's own lock (made now, or
// left by an earlier command of root's) is given away.
func TestOpenLockFileGivesAwayOnlyRootsOwn(t *testing.T) {
	testenv.NeedsRoot(t, "a lock file opened by root in another user's directory")
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv is required (util-linux)")
	}
	const victim = 64993
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, drop := filepath.Join(base, "state"), filepath.Join(base, "drop")
	for _, d := range []string{dir, drop} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, serviceUID, serviceGID); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(drop, "victims-secret")
	if err := os.WriteFile(secret, []byte("the victim's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(secret, victim, victim); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "host.lock")
	id := strconv.Itoa(serviceUID)
	if out, err := exec.Command(setpriv, "--reuid="+id, "--regid="+strconv.Itoa(serviceGID), "--clear-groups",
		"mv", secret, lock).CombinedOutput(); err != nil {
		t.Fatalf("the directory's owner moving the file: %v: %s", err, out)
	}
	if f, err := OpenLockFile(lock); !errors.Is(err, ErrPlanted) {
		if f != nil {
			f.Close()
		}
		t.Errorf("a third user's file was taken as the lock: %v", err)
	}
	if u, _ := ownerOf(t, lock); u != victim {
		t.Fatalf("root gave the other user's file to uid %d", u)
	}
	if b, _ := os.ReadFile(lock); string(b) != "the victim's" {
		t.Fatalf("the other user's file changed: %q", b)
	}
	// Root's own lock is still given to the directory's owner.
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	f, err := OpenLockFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if u, _ := ownerOf(t, lock); u != serviceUID {
		t.Fatalf("root's new lock belongs to uid %d, want the directory's %d", u, serviceUID)
	}
}
