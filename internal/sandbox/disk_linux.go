package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A plugin's writable space is bounded in total (Limits.DiskMB), not only
// file by file: its private directory (on the host's filesystem, where
// the host reaches the provider's socket and reads Executa's transport
// files, so no sandbox-only mount can stand in for it), and at the
// namespaces level its /tmp and /dev/shm (tmpfs, each also sized). The
// init looks once a second (every diskEvery looks of the watcher), or
// less often when a look takes long — never more than a tenth of its
// time walking (diskDue):
//
//   - a tmpfs by statfs: exact, files deleted and still open included;
//   - the private directory by a walk, each entry charged its blocks and
//     at least fileCharge (an inode is disk too), hard links once, the
//     walk ending once the limit is reached (so that it costs at most
//     DiskMB/fileCharge entries: 65,536 at the default limit, about a
//     quarter of a second on the test machine);
//   - files of the private directory deleted but still open, from the
//     plugin's descriptors; deleted but still mapped, from its maps
//     (their size read through map_files where the init may).
//
// What it cannot count — a directory it may not read, a path too long to
// name, a deleted mapping whose size it may not read — counts as over the
// limit when two looks in a row find it (fail closed; one look may land
// while a directory is made and then opened to its owner).
const (
	diskEvery  = 4
	fileCharge = 16 << 10
	lookPeriod = 250 * time.Millisecond // the init's ticker
	walkShare  = 10                     // 1/walkShare of the time at most
)

// diskDue reports whether this look (counted) looks at the disk too:
// at the first, then every diskEvery looks, spaced further while a disk
// look costs more than 1/walkShare of the time between two; final
// (after the plugin failed) always.
func (w *watcher) diskDue(final bool) bool {
	w.looks++
	if w.dir == "" || w.limits.DiskMB <= 0 {
		return false
	}
	return final || w.looks > w.nextDisk
}

// timedCheckDisk is checkDisk, scheduling the next disk look by its cost.
func (w *watcher) timedCheckDisk(ts []task) (string, string) {
	start := time.Now()
	lim, detail := w.checkDisk(ts)
	every := max(diskEvery, int(walkShare*time.Since(start)/lookPeriod)+1)
	w.nextDisk = w.looks + every - 1
	return lim, detail
}

// fileBound is RLIMIT_FSIZE: no file larger than the whole writable
// space, nor a memfd larger than the memory backstop.
func fileBound(l Limits) uint64 {
	b := 2*(uint64(l.MemoryMB)<<20) + 256<<20
	if d := uint64(l.DiskMB) << 20; d > 0 && d < b {
		b = d
	}
	return b
}

// fsizeExit is the report of a plugin killed by SIGXFSZ: a write past
// fileBound.
func fsizeExit(l Limits) Exit {
	if d := uint64(l.DiskMB) << 20; d > 0 && d == fileBound(l) {
		return Exit{Limit: "disk", Detail: fmt.Sprintf("a file of the plugin reached its size bound (RLIMIT_FSIZE, the disk limit of %d MiB)", l.DiskMB)}
	}
	return Exit{Limit: "memory", Detail: "a file or memfd of the plugin reached its size bound (RLIMIT_FSIZE, from memory_mb)"}
}

// diskLook is one look's count of the plugin's writable space.
type diskLook struct {
	dir    string // the private directory, cleaned
	limit  int64  // bytes
	used   int64
	seen   map[[2]uint64]bool // inodes counted (hard links, open files)
	hidden string             // what could not be counted, if anything
	// listed, when set (tests), runs after each directory is listed:
	// where a plugin moves what the walk queued.
	listed func(dir string)
}

func newDiskLook(dir string, limitMB int) *diskLook {
	return &diskLook{dir: dir, limit: int64(limitMB) << 20, seen: map[[2]uint64]bool{}}
}

func (d *diskLook) over() bool { return d.used >= d.limit }

func (d *diskLook) hide(why string) {
	if d.hidden == "" {
		d.hidden = why
	}
}

// tmpfs adds what the filesystem at path holds.
func (d *diskLook) tmpfs(path string) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return // not there: nothing to hold
	}
	d.used += int64(st.Blocks-st.Bfree) * st.Bsize
}

// charge adds one inode, once.
func (d *diskLook) charge(st *unix.Stat_t) {
	if st.Nlink > 1 || st.Nlink == 0 {
		k := [2]uint64{st.Dev, st.Ino}
		if d.seen[k] {
			return
		}
		d.seen[k] = true
	}
	d.used += max(st.Blocks*512, fileCharge)
}

// walk charges every entry below the private directory, breadth first,
// until the limit is reached.
func (d *diskLook) walk() {
	queue := []string{d.dir}
	for len(queue) > 0 && !d.over() {
		dir := queue[0]
		queue = queue[1:]
		f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) && dir != d.dir {
				// A directory listed a moment ago is gone: deleted, or
				// moved out of the walk's way with all it holds (a
				// plugin renaming a deep chain between two parents would
				// otherwise hide it from every look). Counted as what
				// the init cannot see: two looks in a row end it.
				d.hide("a directory of the private directory moved during the look")
				continue
			}
			d.walkErr(err)
			continue
		}
		for !d.over() {
			names, err := f.Readdirnames(1024)
			for _, n := range names {
				var st unix.Stat_t
				if err := unix.Fstatat(int(f.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					d.walkErr(err)
					continue
				}
				d.charge(&st)
				if st.Mode&unix.S_IFMT == unix.S_IFDIR {
					queue = append(queue, dir+"/"+n)
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					d.walkErr(err)
				}
				break
			}
		}
		f.Close()
		if d.listed != nil {
			d.listed(dir)
		}
	}
}

// walkErr: an entry gone since it was listed holds nothing; one the init
// may not read, or not name, holds what it cannot count.
func (d *diskLook) walkErr(err error) {
	switch {
	case errors.Is(err, unix.ENOENT):
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		d.hide("a directory of the private directory is not readable by the init")
	case errors.Is(err, unix.ENAMETOOLONG):
		d.hide("a path of the private directory is too long for the init to name")
	default:
		// The error's path is the plugin's to name: only the errno.
		why := "an error"
		if errno := unix.Errno(0); errors.As(err, &errno) {
			why = errno.Error()
		}
		d.hide("a part of the private directory could not be read (" + why + ")")
	}
}

// deletedPath reports whether a descriptor's or mapping's path names a
// file of the private directory that has been deleted.
func (d *diskLook) deletedPath(p string) bool {
	rest, ok := strings.CutSuffix(p, " (deleted)")
	return ok && strings.HasPrefix(rest, d.dir+"/")
}

// openFile adds a descriptor's file (at /proc/PID/fd/N, whose link reads
// target) when it is a deleted file of the private directory.
func (d *diskLook) openFile(fdPath, target string) {
	if !d.deletedPath(target) {
		return
	}
	var st unix.Stat_t
	if unix.Stat(fdPath, &st) == nil && st.Nlink == 0 && st.Mode&unix.S_IFMT == unix.S_IFREG {
		d.charge(&st)
	}
}

// mappings adds the deleted files of the private directory that pid maps
// and no descriptor counted (call after openFiles for every process).
func (d *diskLook) mappings(pid int) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	for sc.Scan() {
		addr, ino, ok := deletedMapping(sc.Bytes(), d.dir)
		if !ok {
			continue
		}
		var st unix.Stat_t
		err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/map_files/"+addr, &st)
		switch {
		case err == nil && st.Nlink == 0:
			d.charge(&st)
		case err == nil:
			// Named like a deleted file, and not one: the walk counts it.
		case !d.seenIno(ino):
			// Reading the size of a mapping needs CAP_SYS_ADMIN in the
			// host's user namespace, which only a root host's init at
			// the landlock level has.
			d.hide("a process of the plugin maps a deleted file of its private directory whose size the init may not read")
		}
	}
}

// deletedMapping parses a line of /proc/PID/maps — "addr perms offset
// dev inode path", the path as the mapping's file was named, which the
// plugin chose — and reports a mapping of a deleted file below dir: its
// address range (its name in map_files) and inode.
func deletedMapping(line []byte, dir string) (addr string, ino uint64, ok bool) {
	if !bytes.HasSuffix(line, []byte(" (deleted)")) {
		return "", 0, false
	}
	// The path is the first field that starts with '/': no field before
	// it holds one.
	i := bytes.Index(line, []byte(" /"))
	if i < 0 {
		return "", 0, false
	}
	fields := bytes.Fields(line[:i])
	if len(fields) != 5 || !strings.HasPrefix(strings.TrimSuffix(string(line[i+1:]), " (deleted)"), dir+"/") {
		return "", 0, false
	}
	ino, err := strconv.ParseUint(string(fields[4]), 10, 64)
	if err != nil || bytes.IndexByte(fields[0], '/') >= 0 {
		return "", 0, false
	}
	return string(fields[0]), ino, true
}

// seenIno reports whether an inode of that number was counted (its
// device is not in the maps line as stat reports it).
func (d *diskLook) seenIno(ino uint64) bool {
	for k := range d.seen {
		if k[1] == ino {
			return true
		}
	}
	return false
}

// openFiles adds the deleted files of the private directory that pid
// holds open.
func (d *diskLook) openFiles(pid int) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if target, err := os.Readlink(dir + e.Name()); err == nil {
			d.openFile(dir+e.Name(), target)
		}
	}
}

// checkDisk is the watcher's look at the plugin's writable space, over
// the processes ts.
func (w *watcher) checkDisk(ts []task) (string, string) {
	d := newDiskLook(w.dir, w.limits.DiskMB)
	for _, t := range ts {
		d.openFiles(t.pid)
	}
	for _, t := range ts {
		d.mappings(t.pid)
	}
	for _, p := range w.tmpfs {
		d.tmpfs(p)
	}
	d.walk()
	wasHidden := w.diskHidden
	w.diskHidden = d.hidden != ""
	if d.hidden != "" && wasHidden {
		return "disk", d.hidden + " (two looks in a row)"
	}
	if d.over() {
		where := "the private directory"
		if len(w.tmpfs) > 0 {
			where += ", " + strings.Join(w.tmpfs, " and ")
		}
		return "disk", fmt.Sprintf("files in %s reached the limit of %d MiB", where, w.limits.DiskMB)
	}
	return "", ""
}
