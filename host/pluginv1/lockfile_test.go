package pluginv1

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// The lockfile pins what the host launches: one its group or others may
// write is refused (they could pin a binary of their own), not read.
func TestReadLockfileRefusesAFileOthersMayWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plugins.lock.json")
	lf, err := ReadLockfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := lf.Write(path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLockfile(path); err != nil {
		t.Fatalf("the lockfile as written: %v", err)
	}
	if err := os.Chmod(path, 0o664); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLockfile(path); !errors.Is(err, fsutil.ErrPlanted) {
		t.Fatalf("a lockfile its group may write: %v", err)
	}
}
