//go:build linux

package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// process is a started service with its combined output kept for errors.
type process struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // exit status, valid once done is closed
}

func startProcess(bin string, args []string, env []string, dir string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// Die with the test binary even if cleanup never runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process group, if it still runs.
func (p *process) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// stop sends SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *process) describe(what string) error {
	return fmt.Errorf("%s exited early (%v); output:\n%s", what, p.err, p.out.String())
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's
// output, a logger in a test), bounded to 1 MiB.
type SyncBuffer = syncBuffer

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 { // keep memory bounded; the head has what matters
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ProcessAlive reports whether pid is a live process: a zombie (exited,
// not yet reaped by its new parent) counts as dead.
func ProcessAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// WaitGone waits until pid has exited: a pidfd turns readable then,
// whoever the process's parent is, so a process that was sent SIGKILL
// but is still on its way out is waited for, not reported alive. The
// bound is generous, so that a regression fails instead of hanging.
func WaitGone(tb testing.TB, pid int, what string) {
	tb.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer unix.Close(fd)
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(time.Minute/time.Millisecond))
	if err != nil || n == 0 {
		tb.Fatalf("%s (pid %d) is still alive: %v", what, pid, err)
	}
}

// Descendant waits up to 20 s for a live descendant of root whose command
// name is comm and returns its pid (as the host sees it: a sandboxed
// plugin's own view of pids is its namespace's).
func Descendant(tb testing.TB, root int, comm string) int {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, pid := range Descendants(root) {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil && strings.TrimSpace(string(b)) == comm && ProcessAlive(pid) {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("no %s process below pid %d", comm, root)
	return 0
}

// Descendants lists the processes below root, at any depth, from a scan
// of every process in /proc and its parent chain.
func Descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for pid := range parent {
		// A parent chain is at most as long as there are processes.
		for p, hops := parent[pid], 0; p > 0 && hops < len(parent); p, hops = parent[p], hops+1 {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
