package fsutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, []byte("new bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CopyFile(src, dst, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(dst)
	if string(b) != "new bytes" {
		t.Fatalf("dst = %q", b)
	}

	// A failed copy (the source is a directory: open works, read fails)
	// leaves dst as it was and no temporary file.
	if err := CopyFile(dir, dst, 0o700); err == nil {
		t.Fatal("copying a directory succeeded")
	}
	if b, _ := os.ReadFile(dst); string(b) != "new bytes" {
		t.Fatalf("dst changed by a failed copy: %q", b)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 2 {
		t.Fatalf("temporary file left behind: %v %v", ents, err)
	}
	if err := CopyFile(filepath.Join(dir, "missing"), dst, 0o700); err == nil {
		t.Fatal("copying a missing file succeeded")
	}
}

// A link planted at a name beside dst (the fixed dst.tmp a copy once
// staged under) is not written through: the copy stages under a name of
// its own, and the link's target keeps its bytes.
func TestCopyFileDoesNotFollowAPlantedLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("the target's"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, []byte("new bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, dst+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := CopyFile(src, dst, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "the target's" {
		t.Fatalf("the link's target was written: %q", b)
	}
	if b, _ := os.ReadFile(dst); string(b) != "new bytes" {
		t.Fatalf("dst = %q", b)
	}
}

// The copy has the mode asked for whatever the umask: a root host under
// umask 077 installs a plugin's program 0755, for the plugin's own uid.
func TestCopyFileModeWhateverTheUmask(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077)
	err := CopyFile(src, dst, 0o755)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v %v, want 0755", fi.Mode().Perm(), err)
	}
}

func TestWriteFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(name, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(name, []byte("two"), 0o640); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(name)
	got, rerr := os.ReadFile(name)
	if err != nil || rerr != nil || string(got) != "two" || st.Mode().Perm() != 0o640 {
		t.Fatalf("%q %v %v %v", got, st.Mode().Perm(), err, rerr)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(name), ".f.tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("a missing directory was not an error")
	}
}
