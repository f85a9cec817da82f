//go:build linux

package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// binCacheIdle is how long a build cache directory may go unused before
// another test run removes it. Each source tree gets its own, so a CI
// job on a fresh clone leaves one per test package (hundreds of MB)
// that no later run ever uses again.
const binCacheIdle = 24 * time.Hour

// sweepBinCaches removes the caller's own build cache directories other
// than keep that no run has used for binCacheIdle: the time on their
// lock file, touched by each run. One that a run holds (its lock taken)
// is left alone; one being removed is first renamed out of the name the
// runs look for, under its lock, so a run that waited for that lock
// finds its lock file gone and builds elsewhere (binCacheDir).
func sweepBinCaches(keep string, now time.Time) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "airlock-test-bin-*"))
	for _, dir := range dirs {
		if dir != keep {
			sweepBinCache(dir, now)
		}
	}
}

func sweepBinCache(dir string, now time.Time) {
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm()&0o022 != 0 {
		return
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Getuid() {
		return
	}
	lock := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(lock, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return // in use
	}
	if fst, err := f.Stat(); err != nil || now.Sub(fst.ModTime()) < binCacheIdle {
		return
	}
	gone := filepath.Join(filepath.Dir(dir), "airlock-test-swept-"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(dir))
	if os.Rename(dir, gone) != nil {
		return
	}
	_ = os.RemoveAll(gone)
}

// sameFile reports whether f is the file st describes.
func sameFile(f *os.File, st os.FileInfo) bool {
	fst, err := f.Stat()
	return err == nil && os.SameFile(fst, st)
}
