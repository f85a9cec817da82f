package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrPlanted: a file or directory Airlock makes for itself is not one it
// could have made — a symbolic link, a file with another name (a hard
// link), one in a directory others may write to, another user's, or one
// its group or others may write.
// Another local user could have put it there to make this process write,
// truncate or give away a file elsewhere, or read what it writes.
var ErrPlanted = errors.New("refused: another local user could have put it there or may change it")

// planted is an ErrPlanted naming path and why.
func planted(path, why string) error {
	return fmt.Errorf("%w: %s %s", ErrPlanted, path, why)
}

// OpenOwnFile opens name for reading and writing, creating it 0600 when
// missing, as a file Airlock keeps in its own directory (a lock file, a
// pid file): name must not be a symbolic link and must be a regular file
// with no other name. A link planted there would otherwise have this
// process (root, perhaps) open, write or chown its target.
func OpenOwnFile(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, planted(name, "is a symbolic link (Airlock makes this file itself: remove the link)")
	}
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		f.Close()
		return nil, planted(name, "is not a regular file")
	case st.Nlink != 1:
		f.Close()
		return nil, planted(name, "has another name (a hard link): remove it")
	}
	return f, nil
}

// CheckPrivateDir refuses a directory in which another user could plant
// or replace what this process makes, reads back or hands on (a state
// directory, a key or token directory). path (a symbolic link to a
// directory is followed: the operator's choice) must be a directory
// neither its group nor others may write, of this process's effective
// user or of root; root also accepts a service user's own directory (the
// rotation and install commands root runs write there for the service).
// In a directory anyone may write to (the temp directory, a pod's shared
// emptyDir) it must be this process's own (or root's), and not a link:
// anyone could have made it first.
func CheckPrivateDir(path string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fmt.Errorf("%s is not a directory", path)
	}
	euid := os.Geteuid()
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	var parent syscall.Stat_t
	if err := syscall.Stat(filepath.Dir(abs), &parent); err != nil {
		return err
	}
	if parent.Mode&0o002 != 0 {
		// The temp directory, or a pod's shared emptyDir (0777): what is
		// in it is trusted only when it is ours.
		var lst syscall.Stat_t
		if err := syscall.Lstat(abs, &lst); err != nil {
			return err
		}
		if lst.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			return planted(path, "is a symbolic link in a directory anyone may write to: remove it")
		}
		if int(st.Uid) != euid && st.Uid != 0 {
			return planted(path, fmt.Sprintf("belongs to user %s and is in a directory anyone may write to: remove it, or choose another place", userName(int(st.Uid))))
		}
	}
	if int(st.Uid) != euid && st.Uid != 0 && euid != 0 {
		who, me := userName(int(st.Uid)), userName(euid)
		return planted(path, fmt.Sprintf("belongs to user %s, not to this process's user %s: run as %s, have root give it to %s (chown and chmod 700), or choose a directory of your own", who, me, who, me))
	}
	// Last: "chmod" is the fix only for a directory that is rightly ours.
	if st.Mode&0o022 != 0 {
		mode := st.Mode & 0o7777
		if st.Uid == 0 && euid != 0 {
			// Root's, used through its group or others' write: taking
			// that away would leave this user out, so the fix is an
			// owner, not a mode (a 2775 directory of an admin group).
			return planted(path, fmt.Sprintf("belongs to root and may be written by its group or others (mode %#o): have root give it to %s (chown and chmod 700), or choose a directory of your own", mode, userName(euid)))
		}
		return planted(path, fmt.Sprintf("may be written by its group or others (mode %#o): chmod go-w it", mode))
	}
	return nil
}

// CheckOwnFile refuses a file Airlock keeps for itself (an evidence
// log, a store, the lockfile) that someone else could rewrite, so
// rewriting what it records or decides: one its group or others may
// write (Airlock makes them 0600; one copied in or chmodded since is
// named with the fix), or one that belongs to another user than this
// process's, root or the owner of its directory (root's commands work on
// a service user's files).
func CheckOwnFile(name string, st fs.FileInfo) error {
	if mode := st.Mode(); mode.Perm()&0o022 != 0 {
		return planted(name, fmt.Sprintf("may be written by its group or others (mode %#o): chmod 600 it", mode.Perm()))
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	euid := os.Geteuid()
	if int(sys.Uid) == euid || sys.Uid == 0 {
		return nil
	}
	var dir syscall.Stat_t
	if err := syscall.Stat(filepath.Dir(name), &dir); err != nil {
		return err
	}
	if dir.Uid == sys.Uid {
		return nil
	}
	who := userName(int(sys.Uid))
	if euid == 0 && dir.Uid == 0 {
		// Root cannot tell the service's user from another here
		// (/var/log): giving the file to root would shut the service out.
		return planted(name, fmt.Sprintf("belongs to user %s, who could rewrite it, in a directory of root's: if %s is the user Airlock runs as, run this as %s; if not, have root give it to that user (chown), or move it away", who, who, who))
	}
	owner := int(dir.Uid)
	if owner == 0 {
		owner = euid
	}
	return planted(name, fmt.Sprintf("belongs to user %s, who could rewrite it: have root give it to %s (chown), or move it away", who, userName(owner)))
}
