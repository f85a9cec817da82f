package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/airlock-dev/airlock/internal/serve"
)

// The proxy's HTTP/1.1 server side. It does what net/http's server does
// for a forward proxy's clients, minus the work a proxy does not need: no
// background read per request (its goroutine, read and deadline change
// were a tenth of the CPU at high request rates), no per-request context
// or buffered-writer allocation, no content sniffing. Requests are parsed
// by http.ReadRequest, the parser net/http's server uses, and then held to
// the same checks (HTTP/1.x, one valid Host, valid header names and
// values) plus two of its own against request smuggling: a request with
// both Transfer-Encoding and Content-Length is refused and the connection
// closed (RFC 9112 §6.1), and the raw Host header must agree with an
// absolute-form target (net/http discards it).
//
// Handlers still run as http.Handlers (goproxy's ProxyHttpServer); the
// ResponseWriter below frames responses with Content-Length when the
// handler set it, chunked otherwise (close-delimited for HTTP/1.0), and
// supports Flush and trailers. A client that disconnects while the
// upstream is still answering is noticed when the response is written;
// the upstream wait is bounded by response_header_timeout.

// maxDrainBytes is how much of an unread request body is discarded to keep
// a connection open (net/http's maxPostHandlerReadBytes).
const maxDrainBytes = 256 << 10

// connServer accepts clients and tracks their connections for shutdown.
type connServer struct {
	handler           http.Handler
	s                 *Server
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	headerLimit       int64

	shutting atomic.Bool
	mu       sync.Mutex
	conns    map[*clientConn]struct{}
	wg       sync.WaitGroup
}

// serve accepts on l until ctx ends, then closes idle connections, lets
// requests in flight finish for up to serve.ShutdownGrace, and closes the
// rest.
func (cs *connServer) serve(ctx context.Context, l net.Listener) error {
	cs.conns = map[*clientConn]struct{}{}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var err error
	var delay time.Duration
	for {
		var nc net.Conn
		nc, err = l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				err = nil
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporaryAccept(err) {
				// Out of file descriptors and the like: back off as
				// net/http does rather than spin.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				cs.s.log.Warn("proxy: accept failed; retrying", "error", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			break
		}
		delay = 0
		c := newClientConn(cs, nc, base)
		if !cs.track(c) {
			nc.Close()
			continue
		}
		go c.serve()
	}
	l.Close()
	cs.shutdown(ctx.Err() != nil, cancel)
	return err
}

func isTemporaryAccept(err error) bool {
	var se interface{ Temporary() bool }
	return errors.As(err, &se) && se.Temporary()
}

func (cs *connServer) track(c *clientConn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.shutting.Load() {
		return false
	}
	cs.conns[c] = struct{}{}
	cs.wg.Add(1)
	return true
}

// setIdle records that c waits for its next request; it reports false
// when the server is shutting down and c should close instead. shutdown
// sets shutting before it looks at each connection's idle flag, so either
// c sees shutting here or shutdown sees c idle and closes it.
func (c *clientConn) setIdle() bool {
	c.idle.Store(true)
	return !c.cs.shutting.Load()
}

func (cs *connServer) untrack(c *clientConn) {
	cs.mu.Lock()
	delete(cs.conns, c)
	cs.mu.Unlock()
	cs.wg.Done()
}

func (cs *connServer) shutdown(graceful bool, cancel context.CancelFunc) {
	cs.mu.Lock()
	cs.shutting.Store(true)
	for c := range cs.conns {
		if c.idle.Load() {
			c.conn.Close()
		}
	}
	cs.mu.Unlock()
	done := make(chan struct{})
	go func() { cs.wg.Wait(); close(done) }()
	if graceful {
		select {
		case <-done:
			return
		case <-time.After(serve.ShutdownGrace):
		}
	}
	cancel()
	cs.mu.Lock()
	for c := range cs.conns {
		c.conn.Close()
	}
	cs.mu.Unlock()
	<-done
}

// clientConn is one client connection, served on one goroutine.
type clientConn struct {
	cs         *connServer
	conn       net.Conn
	ctx        context.Context
	remote     string
	idle       atomic.Bool // waiting for the next request
	lr         limitedReader
	br         *bufio.Reader
	bw         *bufio.Writer
	w          respWriter
	lastMethod string
	// head collects the bytes read while parsing a request head, for the
	// checks http.ReadRequest does not allow (it drops the Host header).
	head []byte
}

var (
	brPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	bwPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

func newClientConn(cs *connServer, nc net.Conn, ctx context.Context) *clientConn {
	c := &clientConn{cs: cs, conn: nc, ctx: ctx, remote: nc.RemoteAddr().String()}
	c.lr = limitedReader{c: c, r: nc, n: math.MaxInt64}
	c.br = brPool.Get().(*bufio.Reader)
	c.br.Reset(&c.lr)
	c.bw = bwPool.Get().(*bufio.Writer)
	c.bw.Reset(nc)
	c.w.c = c
	c.w.header = http.Header{}
	return c
}

// limitedReader bounds the bytes read from the client while a request
// head is parsed (MaxHeaderBytes plus slack, as net/http) and records them.
type limitedReader struct {
	c       *clientConn
	r       io.Reader
	n       int64
	capture bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.capture {
		l.c.head = append(l.c.head, p[:n]...)
	}
	return n, err
}

var errHeadTooLarge = errors.New("request head too large")

func (c *clientConn) serve() {
	answered := false // a response was sent, so closing must not reset it away
	defer func() {
		if v := recover(); v != nil {
			c.cs.s.log.Error("proxy: panic serving a client connection", "panic", v, "stack", string(debug.Stack()))
		} else if answered {
			c.lingerClose()
		}
		c.conn.Close()
		c.br.Reset(nil)
		brPool.Put(c.br)
		c.bw.Reset(nil)
		bwPool.Put(c.bw)
		c.cs.untrack(c)
	}()
	first := true
	for {
		wait := c.cs.idleTimeout
		if first {
			wait = c.cs.readHeaderTimeout
		}
		if c.br.Buffered() == 0 {
			if !c.setIdle() {
				return
			}
			_ = c.conn.SetReadDeadline(time.Now().Add(wait))
			_, err := c.br.Peek(1)
			c.idle.Store(false)
			if err != nil {
				return
			}
		}
		if c.lastMethod == http.MethodPost {
			c.lastMethod = "" // once per request
			if skipStrayCRLF(c.br) && c.br.Buffered() == 0 {
				continue
			}
		}
		first = false
		req, code, reason := c.readRequest()
		if req == nil {
			if code != "" {
				c.refuse(code, reason)
				answered = true
			}
			return
		}
		c.lastMethod = req.Method
		if !c.serveRequest(req) {
			answered = true
			return
		}
	}
}

// skipStrayCRLF drops up to four buffered CR or LF bytes: some old
// clients send a CRLF after a POST body (RFC 9112 §2.2; net/http's server
// skips it too). It reports whether it dropped any.
func skipStrayCRLF(br *bufio.Reader) bool {
	peek, _ := br.Peek(min(br.Buffered(), 4))
	n := 0
	for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
		n++
	}
	_, _ = br.Discard(n)
	return n > 0
}

// lingerDelay bounds how long a closing connection waits for the client to
// close its side (net/http's rstAvoidanceDelay).
const lingerDelay = 500 * time.Millisecond

// lingerClose half-closes the connection and reads what the client still
// sends until it closes too, or lingerDelay passes. Closing a socket with
// unread data sends a reset, and a reset can make the client's TCP stack
// drop the response it has not read yet (RFC 9112 §9.6). Linux keeps the
// queued response readable; BSD, macOS and Windows stacks may not, which
// is why net/http's server does the same.
func (c *clientConn) lingerClose() {
	cw, ok := c.conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(lingerDelay))
	_, _ = io.Copy(io.Discard, c.conn)
}

// readRequest reads and checks one request head. On failure it returns a
// denial code to answer with, or "" when the client is gone or timed out.
func (c *clientConn) readRequest() (*http.Request, string, string) {
	buffered := peekBuffered(c.br)
	if !headComplete(buffered) {
		// More reads to come: they must end by read_header_timeout.
		// (Usually the whole head came in the first read.)
		_ = c.conn.SetReadDeadline(time.Now().Add(c.cs.readHeaderTimeout))
	}
	c.lr.n = c.cs.headerLimit
	c.head = append(c.head[:0], buffered...)
	c.lr.capture = true
	req, err := http.ReadRequest(c.br)
	tooLarge := c.lr.n <= 0
	c.lr.capture = false
	c.lr.n = math.MaxInt64
	if err != nil {
		var ne net.Error
		switch {
		case tooLarge || errors.Is(err, errHeadTooLarge):
			return nil, CodeHeadersTooLarge, "request head larger than max_header_bytes"
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
			errors.As(err, &ne) && ne.Timeout():
			return nil, "", ""
		case strings.Contains(err.Error(), "unsupported transfer encoding"):
			return nil, CodeBadRequest, "unsupported transfer encoding"
		}
		var oe *net.OpError
		if errors.As(err, &oe) {
			return nil, "", ""
		}
		return nil, CodeBadRequest, "malformed request head"
	}
	if req.Body != http.NoBody {
		// The body is read while the request goes upstream, with no
		// deadline (as net/http without ReadTimeout). Without a body
		// nothing reads until the next request's wait sets its own.
		_ = c.conn.SetReadDeadline(time.Time{})
	}
	if req.ProtoMajor != 1 {
		return nil, CodeBadRequest, "not an HTTP/1.x request"
	}
	hosts, hasCL := scanHead(c.head)
	if cap(c.head) > 16<<10 {
		c.head = nil // a one-off large head is not kept for the connection's life
	}
	switch {
	case len(hosts) > 1:
		return nil, CodeBadRequest, "more than one Host header"
	case len(hosts) == 0 && req.ProtoAtLeast(1, 1) && req.Method != http.MethodConnect:
		return nil, CodeBadRequest, "missing required Host header"
	case len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]):
		return nil, CodeBadRequest, "malformed Host header"
	case hasCL && len(req.TransferEncoding) > 0:
		return nil, CodeBadRequest, "both Transfer-Encoding and Content-Length"
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, CodeBadRequest, "invalid header name"
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, CodeInvalidHeader, "header " + strconv.Quote(k) + " holds a control character"
			}
		}
	}
	if len(hosts) == 1 && req.URL.IsAbs() {
		// parseTarget compares it with the target.
		req.Host = hosts[0]
	}
	req.RemoteAddr = c.remote
	return req.WithContext(c.ctx), "", ""
}

// headComplete reports whether b holds the end of a request head.
func headComplete(b []byte) bool {
	return bytes.Contains(b, []byte("\r\n\r\n")) || bytes.Contains(b, []byte("\n\n"))
}

func peekBuffered(br *bufio.Reader) []byte {
	b, _ := br.Peek(br.Buffered())
	return b
}

// scanHead returns the Host header values of the request head at the
// start of b, and whether it has a Content-Length header. b holds a head
// http.ReadRequest accepted, so lines are well formed; a line starting
// with a space or tab continues the previous one (obs-fold).
func scanHead(b []byte) (hosts []string, hasCL bool) {
	_, rest, _ := bytes.Cut(b, []byte("\n")) // the request line
	last := -1
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last >= 0 {
				hosts[last] += " " + string(bytes.TrimSpace(line))
			}
			continue
		}
		last = -1
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch {
		case asciiEqualFold(name, "host"):
			hosts = append(hosts, string(bytes.TrimSpace(value)))
			last = len(hosts) - 1
		case asciiEqualFold(name, "content-length"):
			hasCL = true
		}
	}
	for i, h := range hosts {
		hosts[i] = strings.TrimSpace(h)
	}
	return hosts, hasCL
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x := b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != s[i] {
			return false
		}
	}
	return true
}

// refuse answers a request head that could not be served, and the
// connection closes after it.
func (c *clientConn) refuse(code, reason string) {
	a := &auditRecord{start: time.Now()}
	d := deny(code, refuseDetail[code]).withReason(reason)
	c.cs.s.finish(a, d)
	resp := d.response(nil)
	resp.Header.Set("Connection", "close")
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = resp.Write(c.bw)
	_ = c.bw.Flush()
}

var refuseDetail = map[string]string{
	CodeBadRequest:      "the proxy could not parse the request (HTTP/1.1, one Host header, no Transfer-Encoding with Content-Length)",
	CodeHeadersTooLarge: "the request headers are larger than the proxy allows",
	CodeInvalidHeader:   "a header holds a control character",
}

// serveRequest runs the handler for req and reports whether the
// connection may carry another request.
func (c *clientConn) serveRequest(req *http.Request) bool {
	w := &c.w
	w.reset(req)
	var body *reqBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &reqBody{rc: req.Body}
		req.Body = body
	}
	var ec *expectContinue
	if ex := req.Header.Get("Expect"); ex != "" {
		if !strings.EqualFold(ex, "100-continue") || !req.ProtoAtLeast(1, 1) {
			c.refuseExpectation(req)
			return false
		}
		req.Header.Del("Expect")
		if body != nil {
			ec = &expectContinue{rc: body, w: w}
			req.Body = ec
		}
	}
	c.cs.handler.ServeHTTP(w, req)
	w.finish()
	if w.closeAfter || w.err != nil {
		return false
	}
	if ec != nil && !ec.started {
		// The client may or may not send the body it was waiting to be
		// asked for: the connection's framing is unknown.
		return false
	}
	// Keep the connection only if the rest of the body is short.
	if body != nil {
		n, err := io.CopyN(io.Discard, body.rc, maxDrainBytes+1)
		if err != io.EOF || n > maxDrainBytes {
			return false
		}
	}
	return true
}

// reqBody is the request body the handler sees. Its Close does not read
// the rest of the body (http.ReadRequest's body would, however long it
// is); serveRequest decides whether to drain it or close the connection.
type reqBody struct {
	rc     io.ReadCloser
	closed bool
}

func (b *reqBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.rc.Read(p)
}

func (b *reqBody) Close() error { b.closed = true; return nil }

func (c *clientConn) refuseExpectation(req *http.Request) {
	a := &auditRecord{start: time.Now(), Method: req.Method, Host: req.URL.Hostname()}
	d := deny(CodeBadRequest, "only the 100-continue expectation is supported").withReason("Expect: " + req.Header.Get("Expect"))
	c.cs.s.finish(a, d)
	resp := d.response(req)
	resp.StatusCode, resp.Status = http.StatusExpectationFailed, "417 Expectation Failed"
	resp.Header.Set("Connection", "close")
	_ = resp.Write(c.bw)
	_ = c.bw.Flush()
}

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
	c          *clientConn
	req        *http.Request
	header     http.Header
	wrote      bool
	chunked    bool
	noBody     bool
	clen       int64 // declared Content-Length, -1 when none
	written    int64
	closeAfter bool
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
	w.wrote, w.chunked, w.noBody, w.closeAfter = false, false, false, false
	w.clen, w.written, w.trailers, w.err = -1, 0, w.trailers[:0], nil
	w.closeAfter = req.Close || req.ProtoMinor == 0
}

func (w *respWriter) Header() http.Header { return w.header }

func (w *respWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	if code < 200 || code > 999 {
		// Interim responses are never forwarded (the upstream client
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
	for k, vv := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			b = appendHeader(b, k, v)
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

// appendHeader writes one header line; CR, LF and NUL in a value become
// spaces, as net/http does, so no value can split the head.
func appendHeader(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = appendHeaderValue(b, v)
	return append(b, "\r\n"...)
}

func appendHeaderValue(b []byte, v string) []byte {
	for {
		i := strings.IndexAny(v, "\r\n\x00")
		if i < 0 {
			return append(b, v...)
		}
		b = append(b, v[:i]...)
		b = append(b, ' ')
		v = v[i+1:]
	}
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
				b = appendHeader(b, name, v)
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
		w.c.cs.s.log.Debug("proxy: writing a response failed", slog.String("error", w.err.Error()))
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
