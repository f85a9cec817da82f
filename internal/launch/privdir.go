package launch

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// A host removes a plugin's private directory after the plugin exits. A
// host that dies first (SIGKILL, OOM kill, power loss) cannot, and what
// the plugin left there — downloads, caches, whatever it wrote — would
// stay in the temp directory for good. So private directories live in a
// session directory per host process, under one base per user:
//
//	$TMPDIR/airlock-<uid>/host-XXXX/    held with flock(2) while the host lives
//	$TMPDIR/airlock-<uid>/.sweep        taken to create or sweep a session
//
// The first private directory a host makes starts its session, and
// starting a session removes every session whose lock nobody holds: its
// host is gone. The lock dies with the process however it ends, so a
// session is never removed under a live host. A base that is not ours
// (another local user made it first, or it is a symlink, or others may
// write to it) is not used: directories are then made directly in the
// temp directory as before, and left behind by a crash.

var (
	sessionOnce sync.Once
	sessionDir  string // "" when the base could not be used
	sessionErr  error  // why not
	sessionWarn sync.Once
)

// MkdirPrivate makes a new private directory for one plugin process, in
// this host's session (see above), readable only by its owner.
func MkdirPrivate(prefix string) (string, error) {
	sessionOnce.Do(func() {
		sessionDir, sessionErr = newSession(os.TempDir())
	})
	return os.MkdirTemp(sessionDir, prefix)
}

// warnNoSession says once per process, when private directories are made
// directly in the temp directory, why: another local user squatting on
// the base shows, and so does the clean-up after a crash being off.
func warnNoSession(log *slog.Logger) {
	if sessionErr == nil {
		return
	}
	sessionWarn.Do(func() {
		log.Warn("plugins' private directories are made directly in the temp directory, and a crash leaves them behind: the per-user base cannot be used",
			"reason", sessionErr.Error())
	})
}

// newSession starts a session under tmp after sweeping the dead ones,
// and returns its directory; it stays locked until the process exits.
func newSession(tmp string) (string, error) {
	base := filepath.Join(tmp, fmt.Sprintf("airlock-%d", os.Geteuid()))
	if err := os.Mkdir(base, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := fsutil.CheckOwnDir(base); err != nil {
		return "", err
	}
	// Plugins a root host runs as another uid traverse it too (landlock
	// level): 0711 whatever the umask was when it was made (a unit's
	// UMask=0077 left it 0700).
	if fi, err := os.Lstat(base); err == nil && fi.Mode().Perm() != 0o711 {
		if err := os.Chmod(base, 0o711); err != nil {
			return "", err
		}
	}
	sweep, err := os.OpenFile(filepath.Join(base, ".sweep"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", err
	}
	defer sweep.Close() // unlocks
	if err := unix.Flock(int(sweep.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	sweepSessions(base)
	dir, err := os.MkdirTemp(base, "host-")
	if err != nil {
		return "", err
	}
	// Plugins a root host runs as another uid traverse it (landlock level).
	if err := os.Chmod(dir, 0o711); err != nil {
		os.Remove(dir)
		return "", err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return "", err
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		os.Remove(dir)
		return "", err
	}
	// fd is never closed: the lock is held until the process exits.
	return dir, nil
}

// sweepSessions removes the sessions under base whose host is gone
// (nobody holds their lock). The caller holds base's .sweep lock.
func sweepSessions(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "host-") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.RemoveAll(dir)
		}
		unix.Close(fd)
	}
}
