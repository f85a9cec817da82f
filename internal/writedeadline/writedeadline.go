// Package writedeadline bounds each write of an HTTP response, for
// handlers that stream (MCP's SSE, the control API's NDJSON).
//
// A client that asks for a stream and stops reading fills the
// connection's buffers; without a deadline the next write blocks for as
// long as the client keeps the connection open, and with it whatever
// produces the stream (a plugin's invocation). With Handler, that write
// fails at the deadline instead: net/http then cancels the request's
// context and drops the connection, and the goroutine that wrote is free.
// A large write is bounded a Piece at a time, so a client that reads
// steadily, if slowly, keeps a long answer.
// Between writes the connection has no deadline, so a stream may stay
// idle for as long as its producer lets it. A request's body is bounded
// at the same least rate, since the server has no read timeout once the
// headers are in.
package writedeadline

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Default is the write timeout of a zero setting; Max bounds a setting.
// Piece is the most bytes one deadline covers: a larger write is made
// piece by piece, each with its own deadline.
const (
	Default = 30 * time.Second
	Max     = 10 * time.Minute
	Piece   = 64 << 10
)

// Bound is d as a write timeout: Default when d is not positive, at
// most Max.
func Bound(d time.Duration) time.Duration {
	if d <= 0 {
		return Default
	}
	return min(d, Max)
}

// Handler bounds each write and flush of next's responses to d, and
// what net/http writes after next returns (a small answer's buffered
// bytes, a chunked answer's end) too: a client that sends requests and
// never reads the answers cannot hold the connection's goroutine in that
// last write either. It bounds the request's body the same way: each
// Piece of it must arrive within d (the server has no read timeout once
// the headers are in), so a client that sends a body slowly, or stops,
// has its request fail instead of holding a goroutine; that bound holds
// for what net/http reads of a body next left unread, too.
//
// A Handler inside another (the control API's, behind the listener's)
// uses the outer one's writer and body with its own d, so that SetLimit
// on the writer it gives next holds.
func Handler(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dw, ok := w.(*writer); ok {
			prev := dw.d
			dw.d = d
			if b, ok := r.Body.(*body); ok {
				b.d = d
			}
			next.ServeHTTP(dw, r)
			dw.d = prev
			return
		}
		rc := http.NewResponseController(w)
		// No deadline left from before this request (net/http clears
		// the one set below once the answer is written; a wrapper may
		// have set another): an interim 100 Continue is written while
		// the handler reads the body.
		_ = rc.SetWriteDeadline(time.Time{})
		var b *body
		if r.Body != nil && r.Body != http.NoBody {
			b = &body{ReadCloser: r.Body, rc: rc, d: d, start: time.Now(), length: r.ContentLength}
			b.arm()
			r.Body = b
		}
		dw := &writer{ResponseWriter: w, rc: rc, d: d, body: b}
		next.ServeHTTP(dw, r)
		if b != nil && !b.done.Load() {
			// net/http reads what is left of the body (up to 256 KiB)
			// to keep the connection.
			_ = rc.SetReadDeadline(dw.deadline())
		}
		_ = rc.SetWriteDeadline(dw.deadline())
	})
}

// body is a request's body whose reads are bounded: the n-th Piece
// must have arrived by d×n from the start of the request.
type body struct {
	io.ReadCloser
	rc    *http.ResponseController
	d     time.Duration
	start time.Time
	n     int64
	// length is the body's declared length (-1: unknown).
	length int64
	// done: the body ended (its deadline is cleared: net/http's read
	// that watches for the client hanging up follows it) or failed.
	done atomic.Bool
}

func (b *body) arm() {
	_ = b.rc.SetReadDeadline(b.start.Add(b.d * time.Duration(1+b.n/Piece)))
}

func (b *body) Read(p []byte) (int, error) {
	if b.done.Load() {
		return b.ReadCloser.Read(p)
	}
	b.arm()
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF, err == nil && b.length >= 0 && b.n >= b.length:
		// All of it came (a decoder that stops at the end of its value
		// need not read the EOF): what net/http reads next, after a
		// call of any length, is not this body's.
		b.done.Store(true)
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		// The deadline stays: a later read of this body fails too.
		b.done.Store(true)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w: %w", ErrBodyTimeout, err)
		}
	}
	return n, err
}

// ErrBodyTimeout is the error of a read of a request's body that did not
// arrive in time (a Piece per d), for handlers to answer so.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")

// Wrap is w with each write and flush bounded to d (Handler, without its
// bound on what net/http writes after the handler).
func Wrap(w http.ResponseWriter, d time.Duration) http.ResponseWriter {
	return &writer{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
}

// writer is a ResponseWriter whose writes and flushes each have a
// deadline. Unwrap gives http.ResponseController the writer beneath.
type writer struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
	// by, when set, is a deadline no write goes past however steadily
	// the client reads (SetLimit).
	by time.Time
	// body, when set and not done, is read by net/http before the
	// answer's first bytes (what the handler left of it): its deadline
	// is each write's, not one long past when a call answers late.
	body *body
}

// SetLimit bounds the rest of the answer w writes, as a whole, to end
// by t: a client that reads just fast enough to keep each Piece within
// the timeout does not hold a large answer (and the memory behind it)
// past t either. It reports false when w is not a Handler's writer.
func SetLimit(w http.ResponseWriter, t time.Time) bool {
	dw, ok := w.(*writer)
	if ok {
		dw.by = t
	}
	return ok
}

// deadline is the deadline of a write starting now.
func (w *writer) deadline() time.Time {
	at := time.Now().Add(w.d)
	if !w.by.IsZero() && w.by.Before(at) {
		at = w.by
	}
	return at
}

// arm sets the deadline for one write and returns what clears it (so
// that a kept-alive connection's next request does not inherit it).
func (w *writer) arm() func() {
	at := w.deadline()
	if w.body != nil && !w.body.done.Load() {
		_ = w.rc.SetReadDeadline(at)
	}
	if w.rc.SetWriteDeadline(at) != nil {
		return func() {} // not supported by the writer beneath: nothing to clear
	}
	return func() { _ = w.rc.SetWriteDeadline(time.Time{}) }
}

// Write writes b a Piece at a time, each within the deadline: a caller
// that reads steadily is not cut off because a large answer (an
// outcome of many megabytes) took longer than d as a whole, while one
// that stops reading fails the piece that finds the buffers full. The
// least rate that keeps a stream is Piece per d.
func (w *writer) Write(b []byte) (int, error) {
	n := 0
	for {
		p := b[n:min(len(b), n+Piece)]
		m, err := w.write(p)
		n += m
		if err != nil || n == len(b) {
			return n, err
		}
	}
}

func (w *writer) write(p []byte) (int, error) {
	defer w.arm()()
	return w.ResponseWriter.Write(p)
}

// FlushError flushes within the deadline (http.ResponseController.Flush
// calls it).
func (w *writer) FlushError() error {
	defer w.arm()()
	return w.rc.Flush()
}

// Flush is http.Flusher's, for callers that assert it.
func (w *writer) Flush() { _ = w.FlushError() }

func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
