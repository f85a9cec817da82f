package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// byScan lists root's descendants the slow way, from every process the
// host has and its parent chain: what descendants must agree with.
func byScan(root int) []int {
	out := testenv.Descendants(root)
	slices.Sort(out)
	return out
}

func pids(ts []task) []int {
	var out []int
	for _, t := range ts {
		out = append(out, t.pid)
	}
	slices.Sort(out)
	return out
}

// The landlock-level watcher finds a sandbox's processes from the init
// down: every one of a tree, at any depth (here deeper than 64), and
// nothing else — the same set a scan of the whole host finds.
func TestDescendantsMatchAScanOfTheHost(t *testing.T) {
	// Chains of shells, each the child of the one before (the trailing
	// true keeps a shell from replacing itself with the next), the last
	// of which starts two sleeps: depth+3 processes a chain.
	script := `n=$1; if [ "$n" -gt 0 ]; then sh -c "$0" "$0" $((n-1)); else sleep 60 & sleep 60; fi; true`
	var cmds []*exec.Cmd
	for _, depth := range []string{"0", "3", "70"} {
		c := exec.Command("sh", "-c", script, script, depth)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
	})
	self := os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, want := pids(descendants(self, 0, nil)), byScan(self)
		if slices.Equal(got, want) && len(got) == 3+6+73 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("descendants %v, a scan of the host %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startGroup starts a command in a process group of its own, killed
// whole when the test ends.
func startGroup(t *testing.T, name string, args ...string) {
	t.Helper()
	c := exec.Command(name, args...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		_ = c.Wait()
	})
}

// A thread with more children than one page of its children file holds
// (the kernel hands the file out a page at a time, 4 KiB: about 680
// five-digit pids) has them all found, the last ones too: a plugin must
// not hide processes, and their memory, behind a thousand sleepers.
func TestDescendantsOfAThreadWithManyChildren(t *testing.T) {
	const n = 1200
	script := `import os, signal, sys
for _ in range(int(sys.argv[1])):
    if os.fork() == 0:
        signal.pause()
        os._exit(0)
signal.pause()
`
	startGroup(t, testenv.Python(), "-c", script, strconv.Itoa(n))
	self := os.Getpid()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, want := pids(descendants(self, 0, nil)), byScan(self)
		if slices.Equal(got, want) && len(got) == 1+n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("descendants found %d, a scan of the host %d, want %d", len(got), len(want), 1+n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A walk ends at its limit, whatever is left: processes that fork and
// exit at once keep showing new ones, and a walk that went on until
// none was new would never end while they outran it (the init then
// enforces nothing). Each process is handed to found as it is seen.
func TestDescendantsStopAtTheLimit(t *testing.T) {
	startGroup(t, "sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 60 & done; sleep 60")
	self := os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for len(descendants(self, 0, nil)) < 12 {
		if time.Now().After(deadline) {
			t.Fatal("the tree did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var seen []int
	got := descendants(self, 4, func(pid int) { seen = append(seen, pid) })
	if len(got) != 4 {
		t.Fatalf("a walk limited to 4 found %d", len(got))
	}
	if !slices.Equal(pids(got), slices.Sorted(slices.Values(seen))) {
		t.Fatalf("found saw %v, the walk listed %v", seen, pids(got))
	}
}

// A descriptor sent over a unix socket and not received is in no
// process's descriptors (a memfd there holds memory no look can size):
// one look that finds one is a descriptor being passed, two in a row is
// the memory limit.
func TestWatcherDescriptorsInFlight(t *testing.T) {
	script := `import array, os, socket, sys
a, b = socket.socketpair()
fd = os.memfd_create("held")
a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
os.close(fd)
print("sent", flush=True)
sys.stdin.read()
`
	c := exec.Command(testenv.Python(), "-c", script)
	stdin, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = c.Wait() })
	if _, err := out.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	w := &watcher{limits: Limits{MemoryMB: 1024, Processes: 100}}
	if lim, detail := w.check(); lim != "" {
		t.Fatalf("the first look: %s: %s", lim, detail)
	}
	if lim, _ := w.check(); lim != "memory" {
		t.Fatalf("the second look: %q, want the memory limit", lim)
	}
}

// A process whose memory the init may not read ends the plugin at the
// memory limit when two looks in a row find one, not at one: a process
// is so for a moment between a uid change and its exec at every start.
func TestWatcherHiddenMemoryTwoLooksInARow(t *testing.T) {
	c := exec.Command("sleep", "60")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	var hide bool
	w := &watcher{limits: Limits{MemoryMB: 1024, Processes: 100}, mem: func(pid int) (int64, bool) {
		if pid == c.Process.Pid && hide {
			return 0, false
		}
		return pss(pid)
	}}
	for i, h := range []bool{true, false, true, false} {
		hide = h
		if lim, detail := w.check(); lim != "" {
			t.Fatalf("look %d (hidden %v): %s: %s", i, h, lim, detail)
		}
	}
	hide = true
	if lim, _ := w.check(); lim != "" {
		t.Fatalf("the first look of a hidden process: %q", lim)
	}
	if lim, _ := w.check(); lim != "memory" {
		t.Fatalf("the second look in a row: %q, want the memory limit", lim)
	}
}

// BenchmarkTasks is what one look of the watcher costs at each level's
// way of listing: from the init down, and by scanning the host (how the
// landlock level listed before; its cost grows with every process the
// host runs, sandboxed or not).
func BenchmarkTasks(b *testing.B) {
	c := exec.Command("sh", "-c", "sleep 60 & sleep 60")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL); _ = c.Wait() }()
	b.Run("descendants", func(b *testing.B) {
		for b.Loop() {
			descendants(os.Getpid(), 0, nil)
		}
	})
	b.Run("host-scan", func(b *testing.B) {
		for b.Loop() {
			byScan(os.Getpid())
		}
	})
}

// A look skips the PSS walk only while the resident sets and memfds are
// far below the memory limit (PSS is never more than the resident set),
// and it can still tell a process whose PSS it may read.
func TestLookBoundsPSSByResidentSet(t *testing.T) {
	self := []task{{pid: os.Getpid()}}
	rss, ok := rssKiB(os.Getpid())
	if p, _ := pss(os.Getpid()); !ok || rss <= 0 || p > rss {
		t.Fatalf("resident set %d KiB (%v), PSS %d KiB: want a resident set at least the PSS", rss, ok, p)
	}
	w := &watcher{limits: Limits{MemoryMB: 1 << 20}}
	if !w.farBelow(self, nil) {
		t.Fatal("a look under a far limit walks the pages")
	}
	if w.farBelow(self, map[[2]uint64]int64{{1, 1}: 1 << 40}) {
		t.Fatal("a memfd's size is left out of the bound")
	}
	w.limits.MemoryMB = int(rss>>10) + 1
	if w.farBelow(self, nil) {
		t.Fatal("a look just under the limit skips the walk")
	}
	if w.limits.MemoryMB = 0; w.farBelow(self, nil) {
		t.Fatal("a look without a limit skips the walk")
	}
	if _, ok := pssReadable(os.Getpid()); !ok {
		t.Fatal("this process's own PSS is not readable")
	}
}
