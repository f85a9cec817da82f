// Package fsutil holds the file operations that must never leave a
// half-written file behind.
package fsutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// CopyFile copies src to dst with mode, atomically: the bytes go to a
// temporary file beside dst, are synced, and replace dst by rename. On any
// error dst is untouched and the temporary file is removed. dst has mode
// whatever the umask: a plugin's program copied 0755 by a root host under
// umask 077 must stay executable by the plugin's own uid.
func CopyFile(src, dst string, mode os.FileMode) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	// A new name of its own (O_EXCL), not a fixed one: a link or a file
	// left at a fixed name would be written through.
	out, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := out.Name()
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	if err = out.Chmod(mode); err != nil {
		return err
	}
	if _, err = io.Copy(out, in); err != nil {
		return err
	}
	if err = out.Sync(); err != nil {
		return err
	}
	if err = out.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, dst); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(dst))
}

// WriteFile writes data to name with mode, atomically as CopyFile does:
// a temporary file beside name, synced, then renamed over it, and the
// rename synced. On an error name is untouched (unless only that last
// sync failed) and the temporary file is removed.
//
// The file keeps its owner and group, whoever writes it: a key rotated by
// root stays readable by the service that owns it. A new file written by
// root takes its directory's owner and group. When the owner cannot be
// kept (an unprivileged writer replacing another user's file) nothing is
// written and the error is an *OwnerError naming as whom to run.
func WriteFile(name string, data []byte, mode os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = keepOwner(tmp, name); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(name))
}

// SyncDir makes the entries of directory dir durable (a rename or a new
// file in it survives a power loss). A file system that cannot sync a
// directory is taken as having nothing to sync.
func SyncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}

// ErrLocked: another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// TryLock takes an exclusive advisory lock (flock) on f without waiting,
// or fails with ErrLocked. Closing f, or the process ending in any way,
// releases it, so a crashed holder never leaves a stale lock.
func TryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}

// CheckOwnDir refuses a directory another user could have planted or
// may write to: path must be a directory itself (not a symbolic link to
// one), owned by this process's effective uid, and writable by no one
// else. Shared places (the temp directory, /run) are checked with it
// before anything is made or trusted inside them.
func CheckOwnDir(path string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFDIR:
		return fmt.Errorf("%s is not a directory", path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to another user", path)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s is writable by others", path)
	}
	return nil
}
