//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// A directory moved away between the moment the walk lists it and the
// moment it opens it (a plugin renaming a chain of directories to keep
// them out of every look) is counted as what the init cannot see, not
// as empty.
func TestDiskLookCountsAMovedDirectoryAsHidden(t *testing.T) {
	dir := t.TempDir()
	chain := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(chain, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chain, "big"), make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "moved")
	d := newDiskLook(dir, 1024)
	d.listed = func(listed string) {
		if listed == dir { // "a" is queued: move it out of the walk's way
			if err := os.Rename(filepath.Join(dir, "a"), elsewhere); err != nil {
				t.Error(err)
			}
		}
	}
	d.walk()
	if d.hidden == "" {
		t.Fatalf("a directory moved during the look went unnoticed (counted %d bytes)", d.used)
	}
	// A look with nothing moved sees everything and hides nothing.
	if err := os.Rename(elsewhere, filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	d = newDiskLook(dir, 1024)
	d.walk()
	if d.hidden != "" || d.used < 64<<10 {
		t.Fatalf("an undisturbed look: hidden %q, counted %d bytes", d.hidden, d.used)
	}
}
