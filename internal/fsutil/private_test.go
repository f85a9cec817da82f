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

// A link another user planted where a lock file goes is refused: root
// would otherwise open its target and give it to the directory's owner.
func TestOpenLockFileRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(target, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "signing-keys.pem.lock")
	if err := os.Symlink(target, lock); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, serviceUID, serviceGID); err != nil {
			t.Fatal(err)
		}
	}
	if f, err := OpenLockFile(lock); !errors.Is(err, ErrPlanted) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("a symbolic link was opened as the lock file: %v", err)
	}
	if u, _ := ownerOf(t, target); u != os.Geteuid() {
		t.Fatalf("the link's target was given to uid %d", u)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(target, lock); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenLockFile(lock); !errors.Is(err, ErrPlanted) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("a hard link was opened as the lock file: %v", err)
	}
	if u, _ := ownerOf(t, target); u != os.Geteuid() {
		t.Fatalf("the hard link's file was given to uid %d", u)
	}
	if b, _ := os.ReadFile(target); string(b) != "root's" {
		t.Fatalf("the target changed: %q", b)
	}
}

func TestCheckPrivateDir(t *testing.T) {
	mkdir := func(t *testing.T, parent string, mode os.FileMode) string {
		t.Helper()
		d := filepath.Join(parent, "state")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	chmod := func(t *testing.T, d string, mode os.FileMode) {
		t.Helper()
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("own", func(t *testing.T) {
		if err := CheckPrivateDir(mkdir(t, t.TempDir(), 0o700)); err != nil {
			t.Fatal(err)
		}
	})
	for _, mode := range []os.FileMode{0o777, 0o770, 0o702} {
		t.Run("writable "+mode.String(), func(t *testing.T) {
			if err := CheckPrivateDir(mkdir(t, t.TempDir(), mode)); !errors.Is(err, ErrPlanted) {
				t.Fatalf("mode %v: %v", mode, err)
			}
		})
	}
	t.Run("a link to our own directory, chosen by the operator", func(t *testing.T) {
		parent := t.TempDir()
		d := mkdir(t, parent, 0o700)
		if err := os.Symlink(d, filepath.Join(parent, "link")); err != nil {
			t.Fatal(err)
		}
		if err := CheckPrivateDir(filepath.Join(parent, "link")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("our own in a pod's shared emptyDir (0777)", func(t *testing.T) {
		parent := t.TempDir()
		d := mkdir(t, parent, 0o700)
		chmod(t, parent, 0o777)
		if err := CheckPrivateDir(d); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(parent, "link")
		if err := os.Symlink(d, link); err != nil {
			t.Fatal(err)
		}
		if err := CheckPrivateDir(link); !errors.Is(err, ErrPlanted) {
			t.Fatalf("a link in a directory anyone may write to: %v", err)
		}
	})
	t.Run("a link in the temp directory", func(t *testing.T) {
		parent := t.TempDir()
		d := mkdir(t, parent, 0o700)
		chmod(t, parent, os.ModeSticky|0o777)
		if err := CheckPrivateDir(d); err != nil {
			t.Fatalf("our own directory in a sticky one: %v", err)
		}
		link := filepath.Join(parent, "link")
		if err := os.Symlink(d, link); err != nil {
			t.Fatal(err)
		}
		if err := CheckPrivateDir(link); !errors.Is(err, ErrPlanted) {
			t.Fatal(err)
		}
	})
	t.Run("another user's", func(t *testing.T) {
		testenv.NeedsRoot(t, "make a directory another user owns")
		parent := t.TempDir()
		d := mkdir(t, parent, 0o700)
		if err := os.Chown(d, serviceUID, serviceGID); err != nil {
			t.Fatal(err)
		}
		// Root writes into a service user's own directory.
		if err := CheckPrivateDir(d); err != nil {
			t.Fatalf("root, a service's directory: %v", err)
		}
		// Not when anyone could have made it (the fix is to remove it,
		// not to chmod it, even when it is open as well).
		for _, mode := range []os.FileMode{os.ModeSticky | 0o777, 0o777} {
			chmod(t, parent, mode)
			chmod(t, d, 0o777)
			if err := CheckPrivateDir(d); !errors.Is(err, ErrPlanted) || !strings.Contains(err.Error(), "remove it") {
				t.Fatalf("root, another user's directory in a directory of mode %v: %v", mode, err)
			}
		}
		chmod(t, d, 0o700)
		chmod(t, parent, 0o755)
		chmod(t, filepath.Dir(parent), 0o755)
		// Nor does anyone but root.
		if err := syscall.Setresuid(-1, serviceUID+1, -1); err != nil {
			t.Fatal(err)
		}
		err := CheckPrivateDir(d)
		rootsErr := CheckPrivateDir(parent)
		if rerr := syscall.Setresuid(-1, 0, -1); rerr != nil {
			t.Fatal(rerr)
		}
		if !errors.Is(err, ErrPlanted) {
			t.Fatalf("another user's directory: %v", err)
		}
		// Everyone trusts root's (an /etc/airlock that holds a key).
		if rootsErr != nil {
			t.Fatalf("root's directory: %v", rootsErr)
		}
	})
}

// A file Airlock keeps for itself is refused when another user could
// rewrite it: by its mode, or because it is theirs. Root's own, this
// process's own, and (for root's commands) the directory owner's pass.
func TestCheckOwnFile(t *testing.T) {
	testenv.NeedsRoot(t, "giving files to other users")
	dir := t.TempDir()
	if err := os.Chown(dir, serviceUID, serviceGID); err != nil {
		t.Fatal(err)
	}
	check := func(uid int, mode os.FileMode) error {
		p := filepath.Join(dir, "evidence.jsonl")
		_ = os.Remove(p)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, serviceGID); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return CheckOwnFile(p, st)
	}
	for _, ok := range []struct {
		uid  int
		mode os.FileMode
	}{{0, 0o600}, {serviceUID, 0o600}, {serviceUID, 0o640}} {
		if err := check(ok.uid, ok.mode); err != nil {
			t.Errorf("uid %d mode %#o: %v", ok.uid, ok.mode, err)
		}
	}
	if err := check(serviceUID, 0o620); !errors.Is(err, ErrPlanted) {
		t.Errorf("group-writable: %v", err)
	}
	err := check(serviceUID+1, 0o600)
	if !errors.Is(err, ErrPlanted) || !strings.Contains(err.Error(), "belongs to user") {
		t.Errorf("another user's file in the service's directory: %v", err)
	}
}
