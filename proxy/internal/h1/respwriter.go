package h1

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The response side of the client loop (conn.go): the ResponseWriter the
// handler writes to, and the request-body wrappers it reads through.

// reqBody is the request body the handler sees. Its Close does not read
// the rest of the body (http.ReadRequest's body would, however long it
// is); serveRequest decides whether to drain it or close the connection.
type reqBody struct {
	rc     io.ReadCloser
	closed bool
	// onEOF, when set, runs once, on the goroutine that read the end.
	onEOF func()
}

func (b *reqBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.rc.Read(p)
	if err == io.EOF && b.onEOF != nil {
		f := b.onEOF
		b.onEOF = nil
		f()
	}
	if err != nil && err != io.EOF {
		err = &RequestBodyError{err: err}
	}
	return n, err
}

// RequestBodyError is a failure to read the client's request body: a
// malformed chunk, a body cut short. It is the client's fault (400), where
// the same failure on the upstream's side is a 502.
type RequestBodyError struct{ err error }

func (e *RequestBodyError) Error() string { return "reading the request body: " + e.err.Error() }
func (e *RequestBodyError) Unwrap() error { return e.err }

func (b *reqBody) Close() error { b.closed = true; return nil }

// expectContinue sends "100 Continue" when the body is first read.
type expectContinue struct {
	rc      io.ReadCloser
	w       *respWriter
	started bool
}

func (e *expectContinue) Read(p []byte) (int, error) {
	if !e.started {
		e.started = true
		if !e.w.wrote {
			_, _ = e.w.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if err := e.w.c.bw.Flush(); err != nil {
				return 0, err
			}
		}
	}
	return e.rc.Read(p)
}

func (e *expectContinue) Close() error { return e.rc.Close() }

// respWriter is the http.ResponseWriter for one request at a time.
type respWriter struct {
	c          *Conn
	req        *http.Request
	header     http.Header
	wrote      bool
	chunked    bool
	noBody     bool
	clen       int64 // declared Content-Length, -1 when none
	written    int64
	closeAfter bool
	hijacked   bool // a CONNECT tunnel took the connection over
	trailers   []string
	err        error
	scratch    []byte
}

var (
	_ http.ResponseWriter = (*respWriter)(nil)
	_ http.Flusher        = (*respWriter)(nil)
)

func (w *respWriter) reset(req *http.Request) {
	clear(w.header)
	w.req = req
	w.wrote, w.chunked, w.noBody, w.hijacked = false, false, false, false
	w.clen, w.written, w.trailers, w.err = -1, 0, w.trailers[:0], nil
	w.closeAfter = req.Close || req.ProtoMinor == 0
}

func (w *respWriter) Header() http.Header { return w.header }

func (w *respWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	if code < 200 || code > 999 {
		// Interim responses are never forwarded (ClientConn.RoundTrip
		// consumes them); out-of-range codes are a handler bug.
		if code < 100 || code > 999 {
			code = http.StatusInternalServerError
		} else {
			return
		}
	}
	w.wrote = true
	h := w.header
	w.noBody = w.req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	w.clen = -1
	if v := h.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && len(h["Content-Length"]) == 1 {
			w.clen = n
		} else {
			delete(h, "Content-Length")
		}
	}
	if code == http.StatusNoContent {
		delete(h, "Content-Length")
		w.clen = -1
	}
	delete(h, "Transfer-Encoding")
	if !w.noBody && w.clen < 0 {
		if w.req.ProtoAtLeast(1, 1) {
			w.chunked = true
		} else {
			w.closeAfter = true
		}
	}
	w.trailers = w.trailers[:0]
	if w.chunked {
		for _, v := range h["Trailer"] {
			for _, name := range strings.Split(v, ",") {
				if name = strings.TrimSpace(name); name != "" {
					w.trailers = append(w.trailers, http.CanonicalHeaderKey(name))
				}
			}
		}
	} else {
		delete(h, "Trailer")
	}
	if !w.closeAfter && w.c.cs.shutting.Load() {
		w.closeAfter = true
	}
	if !w.closeAfter {
		for _, v := range h["Connection"] {
			if httpguts.HeaderValuesContainsToken([]string{v}, "close") {
				w.closeAfter = true
			}
		}
	}
	delete(h, "Connection")

	b := w.scratch[:0]
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	b = append(b, "\r\n"...)
	// Names come from the upstream's parsed response or the proxy itself.
	// http.ReadResponse keeps a name with a space before its colon
	// ("Transfer-Encoding : chunked") as it is; such a name is dropped,
	// as net/http's server drops every invalid one, so that no client
	// reads it as a framing header beside the proxy's own.
	for k, vv := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			b = AppendHeader(b, k, v)
		}
	}
	if w.chunked {
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	if w.closeAfter {
		b = append(b, "Connection: close\r\n"...)
	}
	if _, ok := h["Date"]; !ok {
		b = append(b, "Date: "...)
		b = time.Now().UTC().AppendFormat(b, http.TimeFormat)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	w.scratch = b
	w.write(b)
}

// AppendHeader writes one header line; CR, LF and NUL in a value become
// spaces, as net/http does, so no value can split the head.
func AppendHeader(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = appendHeaderValue(b, v)
	return append(b, "\r\n"...)
}

// SplitsHead reports the bytes that would end a header line or a head
// if written in a value: CR, LF and NUL. A byte test, not
// strings.ContainsAny, which builds its set on every call: this runs on
// every injected and written header.
func SplitsHead(c byte) bool { return c == '\r' || c == '\n' || c == 0 }

func appendHeaderValue(b []byte, v string) []byte {
	start := 0
	for i := 0; i < len(v); i++ {
		if SplitsHead(v[i]) {
			b = append(append(b, v[start:i]...), ' ')
			start = i + 1
		}
	}
	return append(b, v[start:]...)
}

func (w *respWriter) write(p []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.c.bw.Write(p); err != nil {
		w.err = err
	}
}

func (w *respWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.noBody {
		return 0, http.ErrBodyNotAllowed
	}
	if len(p) == 0 {
		return 0, nil
	}
	if w.clen >= 0 && w.written+int64(len(p)) > w.clen {
		w.closeAfter = true
		return 0, http.ErrContentLength
	}
	if w.chunked {
		b := strconv.AppendInt(w.scratch[:0], int64(len(p)), 16)
		b = append(b, "\r\n"...)
		w.scratch = b
		w.write(b)
		w.write(p)
		w.write([]byte("\r\n"))
	} else {
		w.write(p)
	}
	if w.err != nil {
		return 0, w.err
	}
	w.written += int64(len(p))
	return len(p), nil
}

// Flush sends the head and what is buffered to the client.
func (w *respWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.err == nil {
		w.err = w.c.bw.Flush()
	}
}

// finish ends the response after the handler returned.
func (w *respWriter) finish() {
	if !w.wrote {
		if _, ok := w.header["Content-Length"]; !ok && w.req.Method != http.MethodHead {
			w.header.Set("Content-Length", "0")
		}
		w.WriteHeader(http.StatusOK)
	}
	if w.chunked {
		b := append(w.scratch[:0], "0\r\n"...)
		for k, vv := range w.header {
			name, prefixed := strings.CutPrefix(k, http.TrailerPrefix)
			if !prefixed && !containsString(w.trailers, k) {
				continue
			}
			if !httpguts.ValidHeaderFieldName(name) {
				continue
			}
			for _, v := range vv {
				b = AppendHeader(b, name, v)
			}
		}
		b = append(b, "\r\n"...)
		w.scratch = b
		w.write(b)
	}
	if w.clen >= 0 && !w.noBody && w.written != w.clen {
		// The client counted on more bytes than came: the framing is
		// broken, so the connection cannot carry another response.
		w.closeAfter = true
	}
	if w.err == nil {
		w.err = w.c.bw.Flush()
	}
	if w.err != nil {
		w.c.cs.Log.Debug("proxy: writing a response failed", slog.String("error", w.err.Error()))
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
