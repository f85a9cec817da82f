package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// OwnerError: a file could not be written with the owner it must keep (the
// owner of the file it replaces, or for a new file run by root, of its
// directory). The caller runs as someone else; the message says as whom
// to run it.
type OwnerError struct {
	Path string
	UID  int
}

func (e *OwnerError) Error() string {
	who := userName(e.UID)
	return fmt.Sprintf("%s belongs to user %s, and this process cannot give a new file to that user: run it as %s (for example: runuser -u %s -- airlock …) or as root",
		e.Path, who, who, who)
}

// ErrOwner is what every *OwnerError matches with errors.Is.
var ErrOwner = errors.New("file belongs to another user")

// Is makes errors.Is(err, ErrOwner) true.
func (e *OwnerError) Is(target error) bool { return target == ErrOwner }

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return "uid " + strconv.Itoa(uid)
}

// ownerFor is who a file written at name must belong to: the file it
// replaces keeps its owner and group; a new file made by root takes its
// directory's (so that a rotation CLI run as root leaves files the
// service that owns the directory can read); otherwise the process's own,
// reported as ok=false.
func ownerFor(name string) (uid, gid int, ok bool, err error) {
	var st syscall.Stat_t
	err = syscall.Stat(name, &st)
	if errors.Is(err, fs.ErrNotExist) {
		if os.Geteuid() != 0 {
			return 0, 0, false, nil
		}
		err = syscall.Stat(filepath.Dir(name), &st)
	}
	if err != nil {
		return 0, 0, false, err
	}
	return int(st.Uid), int(st.Gid), true, nil
}

// keepOwner gives f (a new temporary file that will replace name) the
// owner name must have, or fails with *OwnerError.
func keepOwner(f *os.File, name string) error {
	uid, gid, ok, err := ownerFor(name)
	if err != nil || !ok {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if st, _ := fi.Sys().(*syscall.Stat_t); st != nil && int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	if err := f.Chown(uid, gid); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return &OwnerError{Path: name, UID: uid}
		}
		return err
	}
	return nil
}

// OpenLockFile opens (creating, mode 0600) a lock file that sits beside
// the files it guards, with the owner those files keep: a lock file root
// creates for a service's directory belongs to that service, so the
// service can still take the lock. What another user planted at name (a
// symbolic or hard link) is refused (OpenOwnFile): root would otherwise
// give the link's target to the directory's owner. So is, for root, a
// file of a third user's (neither root's nor the directory's owner's):
// the directory's owner could have moved it there from a directory it
// may write, to have root truncate it and give it away. Only root's own
// lock (made now, or left by an earlier command of root's) is given away.
func OpenLockFile(name string) (*os.File, error) {
	f, err := OpenOwnFile(name)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return f, nil
	}
	fi, err := f.Stat()
	if err == nil {
		err = CheckOwnFile(name, fi)
	}
	if err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
			err = GiveToDirOwner(f, name)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// GiveToDirOwner gives f, open at name, to the owner and group of name's
// directory when this process is root: what root's commands make in a
// service user's directory stays usable by that service. Only for a file
// opened so that it cannot be a link (OpenOwnFile, O_NOFOLLOW and a
// regular-file check). Otherwise it does nothing.
func GiveToDirOwner(f *os.File, name string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Dir(name), &st); err != nil {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
