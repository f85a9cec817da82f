package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock rights by ABI version.
const (
	llRead     = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llFileOnly = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	llV1 = llRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	llRuleNetPort = 2
	// LandlockMinABI is the oldest Landlock ABI the landlock level uses:
	// 4 brought TCP connect rules; without them the level cannot keep a
	// plugin off the network.
	LandlockMinABI = 4
)

// LandlockABI is the kernel's Landlock ABI version (0: none).
func LandlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

func fsRights(abi int) uint64 {
	r := uint64(llV1)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

type netPortAttr struct {
	allowed uint64
	port    uint64
}

// landlockRuleset builds the ruleset that confines the plugin to s.Mounts
// (read-only, or read-write where RW), TCP connects to s.Ports, no TCP
// bind, and, from ABI 6, signals and abstract unix sockets scoped to the
// sandbox. Paths in s.Hide are carved out of the read-only grants.
func landlockRuleset(s *initSpec) (int, error) {
	abi := LandlockABI()
	if abi < LandlockMinABI {
		return -1, fmt.Errorf("landlock ABI %d is older than %d", abi, LandlockMinABI)
	}
	attr := unix.LandlockRulesetAttr{Access_fs: fsRights(abi),
		Access_net: unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP}
	size := unsafe.Sizeof(attr)
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	} else {
		size = unsafe.Offsetof(attr.Scoped)
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return -1, fmt.Errorf("landlock ruleset: %w", e)
	}
	rs := int(fd)
	ok := false
	defer func() {
		if !ok {
			unix.Close(rs)
		}
	}()
	for _, m := range s.Mounts {
		rights := uint64(llRead)
		if m.RW {
			rights = fsRights(abi)
		}
		dst := m.Dst
		if rp, err := filepath.EvalSymlinks(dst); err == nil {
			dst = rp // Landlock grants the real directory: carve that
		}
		for _, p := range carve(dst, s.Hide) {
			if err := addPath(rs, p, rights, abi); err != nil {
				return -1, err
			}
		}
	}
	for _, port := range s.Ports {
		a := netPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), llRuleNetPort, uintptr(unsafe.Pointer(&a)), 0, 0, 0); e != 0 {
			return -1, fmt.Errorf("landlock port rule: %w", e)
		}
	}
	ok = true
	return rs, nil
}

// landlockRestrictFD confines this thread, and what it executes, to the
// ruleset open at fd (no_new_privs is already set), with the /proc
// entries the plugin reads added (procRules): the exec stage calls it,
// and its process directory is the plugin's.
func landlockRestrictFD(fd int) error {
	if err := procRules(fd, LandlockABI()); err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); e != 0 {
		return fmt.Errorf("landlock restrict: %w", e)
	}
	return nil
}

func addPath(rs int, p string, rights uint64, abi int) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock rule for %s: %w", p, err)
	}
	defer unix.Close(fd)
	return addRule(rs, fd, p, rights, abi)
}

// addRule grants rights beneath the file open at fd (named p).
func addRule(rs, fd int, p string, rights uint64, abi int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= llFileOnly & fsRights(abi)
	}
	a := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&a)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock rule for %s: %w", p, e)
	}
	return nil
}

// carve returns the paths that grant dir minus the hidden paths below it:
// dir itself when nothing hidden lies below, else its entries, recursing
// into those that hold a hidden path (Landlock only adds rights, so a
// hidden path is never granted rather than taken away).
func carve(dir string, hide []string) []string {
	dir = filepath.Clean(dir)
	var below []string
	for _, h := range hide {
		h = filepath.Clean(h)
		if h == dir {
			return nil
		}
		if strings.HasPrefix(h, dir+"/") {
			below = append(below, h)
		}
	}
	if len(below) == 0 {
		return []string{dir}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, carve(filepath.Join(dir, e.Name()), below)...)
	}
	return out
}
