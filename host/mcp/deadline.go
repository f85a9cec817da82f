package mcp

import (
	"net/http"
	"time"
)

// DefaultWriteTimeout is Options.WriteTimeout's default.
const DefaultWriteTimeout = 30 * time.Second

// MaxWriteTimeout bounds Options.WriteTimeout.
const MaxWriteTimeout = 10 * time.Minute

func (o Options) writeTimeout() time.Duration {
	if o.WriteTimeout <= 0 {
		return DefaultWriteTimeout
	}
	return min(o.WriteTimeout, MaxWriteTimeout)
}

// writeDeadline bounds each write of a response of next to d: a client
// that stops reading a stream (SSE) fills the connection's buffers, and
// the next write, instead of blocking for as long as the client keeps
// the connection open, fails at d. The server then cancels the request
// (the SDK's stream ends), drops the connection, and the goroutine that
// wrote is free. Between writes the connection has no deadline: a
// stream may stay idle for as long as its session lives.
func writeDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}, r)
	})
}

// deadlineWriter is a ResponseWriter whose writes and flushes each have
// a deadline. Unwrap gives http.ResponseController the writer beneath.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

// arm sets the deadline for one write and returns what clears it (so
// that a kept-alive connection's next request does not inherit it).
func (w *deadlineWriter) arm() func() {
	if w.rc.SetWriteDeadline(time.Now().Add(w.d)) != nil {
		return func() {} // not supported by the writer beneath: nothing to clear
	}
	return func() { _ = w.rc.SetWriteDeadline(time.Time{}) }
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	defer w.arm()()
	return w.ResponseWriter.Write(b)
}

// FlushError flushes within the deadline (http.ResponseController.Flush
// calls it).
func (w *deadlineWriter) FlushError() error {
	defer w.arm()()
	return w.rc.Flush()
}

// Flush is http.Flusher's, for callers that assert it.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
