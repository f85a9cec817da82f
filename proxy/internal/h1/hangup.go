package h1

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// A client that hangs up while its request waits on the upstream ends
// the upstream request at once, instead of at response_header_timeout:
// an Executa sampling call whose invoke ended, a plugin killed mid-call.
// The proxy reads requests on one goroutine with no background read per
// request (conn.go), so a hangup is looked for only once a request has
// been in flight for hangupAfter: one read of one byte from the client,
// started when the request body has been read to its end and nothing of
// a next request is buffered. EOF or an error cancels the request's
// context with ErrClientGone (the upstream request ends; the audit line
// says client_closed_request); a byte that arrives is the start of a
// pipelined request and is kept for the next read.

// hangupAfter is how long a request is in flight before the client's
// connection is watched.
const hangupAfter = 100 * time.Millisecond

// ErrClientGone is the cause of a request context cancelled because its
// client hung up.
var ErrClientGone = errors.New("the client closed the connection")

// aLongTimeAgo is a read deadline that interrupts a pending read.
var aLongTimeAgo = time.Unix(1, 0)

// hangupWatch watches one request's client connection.
type hangupWatch struct {
	c      *Conn
	cancel context.CancelCauseFunc
	timer  *time.Timer

	mu        sync.Mutex
	ready     bool // the body was read to its end (or there is none)
	pipelined bool // bytes of a next request were already buffered
	stopped   bool
	reading   bool
	done      chan struct{}
	buf       [1]byte
	got       bool // buf holds a byte of the next request
	gone      bool
	// reuse: the request has no body, so nothing but this request's
	// own goroutine can touch the watch once stop returns: the next
	// request may take it, timer included, if the timer never fired
	// (Conn.spareWatch; a per-request watch and timer were two
	// allocations and a timer's creation on every request).
	reuse bool
}

// watchHangup gives req a context of its own, a child of the
// connection's, that a hangup cancels.
// Call stop when the handler has returned. CONNECT is not watched: its
// handler takes the connection.
func (c *Conn) watchHangup(req *http.Request, body *reqBody) (*http.Request, *hangupWatch) {
	if req.Method == http.MethodConnect {
		return req.WithContext(c.ctx), nil
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	w := c.spareWatch
	c.spareWatch = nil
	if w != nil {
		*w = hangupWatch{c: c, cancel: cancel, timer: w.timer, reuse: body == nil}
	} else {
		w = &hangupWatch{c: c, cancel: cancel, reuse: body == nil}
	}
	if body == nil {
		w.ready, w.pipelined = true, c.br.Buffered() > 0
	} else {
		// Runs on whichever goroutine reads the body to its end (the
		// upstream transport's), the only reader of c.br at that time.
		body.onEOF = func() {
			w.mu.Lock()
			w.ready, w.pipelined = true, c.br.Buffered() > 0
			w.mu.Unlock()
		}
	}
	// Set under mu: start reads it there (to wait again).
	w.mu.Lock()
	if w.timer == nil {
		w.timer = time.AfterFunc(hangupAfter, w.start)
	} else {
		w.timer.Reset(hangupAfter)
	}
	w.mu.Unlock()
	return req.WithContext(ctx), w
}

// start begins the one-byte read, or waits again for the body's end.
func (w *hangupWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.stopped || w.pipelined:
		return
	case !w.ready:
		w.timer.Reset(hangupAfter)
		return
	}
	// The deadline the head was read under (read_header_timeout or
	// idle_timeout) may still be set: a request without a body clears
	// none. The read waits on the client, not on a clock: a timeout
	// would be taken for a hangup and cut a long request off. Cleared
	// here, under mu, so that stop's interrupting deadline comes after.
	_ = w.c.conn.SetReadDeadline(time.Time{})
	w.reading, w.done = true, make(chan struct{})
	go w.read()
}

func (w *hangupWatch) read() {
	defer close(w.done)
	n, err := w.c.conn.Read(w.buf[:])
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case n > 0:
		w.got = true
	case err != nil && !w.stopped:
		w.gone = true
		w.cancel(ErrClientGone)
	}
}

// stop ends the watch once the handler returned: a pending read is
// interrupted and a byte it got is put back in front of the next read.
// It reports whether the client hung up (the connection is then done).
func (w *hangupWatch) stop() (gone bool) {
	if w == nil {
		return false
	}
	w.mu.Lock()
	w.stopped = true
	unfired := w.timer.Stop()
	reading := w.reading
	w.mu.Unlock()
	if reading {
		_ = w.c.conn.SetReadDeadline(aLongTimeAgo)
		<-w.done
		_ = w.c.conn.SetReadDeadline(time.Time{})
	}
	w.cancel(nil)
	if w.got {
		w.c.lr.unread = append(w.c.lr.unread, w.buf[0])
	}
	if w.reuse && unfired {
		w.c.spareWatch = w
	}
	return w.gone
}

// pause stops the watch without ending the request's context: the
// connection is changing hands. A byte the watch read is put back.
func (w *hangupWatch) pause() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	reading := w.reading
	w.reading = false
	w.mu.Unlock()
	if reading {
		_ = w.c.conn.SetReadDeadline(aLongTimeAgo)
		<-w.done
		_ = w.c.conn.SetReadDeadline(time.Time{})
	}
	if w.got {
		w.c.lr.unread = append(w.c.lr.unread, w.buf[0])
		w.got = false
	}
}
