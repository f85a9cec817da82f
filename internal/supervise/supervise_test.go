//go:build linux

package supervise

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestBackoffSchedule(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 30 * time.Second, ResetAfter: time.Minute}
	if d := b.Delay(); d != 0 {
		t.Fatalf("delay before any failure = %v", d)
	}
	var got []time.Duration
	for range 7 {
		if !b.Fail() {
			t.Fatal("an unbudgeted backoff ran out")
		}
		got = append(got, b.Delay())
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v s", got, want)
		}
	}
	b.Ran(10 * time.Second)
	if b.Failures() != 7 {
		t.Fatal("a short run reset the schedule")
	}
	b.Ran(time.Minute)
	if b.Failures() != 0 || b.Delay() != 0 {
		t.Fatal("a long run did not reset the schedule")
	}
}

func TestBackoffBudget(t *testing.T) {
	b := Backoff{Base: time.Second, Budget: 3}
	for i := 1; i <= 3; i++ {
		if !b.Fail() || b.Exhausted() {
			t.Fatalf("failure %d exhausted a budget of 3", i)
		}
	}
	if b.Fail() || !b.Exhausted() {
		t.Fatal("a fourth failure did not exhaust a budget of 3")
	}
	if d := (&Backoff{Base: time.Hour, failures: 80}).Delay(); d <= 0 {
		t.Fatalf("uncapped delay overflowed to %v", d)
	}
}

func TestStopEscalates(t *testing.T) {
	// A shell that ignores SIGTERM needs the SIGKILL step.
	cmd := exec.Command("sh", "-c", "trap '' TERM; while :; do sleep 0.05; done")
	Prepare(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var state error
	go func() { state = cmd.Wait(); close(exited) }()
	sent := Stop(cmd, exited, Step{Wait: 50 * time.Millisecond, Signal: syscall.SIGTERM}, Step{Wait: 200 * time.Millisecond, Signal: syscall.SIGKILL})
	if sent != 2 {
		t.Fatalf("signals sent = %d, want 2 (TERM ignored, then KILL)", sent)
	}
	if ee, ok := state.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("exit = %v, want killed by SIGKILL", state)
	}

	// A process that exits on its own gets no signal.
	cmd = exec.Command("true")
	Prepare(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if sent := Stop(cmd, exited, Step{Wait: 10 * time.Second, Signal: syscall.SIGKILL}); sent != 0 {
		t.Fatalf("signals sent to a process that exited = %d", sent)
	}
}
