package auditlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// stuckOutput is an audit output that blocks each write until released:
// a disk slower than the proxy, or stalled.
type stuckOutput struct {
	entered chan struct{} // one value per write that has started
	release chan struct{} // one value lets one write finish
	mu      sync.Mutex
	buf     bytes.Buffer
}

func newStuckOutput() *stuckOutput {
	return &stuckOutput{entered: make(chan struct{}, 100), release: make(chan struct{}, 100)}
}

func (s *stuckOutput) Write(p []byte) (int, error) {
	s.entered <- struct{}{}
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *stuckOutput) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(s.buf.String(), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func line(n string) []byte { return []byte(`{"n":"` + n + `"}` + "\n") }

// eventually waits (without a deadline of its own: the test's timeout
// bounds it) until cond holds.
func eventually(cond func() bool) {
	for !cond() {
		time.Sleep(time.Millisecond)
	}
}

func TestWriterWritesEveryLineInOrder(t *testing.T) {
	var out testenv.SyncBuffer
	w := New(&out, Options{})
	var want strings.Builder
	for i := range 1000 {
		l := line(strings.Repeat("x", i%7))
		w.WriteLine(l)
		want.Write(l)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Fatal("the output is not every line in order")
	}
	if w.Dropped() != 0 || w.Saturated() {
		t.Fatalf("dropped %d, saturated %v", w.Dropped(), w.Saturated())
	}
}

// A slow output slows the writer's callers: a line that finds the queue
// full waits for room (counted) and is written, not dropped.
func TestWriterWaitsForASlowOutput(t *testing.T) {
	out := newStuckOutput()
	reg := prometheus.NewRegistry()
	w := New(out, Options{MaxQueued: 15, MaxWait: time.Hour, Registerer: reg})
	w.WriteLine(line("1"))
	<-out.entered // the writer holds line 1 and is stuck in the output
	w.WriteLine(line("2"))
	if q := queuedBytes(t, reg); q != float64(len(line("2"))) {
		t.Fatalf("airlock_audit_queued_bytes = %v, want %d", q, len(line("2")))
	}
	done := make(chan struct{})
	go func() { w.WriteLine(line("3")); close(done) }()
	eventually(func() bool { return testutil.ToFloat64(w.metrics.waits) == 1 })
	select {
	case <-done:
		t.Fatal("line 3 was queued beyond the bound")
	default:
	}
	out.release <- struct{}{} // line 1 written: the queue (line 2) goes to the output
	<-done
	out.release <- struct{}{}
	out.release <- struct{}{}
	_ = w.Close()
	var got []string
	for _, m := range out.lines(t) {
		got = append(got, m["n"].(string))
	}
	if strings.Join(got, ",") != "1,2,3" {
		t.Fatalf("lines %v, want 1,2,3", got)
	}
	if w.Dropped() != 0 || testutil.ToFloat64(w.metrics.dropped) != 0 {
		t.Fatalf("dropped %d", w.Dropped())
	}
}

// An output stalled past the wait bound loses lines, loudly: counted,
// logged once, Saturated until the gap is recorded, and a gap line with
// the count where the lines are missing.
func TestWriterDropsLoudlyWhenTheOutputStalls(t *testing.T) {
	out := newStuckOutput()
	var log testenv.SyncBuffer
	w := New(out, Options{MaxQueued: 15, MaxWait: time.Nanosecond, Log: slog.New(slog.NewJSONHandler(&log, nil)),
		Registerer: prometheus.NewRegistry()})
	w.WriteLine(line("1"))
	<-out.entered
	w.WriteLine(line("2"))
	w.WriteLine(line("3")) // the queue is full and the output stuck: dropped
	w.WriteLine(line("4"))
	if w.Dropped() != 2 || testutil.ToFloat64(w.metrics.dropped) != 2 {
		t.Fatalf("dropped %d, want 2", w.Dropped())
	}
	if !w.Saturated() {
		t.Fatal("not saturated while lines are being dropped")
	}
	if n := strings.Count(log.String(), `"code":"audit_stalled"`); n != 1 {
		t.Fatalf("%d error lines for one gap, want 1: %s", n, log.String())
	}
	out.release <- struct{}{}
	<-out.entered // line 2 and the gap line
	out.release <- struct{}{}
	eventually(func() bool { return !w.Saturated() })
	w.WriteLine(line("5"))
	out.release <- struct{}{}
	_ = w.Close()
	lines := out.lines(t)
	var got []string
	for _, m := range lines {
		if m["msg"] == "audit_gap" {
			got = append(got, "gap:"+jsonNum(m["dropped"]))
			if m["log"] != "audit" || m["level"] != "ERROR" {
				t.Fatalf("gap line %v", m)
			}
			continue
		}
		got = append(got, m["n"].(string))
	}
	if strings.Join(got, ",") != "1,2,gap:2,5" {
		t.Fatalf("lines %v, want 1,2,gap:2,5", got)
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

type failingOutput struct{}

func (failingOutput) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A failed write loses its lines: counted, and saturated.
func TestWriterCountsFailedWrites(t *testing.T) {
	w := New(failingOutput{}, Options{})
	w.WriteLine(append(line("1"), line("2")...))
	eventually(func() bool { return w.Dropped() == 2 })
	if !w.Saturated() {
		t.Fatal("not saturated after a failed write")
	}
	_ = w.Close()
}

func TestWriterDropsAfterClose(t *testing.T) {
	var out testenv.SyncBuffer
	w := New(&out, Options{})
	_ = w.Close()
	w.WriteLine(line("late"))
	if w.Dropped() != 1 || out.String() != "" {
		t.Fatalf("dropped %d, output %q", w.Dropped(), out.String())
	}
}

func queuedBytes(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "airlock_audit_queued_bytes" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no airlock_audit_queued_bytes")
	return 0
}

// A stalled output does not hold a shutdown forever: Close gives up after
// CloseWait, counts the lines still queued as dropped and logs them; the
// writer ends once the output's Write returns.
func TestWriterCloseGivesUpOnAStalledOutput(t *testing.T) {
	out := newStuckOutput()
	var logs testenv.SyncBuffer
	w := New(out, Options{CloseWait: 20 * time.Millisecond, Linger: -1, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	w.WriteLine(line("1"))
	<-out.entered // line 1 is in the stalled output's hands
	w.WriteLine(line("2"))
	w.WriteLine(line("3"))
	if err := w.Close(); !errors.Is(err, ErrStalled) {
		t.Fatalf("Close on a stalled output: %v, want ErrStalled", err)
	}
	if w.Dropped() != 2 || !w.Saturated() {
		t.Fatalf("dropped %d saturated %v, want the 2 queued lines counted", w.Dropped(), w.Saturated())
	}
	if !strings.Contains(logs.String(), `"code":"audit_stalled"`) || !strings.Contains(logs.String(), `"lines":2`) {
		t.Fatalf("no log line for the lost lines: %s", logs.String())
	}
	out.release <- struct{}{} // the output recovers: the writer ends
	<-w.done
	if err := w.Close(); err != nil {
		t.Fatalf("a second Close once the writer ended: %v", err)
	}
}

// fullDisk is an audit output on a disk with room bytes left (unlimited
// when negative): a write past the room writes what fits, as a real full
// disk does (part of a line), and fails.
type fullDisk struct {
	mu   sync.Mutex
	room int
	buf  bytes.Buffer
}

func (d *fullDisk) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.room >= 0 && len(p) > d.room {
		n, _ := d.buf.Write(p[:d.room])
		d.room -= n
		return n, syscall.ENOSPC
	}
	if d.room >= 0 {
		d.room -= len(p)
	}
	return d.buf.Write(p)
}

func (d *fullDisk) setRoom(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.room = n
}

// A disk that fills in the middle of a batch keeps the lines before the
// cut and part of the next: only the lines not written whole are counted
// lost, and the part of a line is ended before anything follows it, so
// no later line is glued to it.
func TestWriterOnAFullDiskLosesOnlyWhatItDidNotWrite(t *testing.T) {
	out := &fullDisk{room: len(line("1")) + 3}
	w := New(out, Options{})
	w.WriteLine(append(append(line("1"), line("2")...), line("3")...))
	eventually(func() bool { return w.Dropped() > 0 })
	if got := w.Dropped(); got != 2 {
		t.Fatalf("dropped %d, want 2 (line 1 was written whole)", got)
	}
	out.setRoom(-1) // space comes back
	w.WriteLine(line("4"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	text := out.buf.String()
	out.mu.Unlock()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var got []string
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			if i == 1 && l == string(line("2")[:3]) {
				got = append(got, "part")
				continue
			}
			t.Fatalf("line %d %q is not JSON: %v\n%s", i+1, l, err, text)
		}
		if m["msg"] == "audit_gap" {
			got = append(got, "gap:"+jsonNum(m["dropped"]))
			continue
		}
		got = append(got, m["n"].(string))
	}
	if strings.Join(got, ",") != "1,part,4,gap:2" {
		t.Fatalf("lines %v, want 1,part,4,gap:2\n%s", got, text)
	}
}
