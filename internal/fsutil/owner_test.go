package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Owners no account on the machine needs to have.
const (
	serviceUID = 64999
	serviceGID = 64998
)

func ownerOf(t *testing.T, name string) (int, int) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid), int(st.Gid)
}

// A key rewritten by root keeps the service's owner and group, and a new
// key root writes into the service's directory is the service's: the
// service can read what the rotation CLI wrote.
func TestWriteFileKeepsOwnerWhenRootWrites(t *testing.T) {
	testenv.NeedsRoot(t, "make a file another user owns")
	dir := t.TempDir()
	if err := os.Chown(dir, serviceUID, serviceGID); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "signing-keys.pem")
	if err := os.WriteFile(key, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(key, serviceUID, serviceGID+1); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(key, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u, g := ownerOf(t, key); u != serviceUID || g != serviceGID+1 {
		t.Fatalf("rewritten by root: owner %d:%d, want %d:%d", u, g, serviceUID, serviceGID+1)
	}
	fresh := filepath.Join(dir, "ca-key.pem")
	if err := WriteFile(fresh, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u, g := ownerOf(t, fresh); u != serviceUID || g != serviceGID {
		t.Fatalf("new file by root: owner %d:%d, want the directory's %d:%d", u, g, serviceUID, serviceGID)
	}
	lock, err := OpenLockFile(filepath.Join(dir, "signing-keys.pem.lock"))
	if err != nil {
		t.Fatal(err)
	}
	lock.Close()
	if u, g := ownerOf(t, lock.Name()); u != serviceUID || g != serviceGID {
		t.Fatalf("lock file by root: owner %d:%d", u, g)
	}
}

// An unprivileged writer cannot keep another user's ownership: it writes
// nothing and says as whom to run.
func TestWriteFileRefusesAnotherUsersFile(t *testing.T) {
	testenv.NeedsRoot(t, "make a file another user owns")
	dir := t.TempDir()
	key := filepath.Join(dir, "signing-keys.pem")
	if err := os.WriteFile(key, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(key, serviceUID, serviceGID); err != nil {
		t.Fatal(err)
	}
	// A writer that may write the directory but is not the file's owner.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, serviceUID+1, serviceGID); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setresuid(-1, serviceUID+1, -1); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(key, []byte("new"), 0o600)
	if rerr := syscall.Setresuid(-1, 0, -1); rerr != nil {
		t.Fatal(rerr)
	}
	var oe *OwnerError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOwner) || oe.UID != serviceUID || !strings.Contains(err.Error(), "run it as") {
		t.Fatalf("err = %v, want an OwnerError for uid %d", err, serviceUID)
	}
	if b, _ := os.ReadFile(key); string(b) != "old" {
		t.Fatalf("the refused write changed the file: %q", b)
	}
	if u, _ := ownerOf(t, key); u != serviceUID {
		t.Fatalf("owner changed to %d", u)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".signing-keys.pem.tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
