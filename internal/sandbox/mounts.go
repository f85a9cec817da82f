//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// binds lists what the plugin sees, in mount order: system directories,
// grants and install directory read-only, sockets read-only, the private
// directory read-write. Paths that do not exist are skipped, except the
// plugin's own directories.
//
// A read-only path already listed is listed once: a program in a system
// directory (an Executa command of /bin/sh) has that directory as its
// install directory, and on a merged-/usr system /bin is a link the
// namespaces level recreates, which a second bind of it would collide
// with.
func binds(spec Spec) []mount {
	var out []mount
	ro := func(d string) {
		d = filepath.Clean(d)
		if !slices.ContainsFunc(out, func(m mount) bool { return m.Dst == d }) {
			out = append(out, mount{Dst: d})
		}
	}
	for _, d := range systemDirs {
		ro(d)
	}
	for _, d := range spec.ReadOnly {
		ro(d)
	}
	if spec.InstallDir != "" {
		ro(spec.InstallDir)
	}
	for _, d := range spec.Sockets {
		ro(d)
	}
	out = append(out, mount{Dst: filepath.Clean(spec.Dir), RW: true})
	return out
}

// nsMounts are the namespaces level's binds: paths that do not exist
// are left out, except the plugin's own directories; a system directory
// that is a symbolic link (merged /usr) becomes the same link inside.
func nsMounts(spec Spec) ([]mount, error) {
	var out []mount
	own := []string{filepath.Clean(spec.Dir), filepath.Clean(spec.InstallDir)}
	for _, m := range binds(spec) {
		fi, err := os.Lstat(m.Dst)
		switch {
		case err == nil && fi.Mode()&os.ModeSymlink != 0 && slices.Contains(systemDirs, m.Dst):
			if m.Link, err = os.Readlink(m.Dst); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrSetup, m.Dst, err)
			}
		case errors.Is(err, os.ErrNotExist) && !slices.Contains(own, m.Dst):
			continue
		case err != nil:
			return nil, fmt.Errorf("%w: %s: %w", ErrSetup, m.Dst, err)
		}
		out = append(out, m)
	}
	for _, d := range devices {
		if _, err := os.Stat(d); err == nil {
			out = append(out, mount{Dst: d, RW: true})
		}
	}
	return out, nil
}

// landlockPaths are the Landlock level's rules: the same directories as
// the namespaces level shows (by path: the init opens them), the devices
// read-write. /proc has rules of its own (procRules).
func landlockPaths(spec Spec) []mount {
	out := binds(spec)
	for _, d := range devices {
		out = append(out, mount{Dst: d, RW: true})
	}
	return out
}
