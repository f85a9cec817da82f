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

// Each refusal names the fix that works for the directory at hand: a
// chmod only for one that is rightly this user's; for root's directory
// that this user could use only through its group (an admin group's
// 2775) or another user's (a bind mount a container's uid does not own),
// an owner — a chmod would leave this user out.
func TestCheckPrivateDirNamesAFixThatWorks(t *testing.T) {
	testenv.NeedsRoot(t, "make directories of root's and another user's, checked by a third")
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(parent), 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, uid int, mode os.FileMode) string {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, serviceGID); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := []struct {
		dir       string
		fix, not  string
		asService bool
	}{
		{mk("own-group-writable", serviceUID, os.ModeSetgid|0o775), "chmod go-w it", "chown", true},
		{mk("roots-group-writable", 0, os.ModeSetgid|0o775), "have root give it to uid 64999 (chown and chmod 700)", "chmod go-w", true},
		{mk("another-users", serviceUID+1, 0o777), "have root give it to uid 64999 (chown and chmod 700)", "chmod go-w", true},
		{mk("root-runs-in-its-own", 0, 0o775), "chmod go-w it", "chown", false},
	}
	for _, c := range cases {
		var err error
		if c.asService {
			if err := syscall.Setresuid(-1, serviceUID, -1); err != nil {
				t.Fatal(err)
			}
			err = CheckPrivateDir(c.dir)
			if rerr := syscall.Setresuid(-1, 0, -1); rerr != nil {
				t.Fatal(rerr)
			}
		} else {
			err = CheckPrivateDir(c.dir)
		}
		if !errors.Is(err, ErrPlanted) || !strings.Contains(err.Error(), c.fix) || strings.Contains(err.Error(), c.not) {
			t.Errorf("%s: %v (want %q, not %q)", filepath.Base(c.dir), err, c.fix, c.not)
		}
	}
}

// Root (a repair, check-config) meeting the service's evidence log in a
// directory of root's (/var/log) cannot tell the service's user from
// another: the refusal must not tell it to take the file for root, which
// would leave the service unable to write it, but to run as that user if
// it is the service's.
func TestCheckOwnFileRootInRootsDirectory(t *testing.T) {
	testenv.NeedsRoot(t, "giving a file to another user")
	p := filepath.Join(t.TempDir(), "evidence.jsonl")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, serviceUID, serviceGID); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckOwnFile(p, st)
	if !errors.Is(err, ErrPlanted) {
		t.Fatalf("another user's file in root's directory: %v", err)
	}
	if strings.Contains(err.Error(), "give it to root") || !strings.Contains(err.Error(), "run this as uid 64999") {
		t.Fatalf("the fix named: %v", err)
	}
}
