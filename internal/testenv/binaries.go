//go:build linux

package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Binary is a Go package a test package builds once in TestMain: a
// plugin, an attacker, the airlock command itself.
type Binary struct {
	Path  *string  // set to the built binary's path
	Pkg   string   // the package to build, relative to the test's directory
	Name  string   // the file's name; the package directory's when empty
	Flags []string // extra go build flags (-race)
}

// Binaries builds bins into one new directory and returns it; the caller
// removes it after m.Run. The directory is world-readable because a root
// host runs sandboxed plugins as an unprivileged uid. A failed build ends
// the test binary with the compiler's output.
//
// The builds go to a directory kept between runs, one per test package
// and source tree (binCacheDir), and are hard-linked into the new one:
// `go build -o` leaves a binary whose build ID still matches its sources
// alone, so a warm run links nothing, where a fresh directory costs a
// full link per binary (about 20 s for airlock with -race on two cores).
func Binaries(prefix string, bins ...Binary) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Chmod(dir, 0o755)
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format, args...)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	cache, unlock := binCacheDir(prefix)
	defer unlock()
	out := cache
	if out == "" {
		out = dir
	}
	for _, g := range buildGroups(bins) {
		// One go build per group: loading and hashing the dependency graph
		// to find the binaries up to date is most of a warm build's cost.
		args := append(append([]string{"build"}, g.flags...), "-o", g.out(out))
		for _, b := range g.bins {
			args = append(args, b.Pkg)
		}
		if msg, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			fail("build %s: %v\n%s", strings.Join(args[len(args)-len(g.bins):], " "), err, msg)
		}
		for _, b := range g.bins {
			name := binaryName(b)
			*b.Path = filepath.Join(dir, name)
			if out == dir {
				continue
			}
			// A link, not a rename: the next run's go build compares against
			// the cached file; a rebuild replaces it by a new inode, so this
			// run's link keeps the binary it started with.
			if err := os.Link(filepath.Join(out, name), *b.Path); err != nil {
				fail("link %s: %v\n", name, err)
			}
		}
	}
	return dir
}

// binCacheDir returns the directory that keeps prefix's binaries between
// runs, locked against another run of the same test package until unlock;
// "" (build into the fresh directory) when it cannot be had safely. It
// lives in the temp dir, world-readable like the fresh one, named after
// the test's working directory (the package in this source tree), so two
// checkouts or two packages never share it.
func binCacheDir(prefix string) (dir string, unlock func()) {
	wd, err := os.Getwd()
	if err != nil {
		return "", func() {}
	}
	sum := sha256.Sum256([]byte(wd + "\x00" + prefix))
	dir = filepath.Join(os.TempDir(), "airlock-test-bin-"+strings.TrimSuffix(prefix, "-")+"-"+hex.EncodeToString(sum[:8]))
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return "", func() {}
	}
	// The temp dir is shared: use the directory only if it is ours and
	// no one else can write to it.
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm()&0o022 != 0 {
		return "", func() {}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Getuid() {
		return "", func() {}
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return "", func() {}
	}
	// A sweep (sweepBinCaches) may have moved the directory away while
	// this run waited for the lock: then it is not ours to build into.
	if st, err := os.Stat(filepath.Join(dir, ".lock")); err != nil || !sameFile(f, st) {
		f.Close()
		return "", func() {}
	}
	now := time.Now()
	_ = os.Chtimes(f.Name(), now, now) // the sweep's "last used"
	sweepBinCaches(dir, now)
	return dir, func() { f.Close() }
}

// buildGroup is binaries built by one go build: the same flags, and, when
// there is more than one, each named after its package directory (go
// build -o dir/ names them so).
type buildGroup struct {
	flags []string
	bins  []Binary
}

func (g buildGroup) out(dir string) string {
	if len(g.bins) == 1 {
		return filepath.Join(dir, binaryName(g.bins[0]))
	}
	return dir + string(filepath.Separator)
}

// buildGroups puts bins with equal flags and default names into one group
// and every other binary into a group of its own, in their order.
func buildGroups(bins []Binary) []buildGroup {
	var groups []buildGroup
	byFlags := map[string]int{}
	for _, b := range bins {
		key := strings.Join(b.Flags, "\x00")
		if i, ok := byFlags[key]; ok && binaryName(b) == pkgDirName(b.Pkg) {
			groups[i].bins = append(groups[i].bins, b)
			continue
		}
		if binaryName(b) == pkgDirName(b.Pkg) {
			byFlags[key] = len(groups)
		}
		groups = append(groups, buildGroup{flags: b.Flags, bins: []Binary{b}})
	}
	return groups
}

// binaryName is b's file name: Name, or its package directory's.
func binaryName(b Binary) string {
	if b.Name != "" {
		return b.Name
	}
	return pkgDirName(b.Pkg)
}

// pkgDirName is the last element of pkg's directory, which go build -o
// dir/ uses as the binary's name for a package of this module.
func pkgDirName(pkg string) string {
	if abs, err := filepath.Abs(pkg); err == nil {
		return filepath.Base(abs)
	}
	return filepath.Base(filepath.Clean(pkg))
}
