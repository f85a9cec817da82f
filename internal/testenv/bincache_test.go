//go:build linux

package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cacheDir makes a build cache directory named name in the temp dir,
// its lock file last used age ago.
func cacheDir(t *testing.T, name string, age time.Duration) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "airlock-test-bin-"+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, ".lock")
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "airlock"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	used := time.Now().Add(-age)
	if err := os.Chtimes(lock, used, used); err != nil {
		t.Fatal(err)
	}
	return dir
}

func exists(path string) bool { _, err := os.Lstat(path); return err == nil }

// A CI job's clone leaves a cache per test package that no later run
// uses: the next run removes those idle for a day, and nothing else.
func TestSweepBinCaches(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	idle := cacheDir(t, "idle", 2*binCacheIdle)
	recent := cacheDir(t, "recent", binCacheIdle/2)
	keep := cacheDir(t, "keep", 2*binCacheIdle)
	held := cacheDir(t, "held", 2*binCacheIdle)
	shared := cacheDir(t, "shared", 2*binCacheIdle)
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	// A link by a cache's name to somewhere else, itself idle.
	target := cacheDir(t, "target", 2*binCacheIdle)
	elsewhere := filepath.Join(os.TempDir(), "elsewhere")
	if err := os.Rename(target, elsewhere); err != nil {
		t.Fatal(err)
	}
	target = elsewhere
	link := filepath.Join(os.TempDir(), "airlock-test-bin-link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(held, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	sweepBinCaches(keep, time.Now())

	if exists(idle) {
		t.Errorf("a cache idle for %v is still there", 2*binCacheIdle)
	}
	for _, d := range []string{recent, keep, held, shared, link} {
		if !exists(filepath.Join(d, "airlock")) {
			t.Errorf("%s was swept", filepath.Base(d))
		}
	}
	if !exists(filepath.Join(target, ".lock")) {
		t.Error("a link's target was swept")
	}
	if gone, _ := filepath.Glob(filepath.Join(os.TempDir(), "airlock-test-swept-*")); len(gone) != 0 {
		t.Errorf("left behind: %v", gone)
	}
}

// A run that waits for a cache's lock while a sweep removes it does not
// build into the removed directory.
func TestBinCacheDirAfterSweep(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir, unlock := binCacheDir("sweep-")
	if dir == "" {
		t.Fatal("no cache directory")
	}
	// Take the lock as a sweep does, then start a run that waits for it.
	f, err := os.Open(filepath.Join(dir, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		d, unlock := binCacheDir("sweep-")
		defer unlock()
		got <- d
	}()
	waitBlockedFlock(t, f)
	if err := os.Rename(dir, dir+"-gone"); err != nil {
		t.Fatal(err)
	}
	// Another run makes the directory anew before the waiter wakes.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if d := <-got; d != "" {
		t.Fatalf("the waiting run got %s, want none (its directory was swept)", d)
	}
	// The next run uses the new directory.
	again, unlock := binCacheDir("sweep-")
	defer unlock()
	if again != dir || !exists(filepath.Join(again, ".lock")) {
		t.Fatalf("next run got %q, want %s", again, dir)
	}
}

// waitBlockedFlock waits until some process waits for f's lock
// (/proc/locks lists a waiter with "->").
func waitBlockedFlock(t *testing.T, f *os.File) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	inode := fmt.Sprintf(":%d ", st.Ino)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		locks, _ := os.ReadFile("/proc/locks")
		for _, l := range strings.Split(string(locks), "\n") {
			if strings.Contains(l, "->") && strings.Contains(l, inode) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no run waited for the lock")
}
