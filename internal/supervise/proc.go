//go:build linux

package supervise

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is one supervised plugin process of either kind: started in its own
// process group, its stderr read line by line into a LineLog, and on every
// exit path — crash, kill, shutdown — its whole group killed and its
// private directories removed before Exited closes.
type Proc struct {
	cmd       *exec.Cmd
	dirs      []string
	kill      func(pid int)
	exited    chan struct{}
	err       error // the leader's exit; read after exited closes
	killTimer sync.Once
	stderr    *LineLog // nil when stderr is discarded
}

// ProcOptions are what Start needs besides the command.
type ProcOptions struct {
	// Stderr receives the process's stderr, a line at a time; discarded
	// when nil.
	Stderr *LineLog
	// Dirs are private directories of this process, removed after it
	// exits (whoever created them hands them over here).
	Dirs []string
	// CloseAfterStart are the parent's copies of pipe ends handed to the
	// child (cmd.Stdout as an *os.File); closed once the child has them.
	CloseAfterStart []io.Closer
	// Kill, when set, replaces SIGKILL to the process group: a sandbox
	// init is asked to kill its sandbox whole (the group would miss a
	// descendant that left it). The group still gets SIGKILL if the
	// process has not exited KillGrace later.
	Kill func(pid int)
	// AfterExit runs once the process has exited, before its
	// directories are removed and Exited closes; what it returns
	// replaces the exit error (it receives the leader's).
	AfterExit func(exitErr error) error
}

// KillGrace is how long a Kill hook has before the group gets SIGKILL.
const KillGrace = 2 * time.Second

// stderrGrace bounds the wait for the stderr reader after the exit: a
// process that left its group (setsid) can hold the pipe open.
const stderrGrace = 2 * time.Second

// Start starts cmd under supervision. On error nothing is left running
// and opts.Dirs are removed.
func Start(cmd *exec.Cmd, opts ProcOptions) (*Proc, error) {
	p := &Proc{cmd: cmd, dirs: opts.Dirs, kill: opts.Kill, exited: make(chan struct{}), stderr: opts.Stderr}
	Prepare(cmd)
	// stderr through our own pipe: cmd.Wait then does not wait for a
	// child that inherited it, and the reader ends once the group is dead.
	r, w, err := os.Pipe()
	if err != nil {
		p.removeDirs()
		return nil, err
	}
	cmd.Stderr = w
	err = cmd.Start()
	w.Close()
	for _, c := range opts.CloseAfterStart {
		c.Close()
	}
	if err != nil {
		r.Close()
		p.removeDirs()
		return nil, err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if opts.Stderr != nil {
			_, _ = io.Copy(opts.Stderr, r)
			opts.Stderr.Flush()
		} else {
			_, _ = io.Copy(io.Discard, r)
		}
		r.Close()
	}()
	go func() {
		err := cmd.Wait()
		// The leader is gone; whatever it spawned dies with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t := time.NewTimer(stderrGrace)
		select {
		case <-copied:
		case <-t.C:
			r.Close() // a descendant outside the group holds it: stop reading
		}
		t.Stop()
		if opts.AfterExit != nil {
			err = opts.AfterExit(err)
		}
		if err != nil && opts.Stderr != nil {
			err = &ExitError{Err: err, Stderr: opts.Stderr.Tail()}
		}
		p.removeDirs()
		p.err = err
		close(p.exited)
	}()
	return p, nil
}

// ExitError is a failed exit with the last lines the process wrote to
// stderr (redacted as they were logged). Its text is Err's alone: the
// lines are the plugin's, so they are shown where an operator asks for
// them (a plugin's status), never folded into an error string or a log
// line.
type ExitError struct {
	Err    error
	Stderr []string
}

func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }

func (p *Proc) removeDirs() {
	for _, d := range p.dirs {
		_ = os.RemoveAll(d)
	}
}

// Pid is the process id (and process group id).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited, its group has been sent
// SIGKILL and its directories are removed. A descendant killed with the
// group runs no more code, but the kernel may still be finishing its exit
// (it has let go of its files, stderr included, and is not yet a zombie):
// whoever must see it gone waits on it (a pidfd), not on /proc at once.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ExitErr is Err for a report: a failed exit as Err has it (an
// *ExitError when stderr is read), and an exit with status 0 as an
// *ExitError of its own carrying the stderr tail.
func (p *Proc) ExitErr() error {
	err := p.Err()
	if err != nil {
		return err
	}
	x := &ExitError{Err: errors.New("exit status 0")}
	if p.stderr != nil {
		x.Stderr = p.stderr.Tail()
	}
	return x
}

// Err is the exit error (nil for status 0); valid after Exited closes.
func (p *Proc) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return errors.New("process is still running")
	}
}

// Signal sends sig to the process group (SIGKILL through the Kill hook).
func (p *Proc) Signal(sig syscall.Signal) {
	if sig != syscall.SIGKILL || p.kill == nil {
		Signal(p.cmd, sig)
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	p.kill(p.cmd.Process.Pid)
	p.killTimer.Do(func() {
		go func() {
			t := time.NewTimer(KillGrace)
			defer t.Stop()
			select {
			case <-p.exited:
			case <-t.C:
				Signal(p.cmd, syscall.SIGKILL)
			}
		}()
	})
}

// Kill kills the process (its whole sandbox) and waits for the exit.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop waits for the exit, escalating through steps (see Stop); it
// returns how many signals were sent.
func (p *Proc) Stop(steps ...Step) int { return stop(p.Signal, p.exited, steps...) }
