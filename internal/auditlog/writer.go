package auditlog

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Options.
const (
	// DefaultMaxQueued bounds the bytes of lines waiting for the output
	// (about 10,000 lines); one batch more may be in the output's hands.
	DefaultMaxQueued = 4 << 20
	// DefaultLinger is how long the writer lets lines gather after the
	// first one before it writes: under load one write call carries many
	// lines, and a line reaches the output at most this much later.
	DefaultLinger = 2 * time.Millisecond
	// DefaultMaxWait is how long a line waits for room in a full queue
	// before it is dropped (and counted, logged and marked).
	DefaultMaxWait = 5 * time.Second
)

// Options tune a Writer; the zero value takes the defaults.
type Options struct {
	MaxQueued int
	MaxWait   time.Duration
	// CloseWait bounds how long Close waits for a stalled output
	// (DefaultMaxWait when zero).
	CloseWait time.Duration
	// Linger: DefaultLinger when zero; negative writes at once.
	Linger time.Duration
	// Log receives one error line per gap (lines dropped) and per failed
	// write; discarded when nil.
	Log *slog.Logger
	// Registerer receives the Writer's metrics (none when nil).
	Registerer prometheus.Registerer
	// Now stamps gap lines (time.Now when nil).
	Now func() time.Time
}

// Writer queues audit lines and writes them to its output in batches.
type Writer struct {
	out     io.Writer
	opts    Options
	metrics metrics

	mu      sync.Mutex
	queue   []byte        // complete lines waiting for the output
	spare   []byte        // the last batch's buffer, for reuse
	room    chan struct{} // closed when the writer takes the queue
	dropped int64         // lines dropped since the last gap line
	closed  bool

	wake chan struct{}
	done chan struct{}
	// torn: the last write stopped inside a line (only the writer's
	// goroutine uses it).
	torn         bool
	saturated    atomic.Bool
	droppedTotal atomic.Int64
}

// New starts a Writer on out. The caller closes it (Close) after the last
// WriteLine; out is not closed. Writes to out come from one goroutine,
// one complete batch of lines per call: a logger sharing out must write
// through the same *os.File (whose writes Go serializes) or a lock.
func New(out io.Writer, opts Options) *Writer {
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = DefaultMaxQueued
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.CloseWait <= 0 {
		opts.CloseWait = DefaultMaxWait
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	w := &Writer{out: out, opts: opts, room: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
	w.metrics = newMetrics(opts.Registerer, w)
	go w.run()
	return w
}

// WriteLine queues line (one complete line, newline included); it does
// not keep line. It waits while the queue is full, at most MaxWait, and
// then drops the line (see the package doc).
func (w *Writer) WriteLine(line []byte) {
	w.mu.Lock()
	if w.full(len(line)) {
		w.metrics.waits.Inc()
		timer := time.NewTimer(w.opts.MaxWait)
		defer timer.Stop()
		for w.full(len(line)) {
			room := w.room
			w.mu.Unlock()
			timedOut := false
			select {
			case <-room:
			case <-timer.C:
				timedOut = true
			}
			w.mu.Lock()
			if timedOut && w.full(len(line)) {
				w.drop()
				w.mu.Unlock()
				return
			}
		}
	}
	if w.closed {
		w.drop()
		w.mu.Unlock()
		return
	}
	w.queue = append(w.queue, line...)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// full: line does not fit the queue now. A line longer than the bound
// goes into an empty queue.
func (w *Writer) full(n int) bool {
	return !w.closed && len(w.queue) > 0 && len(w.queue)+n > w.opts.MaxQueued
}

// drop counts a line that will never be written; w.mu is held.
func (w *Writer) drop() {
	if w.dropped == 0 {
		w.opts.Log.Error("audit lines are being dropped: the audit output is stalled; the proxy refuses new requests until it recovers",
			"code", "audit_stalled", "max_wait", w.opts.MaxWait.String())
	}
	w.dropped++
	w.droppedTotal.Add(1)
	w.metrics.dropped.Inc()
	w.saturated.Store(true)
}

// Saturated reports that lines were dropped and the gap is not yet
// recorded in the output: the output is stalled.
func (w *Writer) Saturated() bool { return w.saturated.Load() }

// Dropped is the number of lines dropped so far.
func (w *Writer) Dropped() int64 { return w.droppedTotal.Load() }

// ErrStalled: Close gave up on an output that did not take the last
// lines within CloseWait.
var ErrStalled = errors.New("the audit output is stalled: lines still queued at shutdown are lost")

// Close writes what is queued and stops the writer. Lines written after
// Close are dropped (and counted). An output that is stalled (a hung
// disk or pipe) does not hold a shutdown forever: after CloseWait, Close
// counts the lines still queued as dropped, logs them and returns
// ErrStalled; the goroutine blocked in the output's Write ends when that
// Write returns.
func (w *Writer) Close() error {
	w.mu.Lock()
	first := !w.closed
	w.closed = true
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	timer := time.NewTimer(w.opts.CloseWait)
	defer timer.Stop()
	select {
	case <-w.done:
		return nil
	case <-timer.C:
	}
	w.mu.Lock()
	lost := int64(bytes.Count(w.queue, []byte{'\n'}))
	w.queue = w.queue[:0]
	w.droppedTotal.Add(lost)
	w.metrics.dropped.Add(float64(lost))
	w.saturated.Store(true)
	w.mu.Unlock()
	w.opts.Log.Error("audit lines lost at shutdown: the audit output is stalled", "code", "audit_stalled", "lines", lost, "close_wait", w.opts.CloseWait.String())
	return ErrStalled
}

func (w *Writer) run() {
	defer close(w.done)
	for range w.wake {
		if w.opts.Linger > 0 {
			time.Sleep(w.opts.Linger)
		}
		for {
			w.mu.Lock()
			batch, dropped, closed := w.queue, w.dropped, w.closed
			w.queue, w.spare, w.dropped = w.spare[:0], nil, 0
			room := w.room
			w.room = make(chan struct{})
			w.mu.Unlock()
			close(room)
			if len(batch) == 0 && dropped == 0 {
				w.recycle(batch)
				if closed {
					return
				}
				break
			}
			if dropped > 0 {
				batch = w.appendGap(batch, dropped)
			}
			err := w.write(batch, dropped)
			w.metrics.batches.Inc()
			if err != nil {
				w.recycle(batch)
				if closed {
					return
				}
				break // until the next line: a failing output is not retried in a loop
			}
			w.recycle(batch)
			if dropped > 0 {
				w.mu.Lock()
				if w.dropped == 0 {
					w.saturated.Store(false)
				}
				w.mu.Unlock()
			}
		}
	}
}

// write writes one batch (its last line the gap line when dropped > 0).
// On failure the lines not written whole are counted lost, and so is the
// gap line unless it was written: it goes out, with these, in the next
// batch. A write that stopped inside a line (a disk that filled) leaves
// part of it in the output; that part is ended with a newline before
// anything else is written, so that no later line is glued to it (one
// line that does not parse, not two).
func (w *Writer) write(batch []byte, dropped int64) error {
	var n int
	var err error
	if w.torn {
		if _, err = w.out.Write([]byte{'\n'}); err == nil {
			w.torn = false
		}
	}
	if err == nil {
		n, err = w.out.Write(batch)
		switch {
		case n >= len(batch):
			return nil // all of it is out, whatever else was said
		case err == nil:
			err = io.ErrShortWrite
		}
	}
	if err == nil {
		return nil
	}
	n = max(0, n)
	if n > 0 && batch[n-1] != '\n' {
		w.torn = true
	}
	// The gap line, last in the batch, is not out (n < len(batch)).
	lines := int64(bytes.Count(batch, []byte{'\n'}))
	if dropped > 0 {
		lines--
	}
	lost := lines - int64(bytes.Count(batch[:n], []byte{'\n'}))
	w.opts.Log.Error("audit lines lost: the audit output failed", "code", "audit_write_failed", "lines", lost, "err", err)
	w.mu.Lock()
	w.dropped += dropped + lost
	w.droppedTotal.Add(lost)
	w.metrics.dropped.Add(float64(lost))
	w.saturated.Store(true)
	w.mu.Unlock()
	return err
}

// recycle keeps a batch's buffer for the next one, unless a burst grew it
// far beyond the bound.
func (w *Writer) recycle(b []byte) {
	if cap(b) > 4*w.opts.MaxQueued {
		return
	}
	w.mu.Lock()
	w.spare = b[:0]
	w.mu.Unlock()
}

// appendGap appends the line that marks n missing lines, where they are
// missing from.
func (w *Writer) appendGap(b []byte, n int64) []byte {
	b = append(b, `{"time":"`...)
	b = w.opts.Now().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"ERROR","msg":"audit_gap","log":"audit","dropped":`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, "}\n"...)
}
