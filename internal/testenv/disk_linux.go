package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size bytes at a new directory (unmounted
// at the test's end): a disk a test can fill. It needs root (NeedsRoot).
func SmallDisk(tb testing.TB, size int) string {
	tb.Helper()
	NeedsRoot(tb, "mounting a small tmpfs")
	mnt := filepath.Join(tb.TempDir(), "small")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		tb.Fatalf("mount a tmpfs: %v", err)
	}
	tb.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	return mnt
}

// FillDisk writes the file path until its disk is full (ENOSPC).
// Truncating the file afterwards gives room back, a page at a time.
func FillDisk(tb testing.TB, path string) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				tb.Fatalf("filling the disk: %v", err)
			}
			return
		}
	}
}

// FillDiskLeaving fills the disk as FillDisk does, then gives back room
// bytes (a multiple of the page size frees that many) by shortening the
// file: a disk with exactly that much left.
func FillDiskLeaving(tb testing.TB, path string, room int64) {
	tb.Helper()
	FillDisk(tb, path)
	st, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-room); err != nil {
		tb.Fatal(err)
	}
}
