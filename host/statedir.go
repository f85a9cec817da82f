package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// ErrStateDirInUse: another airlock host runs on the state directory. Two
// hosts there would each launch every installed plugin, even with
// evidence logs of their own.
var ErrStateDirInUse = errors.New("another airlock host runs on this state directory (one host per state directory)")

// StateLockName is the lock file a running host holds in its state
// directory; it holds the host's pid, for the error a second host gets.
const StateLockName = "host.lock"

// StateLock is a state directory held by this process.
type StateLock struct{ f *os.File }

// LockStateDir takes the state directory for this process, or fails with
// ErrStateDirInUse while another process holds it. The lock is released
// by Release, or by the process ending in any way. A state directory
// another user could write to, or could have made, is refused
// (fsutil.CheckPrivateDir), and so is a link at the lock file's place.
func LockStateDir(dir string) (*StateLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, StateDirError(err)
	}
	if err := fsutil.CheckPrivateDir(dir); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(dir, StateLockName)
	// OpenLockFile: a lock root's commands (install, ports) make in a
	// service user's directory is that user's, or its host could not
	// take it.
	f, err := fsutil.OpenLockFile(path)
	if errors.Is(err, fs.ErrPermission) {
		// A volume root made (a container's fresh volume), or a lock
		// left by a command run as root: say whose it must be.
		return nil, fmt.Errorf("state directory lock: %w (the state directory and what it holds must be this user's: give them to this user, or set state_dir to a directory of its own)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := fsutil.TryLock(f); err != nil {
		f.Close()
		if !errors.Is(err, fsutil.ErrLocked) {
			return nil, fmt.Errorf("state directory lock %s: %w", path, err)
		}
		holder := "another process"
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		return nil, fmt.Errorf("%w: %s is held by %s (%s)", ErrStateDirInUse, dir, holder, path)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &StateLock{f: f}, nil
}

// Release gives the state directory up.
func (l *StateLock) Release() error { return l.f.Close() }

// StateDirError is the error of a state directory that could not be
// made, with the fix when this user may not write there: a container
// run as a uid without a home of its own (HOME=/, a read-only root file
// system) otherwise said only "mkdir /.local: permission denied".
func StateDirError(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("state directory: %w (set state_dir, or XDG_STATE_HOME, to a directory this user may write)", err)
	}
	return fmt.Errorf("state directory: %w", err)
}
