package executa

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// beneath resolves a path inside the plugin's directory the way the
// plugin cannot redirect: no symbolic link, magic link or mount crossing
// on the way, never outside the directory.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

var errNotBeneath = errors.New("the file is not a regular file inside the plugin's directory")

// readTransportFile reads and removes the file a plugin announced for
// file transport. The plugin owns its directory and may swap any part of
// the path at any moment (a symbolic link to the host's keys, a FIFO to
// stall the read), so the path is opened beneath the directory with no
// link followed, must be a regular file, and only that file — checked
// by device and inode — is removed.
func readTransportFile(dir, announced string, limit int64) ([]byte, error) {
	clean := filepath.Clean(announced)
	rel, err := filepath.Rel(dir, clean)
	if err != nil || !filepath.IsAbs(announced) || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, errNotBeneath
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return nil, errNotBeneath
	}
	f := os.NewFile(uintptr(fd), "file-transport")
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errNotBeneath
	}
	defer removeBeneath(dfd, rel, st)
	return io.ReadAll(io.LimitReader(f, limit))
}

// removeBeneath unlinks rel inside the directory dfd if it is still the
// file st describes.
func removeBeneath(dfd int, rel string, st unix.Stat_t) {
	pfd, err := unix.Openat2(dfd, filepath.Dir(rel), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return
	}
	defer unix.Close(pfd)
	name := filepath.Base(rel)
	var now unix.Stat_t
	if unix.Fstatat(pfd, name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return
	}
	_ = unix.Unlinkat(pfd, name, 0)
}
