package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// nsFlags are the namespaces a plugin gets: all of them but cgroup and
// time, whose sharing reveals nothing.
const nsFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

// initCaps are what the init needs inside its user namespace to build the
// sandbox; it drops them all before it starts the plugin.
var initCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SYS_CHROOT, unix.CAP_DAC_OVERRIDE, unix.CAP_SETUID, unix.CAP_SETGID}

// nsAttrs starts the init in new namespaces. An unprivileged host maps
// its own uid (the only one it may) and gives the init the capabilities
// it needs there as ambient ones; the plugin runs as that uid without
// them. A root host maps root, for the init to reach the host paths it
// shows, and the plugin's own uid (and gid), which the plugin runs as:
// a plugin never runs as root. uid 0: root alone (the probe).
func nsAttrs(a *syscall.SysProcAttr, uid int) {
	a.Cloneflags = nsFlags
	if os.Getuid() == 0 {
		ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
		if uid > 0 {
			ids = append(ids, syscall.SysProcIDMap{ContainerID: uid, HostID: uid, Size: 1})
		}
		a.UidMappings, a.GidMappings = ids, ids
		// Root's user namespace may set groups: the plugin gets none.
		a.GidMappingsEnableSetgroups = true
		return
	}
	own, gid := os.Getuid(), os.Getgid()
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: own, HostID: own, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.AmbientCaps = initCaps
}

// base is where the new root is assembled: a tmpfs that becomes the
// root at once, the host's root staying reachable at old until the
// sandbox is built.
const (
	base = "/tmp"
	old  = "/.old"
)

// setupNamespaces builds the sandbox's root and network and returns the
// relay listeners it bound on the sandbox's loopback.
func setupNamespaces(s *initSpec) ([]int, error) {
	if err := inOwnNamespaces(); err != nil {
		return nil, err
	}
	// The root's skeleton (/dev, /proc, the binds' mount points) must be
	// traversable by a root host's plugin uid whatever umask the host
	// inherited (UMask=0077 made them 0700, root's: the plugin could not
	// enter its own directory). Nothing secret is made here; the plugin
	// gets the host's umask back.
	defer unix.Umask(unix.Umask(0o022))
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return nil, fmt.Errorf("the sandbox root: %w", err)
	}
	if err := os.Mkdir(base+old, 0o700); err != nil {
		return nil, err
	}
	if err := unix.PivotRoot(base, base+old); err != nil {
		return nil, fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return nil, err
	}
	// A private /tmp and /dev/shm, sized at a quarter of the memory limit
	// each (tmpfs pages are not any process's resident memory) and no
	// more than the disk limit, which bounds them and the private
	// directory together (disk_linux.go); an inode a block.
	kb := max(min(s.Limits.MemoryMB<<10/4, s.Limits.DiskMB<<10), 1024)
	tmpfs := fmt.Sprintf("mode=1777,size=%dk,nr_inodes=%d", kb, kb/4)
	for _, d := range []struct {
		path, opts string
		flags      uintptr
	}{
		{"/tmp", tmpfs, unix.MS_NOEXEC},
		{"/dev", "mode=0755,size=64k", 0},
		{"/dev/shm", tmpfs, unix.MS_NOEXEC},
	} {
		if err := os.MkdirAll(d.path, 0o755); err != nil {
			return nil, err
		}
		if err := unix.Mount("tmpfs", d.path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|d.flags, d.opts); err != nil {
			return nil, fmt.Errorf("mounting %s: %w", d.path, err)
		}
	}
	for _, l := range []struct{ name, target string }{{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"},
		{"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}} {
		if err := os.Symlink(l.target, "/dev/"+l.name); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir("/proc", 0o755); err != nil {
		return nil, err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mounting /proc: %w", err)
	}
	// Binds outside every hidden path, then the hidden paths, then the
	// binds below one (the plugin's install directory under the state
	// directory), which are shown again on top of the cover.
	var ro, rw []string
	first, second := splitHidden(s.Mounts, s.Hide)
	if err := bindAll(first, s.Mounts, &ro, &rw); err != nil {
		return nil, err
	}
	for _, h := range s.Hide {
		covered, err := hide(h, s.Mounts)
		if err != nil {
			return nil, err
		}
		if covered != "" {
			ro = append(ro, covered)
		}
	}
	if err := bindAll(second, nil, &ro, &rw); err != nil {
		return nil, err
	}
	for _, d := range ro {
		if err := setattr(d, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0, true); err != nil {
			return nil, fmt.Errorf("making %s read-only: %w", d, err)
		}
	}
	for _, d := range rw {
		set := uint64(unix.MOUNT_ATTR_NOSUID)
		if !strings.HasPrefix(d, "/dev/") {
			set |= unix.MOUNT_ATTR_NODEV
		}
		if err := setattr(d, set, unix.MOUNT_ATTR_RDONLY, false); err != nil {
			return nil, fmt.Errorf("making %s writable: %w", d, err)
		}
	}
	fds, err := listenLoopback(s.Listen)
	if err != nil {
		return nil, err
	}
	_ = unix.Sethostname([]byte("airlock-plugin"))
	if err := unix.Unmount(old, unix.MNT_DETACH); err != nil {
		return nil, fmt.Errorf("dropping the host's root: %w", err)
	}
	if err := os.Remove(old); err != nil {
		return nil, err
	}
	if err := setattr("/", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0, false); err != nil {
		return nil, fmt.Errorf("making the sandbox root read-only: %w", err)
	}
	return fds, nil
}

// splitHidden splits ms into the binds outside every hidden path and
// those below one.
func splitHidden(ms []mount, hide []string) (outside, below []mount) {
	for _, m := range ms {
		in := false
		for _, h := range hide {
			if m.Link == "" && strings.HasPrefix(m.Dst, strings.TrimSuffix(filepath.Clean(h), "/")+"/") {
				in = true
			}
		}
		if in {
			below = append(below, m)
		} else {
			outside = append(outside, m)
		}
	}
	return outside, below
}

// bindAll shows each of ms at its own path; all are the binds whose
// contents may already hold a mount point (nil: create every one).
func bindAll(ms, all []mount, ro, rw *[]string) error {
	for _, m := range ms {
		if m.Link != "" {
			if err := os.MkdirAll(filepath.Dir(m.Dst), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(m.Link, m.Dst); err != nil {
				return err
			}
			continue
		}
		if all != nil && covered(m.Dst, all, m) {
			if _, err := os.Lstat(m.Dst); err != nil {
				continue // below another bind, and absent there: nothing to show
			}
		} else if err := mkpoint(m); err != nil {
			return err
		}
		if err := unix.Mount(old+m.Dst, m.Dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("showing %s: %w", m.Dst, err)
		}
		if m.RW {
			*rw = append(*rw, m.Dst)
		} else {
			*ro = append(*ro, m.Dst)
		}
	}
	return nil
}

// covered reports whether dst lies below another bind (whose contents
// then hold its mount point: nothing may be created there, it is a host
// directory).
func covered(dst string, ms []mount, self mount) bool {
	for _, m := range ms {
		if m.Dst != self.Dst && m.Link == "" && strings.HasPrefix(dst, strings.TrimSuffix(m.Dst, "/")+"/") {
			return true
		}
	}
	return false
}

// mkpoint creates m's mount point in the sandbox's own tmpfs.
func mkpoint(m mount) error {
	var st unix.Stat_t
	if err := unix.Stat(old+m.Dst, &st); err != nil {
		return fmt.Errorf("%s: %w", m.Dst, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return mkdirIn(m.Dst)
	}
	if err := mkdirIn(filepath.Dir(m.Dst)); err != nil {
		return err
	}
	f, err := os.OpenFile(m.Dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func mkdirIn(p string) error {
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("creating %s in the sandbox: %w", p, err)
	}
	return nil
}

// hide covers h with an empty tmpfs (a directory; returned, to be made
// read-only once what belongs below it is shown again) or /dev/null (a
// file) where a bind shows it; elsewhere it is not in the sandbox.
func hide(h string, ms []mount) (string, error) {
	h = filepath.Clean(h)
	inside := false
	for _, m := range ms {
		if m.Link == "" && (h == m.Dst || strings.HasPrefix(h, strings.TrimSuffix(m.Dst, "/")+"/")) {
			if h == m.Dst && m.RW {
				return "", fmt.Errorf("%s is both hidden and the plugin's own directory", h)
			}
			inside = true
		}
	}
	if !inside {
		return "", nil
	}
	fi, err := os.Lstat(h)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return h, unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,mode=0755")
	}
	return "", unix.Mount("/dev/null", h, "", unix.MS_BIND, "")
}

func setattr(path string, set, clr uint64, recursive bool) error {
	flags := uint(unix.AT_SYMLINK_NOFOLLOW)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	return unix.MountSetattr(unix.AT_FDCWD, path, flags, &unix.MountAttr{Attr_set: set, Attr_clr: clr})
}

// listenLoopback brings up lo and binds a listener on each address.
func listenLoopback(addrs []string) ([]int, error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return nil, err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return nil, fmt.Errorf("bringing up the sandbox's loopback: %w", err)
	}
	var fds []int
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !ap.Addr().Is4() {
			return nil, fmt.Errorf("relay address %q is not an IPv4 address and port", a)
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		fds = append(fds, fd)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
			return nil, fmt.Errorf("relay listener %s: %w", a, err)
		}
		if err := unix.Listen(fd, 128); err != nil {
			return nil, err
		}
	}
	return fds, nil
}

func probeAttrs() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	nsAttrs(a, 0)
	return a
}

// errNotInNamespaces refuses the init's mounts outside the namespaces
// Airlock starts it in: run by hand by root, the same mounts would land on
// the host (its / made private, a tmpfs over the temp directory).
var errNotInNamespaces = errors.New("airlock sandbox: the init mounts only as the first process of its own namespaces, which Airlock starts it in; it is not a command to run by hand")

// inOwnNamespaces reports whether the init is the first process of a new
// PID namespace, which Airlock creates together with its mount namespace
// (nsFlags): outside one, its pid is never 1.
func inOwnNamespaces() error {
	if os.Getpid() != 1 {
		return errNotInNamespaces
	}
	return nil
}

// probeMounts does what setupNamespaces needs the kernel to allow.
func probeMounts() error {
	if err := inOwnNamespaces(); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k"); err != nil {
		return fmt.Errorf("mounting a tmpfs: %w", err)
	}
	if err := os.Mkdir(base+"/proc", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("proc", base+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	return nil
}
