//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func init() { testModes["proc-probe"] = procProbe }

// procLook is what a plugin found at one /proc path.
type procLook struct {
	Path     string `json:"path"`
	Readable bool   `json:"readable"`
	Reveals  string `json:"reveals,omitempty"` // which marker it showed
}

// procProbe is a plugin that looks through /proc for what it must not
// see: the unix socket path in MARK_UNIX, the TCP port in MARK_TCP (as
// /proc/net/tcp shows it), the process MARK_PID (another process of the
// machine) and its command line; and for what a runtime needs of its own
// /proc.
func procProbe() int {
	unixPath, tcpPort, pid := os.Getenv("MARK_UNIX"), os.Getenv("MARK_TCP"), os.Getenv("MARK_PID")
	markers := map[string]string{"unix socket": unixPath, "tcp listener": ":" + tcpPort + " ", "process": "proc-probe-marker"}
	paths := []string{"/proc/net/unix", "/proc/net/tcp", "/proc/net/tcp6", "/proc/self/net/unix", "/proc/thread-self/net/unix",
		"/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/net/unix", "/proc/1/net/unix", "/proc/1/cmdline",
		"/proc/" + pid + "/net/unix", "/proc/" + pid + "/cmdline", "/proc/" + pid + "/environ", "/proc/" + pid + "/status",
		"/proc/" + strconv.Itoa(os.Getppid()) + "/cmdline",
		"/proc/self/status", "/proc/self/stat", "/proc/self/cgroup", "/proc/self/mountinfo", "/proc/self/maps",
		"/proc/self/limits", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys/kernel/osrelease"}
	enc := json.NewEncoder(os.Stdout)
	for _, p := range paths {
		look := procLook{Path: p}
		b, err := os.ReadFile(p)
		look.Readable = err == nil
		for what, m := range markers {
			if m != "" && strings.Contains(string(b), m) {
				look.Reveals = what
			}
		}
		_ = enc.Encode(look)
	}
	// Listing /proc shows which processes exist.
	look := procLook{Path: "/proc/"}
	if ents, err := os.ReadDir("/proc"); err == nil {
		look.Readable = true
		for _, e := range ents {
			if e.Name() == pid {
				look.Reveals = "process"
			}
		}
	}
	_ = enc.Encode(look)
	// Opening the self link's target by its number works too.
	_, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(os.Getpid()), "status"))
	_ = enc.Encode(procLook{Path: "/proc/PID/status", Readable: err == nil})
	return 0
}

// A plugin's /proc shows nothing of the machine's sockets, nor of other
// processes, at any level: not the unix socket paths of /proc/net/unix
// (every one on the machine, where the plugin shares the host's network
// namespace), not the TCP listeners of /proc/net/tcp, not another
// process's command line or environment; while what a runtime reads of
// its own process and of the machine (its status, cgroup, mounts, the
// CPU and memory) stays readable.
func TestProcShowsNothingOfTheMachine(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "other-plugin.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	port := fmt.Sprintf("%04X", tl.Addr().(*net.TCPAddr).Port)
	// Another process of the machine, whose command line carries the
	// marker the probe looks for.
	other := exec.Command("/bin/sh", "-c", "sleep 1000; true", "proc-probe-marker")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	needed := append([]string{"/proc/PID/status"}, procNeeded...)
	for _, level := range Detect().Levels() {
		t.Run(string(level), func(t *testing.T) {
			run := runPlugin(t, level, "proc-probe", "MARK_UNIX="+sock, "MARK_TCP="+port, "MARK_PID="+strconv.Itoa(other.Process.Pid))
			if run.code != 0 {
				t.Fatalf("the probe failed (%d): %s", run.code, run.stderr)
			}
			looks := map[string]procLook{}
			for line := range strings.Lines(run.stdout) {
				var l procLook
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Fatalf("probe output %q: %v", line, err)
				}
				looks[l.Path] = l
				t.Logf("%s: readable %v %s", l.Path, l.Readable, l.Reveals)
				if l.Reveals != "" {
					t.Errorf("%s shows the plugin a %s of the machine", l.Path, l.Reveals)
				}
			}
			if level == LevelLandlock && looks["/proc/1/cmdline"].Readable {
				t.Error("/proc/1/cmdline is readable: another process of the machine")
			}
			for _, p := range needed {
				if !looks[p].Readable {
					t.Errorf("%s is not readable: a runtime needs it", p)
				}
			}
		})
	}
}

func init() { testModes["proc-twice"] = procTwice }

// procNeeded are /proc entries runtimes read, which stay readable.
var procNeeded = []string{"/proc/self/status", "/proc/self/stat", "/proc/self/cgroup", "/proc/self/mountinfo", "/proc/self/maps",
	"/proc/self/limits", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys/kernel/osrelease"}

// procTwice is a plugin that reads procNeeded, says which it could not,
// waits for a line on stdin and does it again.
func procTwice() int {
	look := func() {
		var failed []string
		for _, p := range procNeeded {
			if _, err := os.ReadFile(p); err != nil {
				failed = append(failed, p)
			}
		}
		fmt.Printf("unreadable: %q\n", failed)
	}
	look()
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	look()
	return 0
}

// The landlock level's /proc grants hold after the kernel drops its
// caches of /proc entries (procfs makes new inodes for entries looked up
// afresh, and a Landlock rule names an inode): the plugin keeps each
// granted entry pinned.
func TestProcGrantsOutliveTheCaches(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("dropping the kernel's caches needs root")
	}
	dir, bin := pluginBinary(t)
	priv, err := os.MkdirTemp(dir, "private-")
	if err != nil {
		t.Fatal(err)
	}
	cmd, box, err := Command(withUID(t, Spec{Name: "proc", Path: bin, Env: []string{testModeEnv + "=proc-twice"}, Dir: priv, InstallDir: dir}, LevelLandlock), LevelLandlock, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); box.Wait() }()
	if err := box.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if line, _ := r.ReadString('\n'); line != "unreadable: []\n" {
		t.Fatalf("before: %s", line)
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2\n"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Write([]byte("again\n")); err != nil {
		t.Fatal(err)
	}
	if line, _ := r.ReadString('\n'); line != "unreadable: []\n" {
		t.Fatalf("after the caches were dropped: %s", line)
	}
}
