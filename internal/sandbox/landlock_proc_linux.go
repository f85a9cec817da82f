package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// What a plugin reads of /proc at the landlock level, where /proc is the
// machine's: its network namespace is the host's, so /proc/net lists
// every unix socket path and TCP listener of the machine, and every
// process has a directory there, command line included. Landlock rules
// only grant, by file hierarchy, so /proc is not granted whole: only the
// machine-wide entries runtimes read, and those of the plugin's own
// process directory, never its net.
//
// A rule holds on the inode it was given, and procfs makes a new inode
// each time it looks an entry up afresh: once the kernel drops an entry
// from its caches (memory pressure, drop_caches), the grant would be
// gone. So the plugin's process keeps an O_PATH descriptor on each
// granted entry, which keeps it cached: near the top of its descriptor
// range, out of the way of the low numbers programs expect free.

// procShared are the machine-wide /proc entries a plugin may read: CPUs,
// memory, load and kernel settings (the namespaces level shows the same
// ones; they name no process and no socket).
var procShared = []string{"cpuinfo", "meminfo", "stat", "uptime", "loadavg", "version", "filesystems", "sys"}

// procOwn are the entries of the plugin's own process directory it may
// read: what runtimes read of themselves. Not net, which is the host's
// network namespace's, nor task, which holds each thread's net again.
var procOwn = []string{"status", "stat", "statm", "limits", "cgroup", "mountinfo", "mounts", "maps", "smaps_rollup",
	"cmdline", "comm", "environ", "auxv", "fd", "fdinfo", "io", "attr"}

// procPinSpan is how far below the descriptor limit the pins start.
const procPinSpan = 64

// procRules grants procShared and the calling process's procOwn to the
// ruleset, read-only, each pinned by a descriptor left open across exec.
// Called by the exec stage, whose process becomes the plugin's; a
// process the plugin starts has a directory of its own, which no rule
// names. An entry that cannot be pinned (the plugin's descriptor limit
// is reached) is not granted.
func procRules(rs, abi int) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	from := max(3, int(min(lim.Cur, 1<<20))-procPinSpan)
	var paths []string
	for _, e := range procShared {
		paths = append(paths, "/proc/"+e)
	}
	dir := "/proc/" + strconv.Itoa(os.Getpid())
	for _, e := range procOwn {
		paths = append(paths, dir+"/"+e)
	}
	for _, p := range paths {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EMFILE) {
			continue
		}
		if err != nil {
			return fmt.Errorf("landlock rule for %s: %w", p, err)
		}
		pin, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD, from)
		unix.Close(fd)
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.EINVAL) {
			continue
		}
		if err != nil {
			return fmt.Errorf("pinning %s: %w", p, err)
		}
		if err := addRule(rs, pin, p, llRead, abi); err != nil {
			return err
		}
	}
	return nil
}
