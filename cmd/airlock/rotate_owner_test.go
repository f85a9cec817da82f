package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The service's uid and gid in these tests; no account needs them.
const (
	serviceUID = 64997
	serviceGID = 64996
)

func chownTree(t *testing.T, root string, uid, gid int) {
	t.Helper()
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func assertOwned(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, e.Name()), &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s is owned by %d:%d after the rotation, want %d:%d", e.Name(), st.Uid, st.Gid, uid, gid)
		}
	}
}

// `airlock token rotate` and `airlock intercept-ca stage|promote` run as
// root leave every key file owned by the service that reads it, so the
// service's next reload (and restart) still reads them.
func TestRotationAsRootKeepsOwners(t *testing.T) {
	testenv.NeedsRoot(t, "the case is an operator running the CLI as root")
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
tokens: {keys: {source: file, path: %q}}
proxy:
  intercept: {ca_file: %q, ca_key_file: %q}
`, filepath.Join(dir, "signing-keys.pem"), filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")))
	// The service made its keys first (here: the CLI, then handed over).
	for _, args := range [][]string{{"token", "rotate"}, {"intercept-ca", "status"}} {
		if out, stderr, code := cli(t, nil, "", append(args, "--config", cfg)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	chownTree(t, dir, serviceUID, serviceGID)
	for _, args := range [][]string{{"token", "rotate"}, {"intercept-ca", "stage"}, {"intercept-ca", "promote"}, {"intercept-ca", "stage"}} {
		if out, stderr, code := cli(t, nil, "", append(args, "--config", cfg)...); code != 0 {
			t.Fatalf("%v as root: exit %d\n%s%s", args, code, out, stderr)
		}
		assertOwned(t, dir, serviceUID, serviceGID)
	}
}
