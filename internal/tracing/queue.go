package tracing

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// maxBatch is the most spans one export carries.
const maxBatch = 512

// queue is the span processor: ended spans go to a bounded channel
// without blocking (a full channel drops the span and counts it), and one
// goroutine exports them in batches, each export bounded by a timeout.
// It replaces the SDK's BatchSpanProcessor, which drops silently.
type queue struct {
	exp     sdktrace.SpanExporter
	ch      chan sdktrace.ReadOnlySpan
	flush   chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	delay   time.Duration // how long a batch waits to fill
	timeout time.Duration // one export's limit
	log     *slog.Logger
	// ctx ends exports in flight when Shutdown's own context ends.
	ctx    context.Context
	cancel context.CancelFunc

	stopped  atomic.Bool
	stopOnce sync.Once
	failing  atomic.Bool // the last export failed (logged once per outage)

	exported, droppedFull, droppedFailed, failures atomic.Uint64
}

var _ sdktrace.SpanProcessor = (*queue)(nil)

func newQueue(exp sdktrace.SpanExporter, size int, delay, timeout time.Duration, log *slog.Logger) *queue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &queue{exp: exp, ch: make(chan sdktrace.ReadOnlySpan, size), flush: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}), delay: delay, timeout: timeout, log: log,
		ctx: ctx, cancel: cancel}
	go q.run()
	return q
}

// OnStart does nothing: spans are handed over when they end.
func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s, or drops it (counted) when the queue is full. It never
// blocks.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() || q.stopped.Load() {
		return
	}
	select {
	case q.ch <- s:
	default:
		q.droppedFull.Add(1)
	}
}

func (q *queue) run() {
	defer close(q.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, maxBatch)
	timer := time.NewTimer(q.delay)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case s := <-q.ch:
			batch = append(batch, s)
			if len(batch) == 1 {
				timer.Reset(q.delay)
			}
			if len(batch) == maxBatch {
				timer.Stop()
				batch = q.export(batch)
			}
		case <-timer.C:
			batch = q.export(batch)
		case ack := <-q.flush:
			timer.Stop()
			batch = q.drain(batch)
			close(ack)
		case <-q.stop:
			q.drain(batch)
			return
		}
	}
}

// drain exports batch and everything queued.
func (q *queue) drain(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for {
		select {
		case s := <-q.ch:
			batch = append(batch, s)
			if len(batch) < maxBatch {
				continue
			}
		default:
		}
		if len(batch) == 0 {
			return batch
		}
		batch = q.export(batch)
	}
}

// export sends batch and returns it emptied. A failure drops the batch
// (counted): spans are never retried past the exporter's own retries
// within the timeout.
func (q *queue) export(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(q.ctx, q.timeout)
	err := q.exp.ExportSpans(ctx, batch)
	cancel()
	n := uint64(len(batch))
	if err != nil {
		q.failures.Add(1)
		q.droppedFailed.Add(n)
		if !q.failing.Swap(true) {
			q.log.Warn("tracing: exporting spans failed; spans are dropped until the receiver answers (airlock_trace_spans_dropped_total)",
				"error", err.Error())
		}
	} else {
		q.exported.Add(n)
		if q.failing.Swap(false) {
			q.log.Info("tracing: exporting spans works again")
		}
	}
	clear(batch)
	return batch[:0]
}

// ForceFlush exports every queued span before it returns, or returns
// ctx's error.
func (q *queue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops taking spans, exports those queued, and shuts the
// exporter down. When ctx ends first, the export in flight is abandoned
// and Shutdown still returns only once the goroutine has ended.
func (q *queue) Shutdown(ctx context.Context) error {
	var err error
	q.stopOnce.Do(func() {
		q.stopped.Store(true)
		close(q.stop)
		select {
		case <-q.done:
		case <-ctx.Done():
			err = ctx.Err()
			q.cancel()
			<-q.done
		}
		q.cancel()
		if xerr := q.exp.Shutdown(ctx); xerr != nil && !errors.Is(xerr, context.Canceled) {
			err = errors.Join(err, xerr)
		}
	})
	return err
}
