//go:build linux

// Package supervise is the process supervision both plugin hosts share:
// how a plugin process is started so that it can be signalled as a group
// and dies with the host, how it is stopped on a schedule of escalating
// signals, and the exponential restart backoff after it crashes.
package supervise

import (
	"math"
	"os/exec"
	"syscall"
	"time"
)

// Prepare sets cmd up for supervision: its own process group (so signals
// reach every child it spawns) and a death signal when the host dies
// (SIGKILL unless the command already names one), keeping whatever else
// its SysProcAttr holds (a sandbox's namespaces).
func Prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
}

// Signal sends sig to cmd's process group; a process never started is a
// no-op.
func Signal(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}

// Step of a stop schedule: wait up to Wait for the exit, then send Signal.
type Step struct {
	Wait   time.Duration
	Signal syscall.Signal
}

// Stop waits for exited, escalating through steps: each step waits its
// Wait and, if the process is still there, sends its Signal to the group.
// After the last step it waits for the exit (make SIGKILL the last
// signal). It returns how many signals were sent.
func Stop(cmd *exec.Cmd, exited <-chan struct{}, steps ...Step) int {
	return stop(func(sig syscall.Signal) { Signal(cmd, sig) }, exited, steps...)
}

func stop(signal func(syscall.Signal), exited <-chan struct{}, steps ...Step) int {
	sent := 0
	for _, s := range steps {
		t := time.NewTimer(s.Wait)
		select {
		case <-exited:
			t.Stop()
			return sent
		case <-t.C:
		}
		signal(s.Signal)
		sent++
	}
	<-exited
	return sent
}

// Backoff is an exponential restart schedule: the n-th consecutive
// failure waits Base·2^(n-1), at most Max (no cap when zero). With a
// Budget, more than Budget failures exhaust it; with ResetAfter, a run
// that lasted that long starts the schedule over. The zero value restarts
// at once, forever. Not safe for concurrent use.
type Backoff struct {
	Base       time.Duration
	Max        time.Duration
	Budget     int
	ResetAfter time.Duration

	failures int
}

// Ran records a run of the process that lasted uptime.
func (b *Backoff) Ran(uptime time.Duration) {
	if b.ResetAfter > 0 && uptime >= b.ResetAfter {
		b.failures = 0
	}
}

// Reset starts the schedule over, as if no failure had been recorded
// (the plugin was reinstalled).
func (b *Backoff) Reset() { b.failures = 0 }

// Fail records a failure (a crash, a non-zero exit, a failed start) and
// reports whether the budget still allows a restart.
func (b *Backoff) Fail() bool {
	b.failures++
	return !b.Exhausted()
}

// Exhausted reports whether the failures exceed the budget.
func (b *Backoff) Exhausted() bool { return b.Budget > 0 && b.failures > b.Budget }

// Failures is the count of consecutive failures recorded.
func (b *Backoff) Failures() int { return b.failures }

// Delay is the wait before the next start: zero before any failure.
func (b *Backoff) Delay() time.Duration {
	if b.failures == 0 {
		return 0
	}
	d := b.Base
	for i := 1; i < b.failures; i++ {
		if d > math.MaxInt64/2 {
			d = math.MaxInt64
			break
		}
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		return b.Max
	}
	return d
}
