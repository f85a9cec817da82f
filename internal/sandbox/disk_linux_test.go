package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// holdDeleted starts a process that writes two files in dir, deletes
// both, and keeps one open (2 MiB) and the other only mapped (1 MiB):
// space no walk of dir finds.
func holdDeleted(t *testing.T, dir string) int {
	t.Helper()
	script := `import mmap, os, sys
d = sys.argv[1]
f = open(os.path.join(d, "open"), "w+b")
f.write(b"x" * (2 << 20)); f.flush()
os.unlink(f.name)
g = open(os.path.join(d, "mapped"), "w+b")
g.write(b"y" * (1 << 20)); g.flush()
m = mmap.mmap(g.fileno(), 0)
g.close()
os.unlink(os.path.join(d, "mapped"))
print("held", flush=True)
sys.stdin.read()
`
	c := exec.Command(testenv.Python(), "-c", script, dir)
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
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the holder: %q %v", line, err)
	}
	return c.Process.Pid
}

// The disk look counts what the plugin holds however it holds it: files
// at any depth, a hard link once, a deleted file still open, a deleted
// file still mapped. 1 MiB of files, two entries of 4 KiB, and 3 MiB
// deleted: over a 4 MiB limit, under a 5 MiB one (a hard link counted
// twice would be over).
func TestWatcherDiskCountsWhatThePluginHolds(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "e"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ts := []task{{pid: holdDeleted(t, dir)}}
	under := &watcher{dir: dir, limits: Limits{DiskMB: 5}}
	if lim, detail := under.checkDisk(ts); lim != "" {
		t.Fatalf("under 5 MiB: %s: %s", lim, detail)
	}
	over := &watcher{dir: dir, limits: Limits{DiskMB: 4}}
	if lim, detail := over.checkDisk(ts); lim != "disk" || !strings.Contains(detail, "reached the limit of 4 MiB") {
		t.Fatalf("over 4 MiB: %q: %s", lim, detail)
	}
}

// What the init cannot count — here a path too long to name — ends the
// plugin at the disk limit when two looks in a row find it, not at one.
func TestWatcherDiskUncountableTwoLooksInARow(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("n", 250)
	for range 20 { // 5,000 bytes: past PATH_MAX
		if err := unix.Mkdirat(fd, name, 0o700); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	w := &watcher{dir: dir, limits: Limits{DiskMB: 1024}}
	if lim, detail := w.checkDisk(nil); lim != "" {
		t.Fatalf("the first look: %s: %s", lim, detail)
	}
	if lim, detail := w.checkDisk(nil); lim != "disk" || !strings.Contains(detail, "too long") {
		t.Fatalf("the second look: %q: %s", lim, detail)
	}
}

// The watcher looks at the disk at its first look and every diskEvery
// looks after, and only with a private directory to look at.
func TestWatcherDiskCadence(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &watcher{dir: dir, limits: Limits{DiskMB: 1, MemoryMB: 1 << 20, Processes: 1 << 16}}
	var got []string
	for range 2*diskEvery + 1 {
		lim, _ := w.check()
		got = append(got, lim)
	}
	want := strings.Repeat("disk"+strings.Repeat(",", diskEvery), 2) + "disk"
	if strings.Join(got, ",") != want {
		t.Fatalf("looks %q, want %q", strings.Join(got, ","), want)
	}
	if lim, _ := (&watcher{limits: Limits{DiskMB: 1, MemoryMB: 1 << 20, Processes: 1 << 16}}).check(); lim != "" {
		t.Fatalf("no directory: %q", lim)
	}
}

// BenchmarkDiskLook is what one look at the disk costs with a private
// directory of n small files (the walk's cost grows with the entries; at
// most DiskMB/fileCharge of them are walked).
func BenchmarkDiskLook(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			dir := b.TempDir()
			for i := range n {
				if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), []byte("x"), 0o600); err != nil {
					b.Fatal(err)
				}
			}
			w := &watcher{dir: dir, limits: Limits{DiskMB: 1 << 20}}
			for b.Loop() {
				if lim, _ := w.checkDisk(nil); lim != "" {
					b.Fatal(lim)
				}
			}
		})
	}
}

// A maps line names a deleted file of the private directory only when
// its path does, whatever the plugin named its files: a path that merely
// ends in " (deleted)", or lies beside the directory, or a line whose
// fields before the path are not the kernel's five, is not one. And a
// line the kernel writes for such a mapping is always found, with its
// address range and inode.
func FuzzDeletedMapping(f *testing.F) {
	const dir = "/tmp/airlock-0/host-1/airlock-plugin-2"
	f.Add([]byte("7f0000000000-7f0000001000 rw-s 00000000 fd:01 1234                       "+dir+"/f (deleted)"), uint64(1234), "f")
	f.Add([]byte("7f0000000000-7f0000001000 r--p 00000000 00:1f 99 /usr/lib/x.so (deleted)"), uint64(99), "x")
	f.Add([]byte("7f0000000000-7f0000001000 r--p 00000000 00:1f 99 "+dir+"-other/f (deleted)"), uint64(7), "a /b (deleted)")
	f.Add([]byte(dir+"/f (deleted)"), uint64(0), "\\012")
	f.Fuzz(func(t *testing.T, line []byte, ino uint64, name string) {
		if addr, _, ok := deletedMapping(line, dir); ok {
			s := string(line)
			i := strings.Index(s, " /")
			if !strings.HasSuffix(s, " (deleted)") || !strings.HasPrefix(s[i+1:], dir+"/") || strings.Contains(addr, "/") {
				t.Fatalf("%q: found %q, but it names no deleted file below the directory", line, addr)
			}
		}
		if strings.ContainsAny(name, "\n") || name == "" {
			return
		}
		kernel := fmt.Sprintf("7f0000000000-7f0000001000 rw-s 00000000 fd:01 %d %s/%s (deleted)", ino, dir, name)
		addr, got, ok := deletedMapping([]byte(kernel), dir)
		if !ok || addr != "7f0000000000-7f0000001000" || got != ino {
			t.Fatalf("%q: %q %d %v", kernel, addr, got, ok)
		}
	})
}
