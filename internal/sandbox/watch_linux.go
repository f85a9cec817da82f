package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// task is one process of the sandbox as /proc/PID/stat shows it.
type task struct {
	pid, ppid int
	threads   int
}

// readTask parses /proc/PID/stat; the command name may hold anything,
// so the fields are read after its last ')'.
func readTask(pid int) (task, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return task{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return task{}, false
	}
	f := bytes.Fields(b[i+1:])
	// After the name: state(0) ppid(1) … num_threads(17).
	if len(f) < 18 {
		return task{}, false
	}
	t := task{pid: pid}
	t.ppid, _ = strconv.Atoi(string(f[1]))
	t.threads, _ = strconv.Atoi(string(f[17]))
	return t, true
}

// pss is a process's proportional share of resident memory in KiB: a
// page shared by n processes (a fork's copy-on-write pages) counts 1/n
// for each, so the sum over the sandbox is what it really holds. ok is
// false when the process hides it (hidden).
func pss(pid int) (kib int64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, !hidden(err)
	}
	i := bytes.Index(b, []byte("\nPss:"))
	if i < 0 {
		return 0, true
	}
	f := bytes.Fields(b[i+5:])
	if len(f) == 0 {
		return 0, true
	}
	n, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return n, true
}

// hidden tells a process that keeps its memory maps (and descriptors)
// from the init from one that is gone or going: a process that is not
// dumpable (by prctl, or by executing a file it may not read) is readable
// only with CAP_SYS_PTRACE, which an unprivileged host's init lacks,
// while one that has released its memory reads as empty. (Its fd
// directory is no test: an exiting process's is root's too.)
func hidden(err error) bool {
	return errors.Is(err, fs.ErrPermission)
}

// tasks lists the sandbox's processes but the init: at the namespaces
// level every process /proc shows (the pid namespace is the sandbox's);
// at the landlock level the init's descendants, found from the init down
// (descendants), so that a check costs what the sandbox holds and not
// what the host runs, and at most limit of them (0: walkBound).
func tasks(ns bool, limit int) []task {
	if !ns {
		return descendants(os.Getpid(), limit, nil)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []task
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if t, ok := readTask(pid); ok {
			out = append(out, t)
		}
	}
	return out
}

// walkBound bounds a walk from the init down where no process limit
// does: the process limit's own bound (config.go).
const walkBound = 1 << 16

// descendants lists every process below root, at any depth, from the
// children files of each of their threads (a child is listed under the
// thread that started it), calling found (if not nil) with each as it is
// first seen. The init is a subreaper, so an orphan is still below it. A
// process started while the walk runs may be missed: the watcher looks
// again at its next tick, and the sweep until the init has no child left.
//
// The walk ends at limit processes (0: walkBound): processes that fork
// and exit at once keep showing new ones, and a walk that lists each
// until none is new never ends while they outrun it (the watcher then
// stalls and nothing is enforced). A check sees the limit reached; the
// sweep stops each process as found, so that none forks again.
func descendants(root, limit int, found func(pid int)) []task {
	if limit <= 0 {
		limit = walkBound
	}
	var out []task
	seen := map[int]bool{root: true}
	var buf bytes.Buffer
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		dir := "/proc/" + strconv.Itoa(queue[0]) + "/task/"
		threads, err := os.ReadDir(dir)
		if err != nil {
			continue // gone since its parent listed it
		}
		for _, th := range threads {
			for _, f := range bytes.Fields(readAll(dir+th.Name()+"/children", &buf)) {
				pid, err := strconv.Atoi(string(f))
				if err != nil || seen[pid] {
					continue
				}
				seen[pid] = true
				if found != nil {
					found(pid)
				}
				if t, ok := readTask(pid); ok {
					out = append(out, t)
					queue = append(queue, pid)
					if len(out) >= limit {
						return out
					}
				}
			}
		}
	}
	return out
}

// readAll reads a proc file to its end into buf. A children file must
// be read so: the kernel hands it out a page (4 KiB) a read, about 680
// pids, and a thread may have more children than that.
func readAll(name string, buf *bytes.Buffer) []byte {
	buf.Reset()
	f, err := os.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	_, _ = buf.ReadFrom(f)
	return buf.Bytes()
}

// fdMemory adds the sizes of pid's open memfd files to memfds, by device
// and inode (a memfd shared by processes counts once): their pages are
// no process's resident memory until mapped, and no tmpfs bounds them.
// It returns how many descriptors wait in flight on pid's unix sockets
// (each socket counted once in socks): a memfd sent and never received
// is in no process's descriptors, and its size is no one's to read.
func fdMemory(pid int, memfds map[[2]uint64]int64, socks map[string]bool) (inflight int) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	for _, e := range ents {
		target, err := os.Readlink(dir + e.Name())
		switch {
		case err != nil:
		case strings.HasPrefix(target, "/memfd:"):
			var st unix.Stat_t
			if unix.Stat(dir+e.Name(), &st) == nil {
				memfds[[2]uint64{st.Dev, st.Ino}] = st.Size
			}
		case strings.HasPrefix(target, "socket:") && !socks[target]:
			socks[target] = true
			inflight += scmFDs("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + e.Name())
		}
	}
	return inflight
}

// scmFDs is the scm_fds line of a unix socket's fdinfo: the descriptors
// queued on it, sent and not yet received.
func scmFDs(name string) int {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	i := bytes.Index(b, []byte("\nscm_fds:"))
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+9:])
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(string(f[0]))
	return n
}

// watcher enforces the limits that span processes.
type watcher struct {
	ns     bool
	limits Limits
	// inflight: the last look found descriptors in flight. Passing one
	// takes a moment; two looks in a row finding some is memory kept
	// where the init cannot count it.
	inflight bool
	// hidden: the last look found a process whose memory it may not
	// read. A process is so for a moment between a uid change and its
	// exec; two looks in a row finding one is memory kept out of sight.
	hidden bool
	// mem reads a process's memory in KiB (false: hidden); nil is pss.
	mem func(pid int) (int64, bool)
	// dir is the private directory and tmpfs the sandbox's own tmpfs
	// mounts, whose total the disk limit bounds (disk_linux.go); no disk
	// look without dir.
	dir   string
	tmpfs []string
	// looks counts the looks and nextDisk is the one that looks at the
	// disk next (diskDue); diskHidden: the last disk look found what it
	// could not count.
	looks, nextDisk int
	diskHidden      bool
}

// newWatcher is the init's watcher of the plugin s describes.
func newWatcher(s *initSpec) *watcher {
	w := &watcher{ns: s.Level == LevelNamespaces, limits: s.Limits, dir: filepath.Clean(s.Dir)}
	if w.ns {
		w.tmpfs = []string{"/tmp", "/dev/shm"}
	}
	return w
}

// check returns the limit reached, if any, with a detail.
func (w *watcher) check() (string, string) { return w.look(false) }

// final is the look after the plugin failed, to tell which limit it
// failed at: the disk is looked at whatever the cadence.
func (w *watcher) final() (string, string) { return w.look(true) }

func (w *watcher) look(final bool) (string, string) {
	ts := tasks(w.ns, w.limits.Processes)
	threads := 0
	for _, t := range ts {
		threads += max(t.threads, 1)
	}
	if w.limits.Processes > 0 && threads >= w.limits.Processes {
		return "processes", fmt.Sprintf("processes and threads reached the limit of %d", w.limits.Processes)
	}
	var kib int64
	memfds, socks, inflight, hidden := map[[2]uint64]int64{}, map[string]bool{}, 0, false
	for _, t := range ts {
		inflight += fdMemory(t.pid, memfds, socks)
	}
	mem := w.mem
	if mem == nil {
		mem = pss
		if w.farBelow(ts, memfds) {
			mem = pssReadable
		}
	}
	for _, t := range ts {
		n, ok := mem(t.pid)
		hidden = hidden || !ok
		kib += n
	}
	wasHidden, wasInflight := w.hidden, w.inflight
	w.hidden, w.inflight = hidden, inflight > 0
	if hidden && wasHidden {
		// Fail closed: memory the init cannot count is over the limit.
		return "memory", "a process of the plugin hid its memory from the init at two looks in a row (it is not dumpable)"
	}
	if inflight > 0 && wasInflight {
		return "memory", "descriptors stayed in flight on the plugin's sockets, where the init cannot count their memory"
	}
	for _, n := range memfds {
		kib += n >> 10
	}
	if mem := int64(w.limits.MemoryMB) << 10; mem > 0 && kib >= mem {
		return "memory", fmt.Sprintf("resident memory reached the limit of %d MiB", w.limits.MemoryMB)
	}
	if w.diskDue(final) {
		return w.timedCheckDisk(ts)
	}
	return "", ""
}

// sweep kills every process of the sandbox but the init and reaps them
// all, looping until none is left (a process may fork while being
// killed; its children are then the init's, as subreaper or pid 1).
func sweep(ns bool) {
	for range 1000 {
		if ns {
			_ = unix.Kill(-1, unix.SIGKILL)
		} else {
			// Stop them all first, each as soon as found: a stopped
			// process forks no more, so none outruns the walk and no
			// new one appears between the scan and the kill.
			descendants(os.Getpid(), 0, func(pid int) { _ = unix.Kill(pid, unix.SIGSTOP) })
			for _, t := range tasks(false, 0) {
				_ = unix.Kill(t.pid, unix.SIGKILL)
			}
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.ECHILD {
				return
			}
			if err != nil && err != unix.EINTR || pid == 0 {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
