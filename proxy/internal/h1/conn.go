package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
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
)

// The proxy's HTTP/1.1 server side. It does what net/http's server does
// for a forward proxy's clients, minus the work a proxy does not need: no
// background read for a request answered within 100 ms (its goroutine,
// read and deadline change were a tenth of the CPU at high request
// rates; a slower one gets one, hangup.go), no buffered-writer
// allocation, no content sniffing. Requests are parsed by the fast path
// (headfast.go) or by http.ReadRequest, the parser net/http's server
// uses, and held to the same checks (HTTP/1.x, one valid Host, valid
// header names and values) plus two of its own against request
// smuggling: a request with both Transfer-Encoding and Content-Length is
// refused and the connection closed (RFC 9112 §6.1), and the raw Host
// header must agree with an absolute-form target (net/http discards it).
//
// The loop reaches the rest of the proxy only through its Server's
// seams (listener.go) and a tunnel connection's admit callback
// (takeover.go).
//
// The ResponseWriter
// below frames responses with Content-Length when the
// handler set it, chunked otherwise (close-delimited for HTTP/1.0), and
// supports Flush and trailers. A client that disconnects while its
// request is in flight cancels the upstream request (hangup.go); the
// upstream wait is bounded by response_header_timeout.

// maxDrainBytes is how much of an unread request body is discarded to keep
// a connection open (net/http's maxPostHandlerReadBytes).
const maxDrainBytes = 256 << 10

// Conn is one client connection, served on one goroutine.
type Conn struct {
	cs         *Server
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
	// outer is set for the TLS connection inside a CONNECT tunnel
	// (ServeInner), to the connection the CONNECT came on: such a
	// connection is not tracked on its own, outer is.
	outer *Conn
	// admit, when set, vets each request read on c before the handler
	// sees it: nil lets it through, anything else is the answer to the
	// Refusal (already audited), after which the connection closes.
	admit func(*http.Request) *http.Response
	// watch is the hangup watch of the request being served; a
	// WebSocket pauses it when it takes the connection (Hijack).
	watch *hangupWatch
	// spareWatch is a stopped watch the next request may take (hangup.go).
	spareWatch *hangupWatch
}

var (
	brPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	bwPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

func newConn(cs *Server, nc net.Conn, ctx context.Context) *Conn {
	c := &Conn{cs: cs, conn: nc, ctx: ctx, remote: nc.RemoteAddr().String()}
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
	c       *Conn
	r       io.Reader
	n       int64
	capture bool
	// unread is what a hangup watch read ahead (hangup.go): read first.
	unread []byte
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	var n int
	var err error
	if len(l.unread) > 0 {
		n = copy(p, l.unread)
		l.unread = l.unread[n:]
	} else {
		n, err = l.r.Read(p)
	}
	l.n -= int64(n)
	if l.capture {
		l.c.head = append(l.c.head, p[:n]...)
	}
	return n, err
}

var errHeadTooLarge = errors.New("request head too large")

func (c *Conn) serve() {
	answered := false // a response was sent, so closing must not reset it away
	defer func() {
		if v := recover(); v != nil {
			c.cs.Log.Error("proxy: panic serving a client connection", "panic", v, "stack", string(debug.Stack()))
		} else if answered {
			c.lingerClose()
		}
		c.conn.Close()
		c.br.Reset(nil)
		brPool.Put(c.br)
		c.bw.Reset(nil)
		bwPool.Put(c.bw)
		if c.outer == nil {
			c.cs.untrack(c)
		}
	}()
	first := true
	for {
		wait := c.cs.IdleTimeout
		if first {
			wait = c.cs.ReadHeaderTimeout
		}
		if c.br.Buffered() == 0 {
			if !c.SetIdle() {
				return
			}
			_ = c.conn.SetReadDeadline(time.Now().Add(wait))
			_, err := c.br.Peek(1)
			c.idleFlag().Store(false)
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
			if code != RefuseNone {
				c.refuse(Refusal{Code: code, Reason: reason})
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
func (c *Conn) lingerClose() {
	cw, ok := c.conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(lingerDelay))
	_, _ = io.Copy(io.Discard, c.conn)
}

// readRequestSlow is readRequest (headfast.go) by http.ReadRequest, for
// every head the fast path does not read, and the checks it does not do.
// On failure it returns why to refuse it, or RefuseNone when the client
// is gone or timed out.
func (c *Conn) readRequestSlow() (*http.Request, RefuseCode, string) {
	buffered := peekBuffered(c.br)
	if !headComplete(buffered) {
		// More reads to come: they must end by read_header_timeout.
		// (Usually the whole head came in the first read.)
		_ = c.conn.SetReadDeadline(time.Now().Add(c.cs.ReadHeaderTimeout))
	}
	// A head of at most headerLimit bytes is complete once headerLimit
	// bytes of it have arrived, plus at most one buffer fill of
	// read-ahead: reading stops there, and the head's exact length is
	// checked below.
	c.lr.n = max(c.cs.HeaderLimit+int64(c.br.Size())-int64(len(buffered)), 1)
	c.head = append(c.head[:0], buffered...)
	c.lr.capture = true
	req, err := http.ReadRequest(c.br)
	tooLarge := c.lr.n <= 0
	c.lr.capture = false
	c.lr.n = math.MaxInt64
	if err == nil && headLen(c.head) > c.cs.HeaderLimit {
		err, tooLarge = errHeadTooLarge, true
	}
	if err != nil {
		var ne net.Error
		switch {
		case tooLarge || errors.Is(err, errHeadTooLarge):
			return nil, RefuseHeadTooLarge, "request head larger than max_header_bytes"
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
			errors.As(err, &ne) && ne.Timeout():
			return nil, RefuseNone, ""
		case strings.Contains(err.Error(), "unsupported transfer encoding"):
			return nil, RefuseBadRequest, "unsupported transfer encoding"
		}
		var oe *net.OpError
		if errors.As(err, &oe) {
			return nil, RefuseNone, ""
		}
		return nil, RefuseBadRequest, "malformed request head"
	}
	if req.Body != http.NoBody {
		// The body is read while the request goes upstream, with no
		// deadline (as net/http without ReadTimeout). Without a body
		// nothing reads until the next request's wait sets its own.
		_ = c.conn.SetReadDeadline(time.Time{})
	}
	if req.ProtoMajor != 1 {
		return nil, RefuseBadRequest, "not an HTTP/1.x request"
	}
	hosts, hasCL := scanHead(c.head)
	if cap(c.head) > 16<<10 {
		c.head = nil // a one-off large head is not kept for the connection's life
	}
	switch {
	case len(hosts) > 1:
		return nil, RefuseBadRequest, "more than one Host header"
	case len(hosts) == 0 && req.ProtoAtLeast(1, 1) && req.Method != http.MethodConnect:
		return nil, RefuseBadRequest, "missing required Host header"
	case len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]):
		return nil, RefuseBadRequest, "malformed Host header"
	case hasCL && len(req.TransferEncoding) > 0:
		return nil, RefuseBadRequest, "both Transfer-Encoding and Content-Length"
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, RefuseBadRequest, "invalid header name"
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, RefuseInvalidHeader, "header " + strconv.Quote(k) + " holds a control character"
			}
		}
	}
	if len(hosts) == 1 && req.URL.IsAbs() {
		// parseTarget compares it with the target.
		req.Host = hosts[0]
	}
	req.RemoteAddr = c.remote
	// The request gets its context (c.ctx's child) in watchHangup: one
	// copy of the Request, not two.
	return req, RefuseNone, ""
}

// headComplete reports whether b holds the end of a request head.
func headComplete(b []byte) bool {
	return headLen(b) >= 0
}

// headLen is the length of the request head at the start of b, up to and
// including the blank line that ends it (a line that is empty once its
// LF or CRLF is dropped, as textproto reads lines), or -1 when b holds no
// end of a head.
func headLen(b []byte) int64 {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return int64(i + 1)
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return int64(i + 2)
		}
	}
}

func peekBuffered(br *bufio.Reader) []byte {
	b, _ := br.Peek(br.Buffered())
	return b
}

// scanHead returns the Host header values of the request head at the
// start of b, and whether it has a Content-Length header. b holds a head
// http.ReadRequest accepted, so lines are well formed. Values are read as
// net/textproto reads them (FuzzScanHead holds it to that): only spaces
// and tabs are trimmed, never other Unicode white space, and a line
// starting with a space or tab continues the previous one (obs-fold),
// joined with one space.
func scanHead(b []byte) (hosts []string, hasCL bool) {
	_, rest, _ := bytes.Cut(b, []byte("\n")) // the request line
	var line []byte
	for {
		line, rest = nextHeaderLine(rest)
		if len(line) == 0 {
			return hosts, hasCL
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch {
		case asciiEqualFold(name, "host"):
			hosts = append(hosts, string(bytes.TrimLeft(value, " \t")))
		case asciiEqualFold(name, "content-length"):
			hasCL = true
		}
	}
}

// nextHeaderLine returns the next logical header line of b (trimmed,
// with its obs-fold continuation lines joined by one space, as
// net/textproto joins them), and the rest; an empty line at the end of
// the head. It allocates only for a folded line.
func nextHeaderLine(b []byte) (line, rest []byte) {
	line, rest, _ = bytes.Cut(b, []byte("\n"))
	line = trimOWS(bytes.TrimSuffix(line, []byte("\r")))
	if len(line) == 0 {
		return nil, rest
	}
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		var cont []byte
		cont, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = append(append(line[:len(line):len(line)], ' '), trimOWS(bytes.TrimSuffix(cont, []byte("\r")))...)
	}
	return line, rest
}

// trimOWS trims spaces and tabs (RFC 9110 optional white space), and
// nothing else: bytes.TrimSpace would also trim Unicode spaces such as
// U+00A0, which net/http keeps in a value and then refuses.
func trimOWS(b []byte) []byte { return bytes.Trim(b, " \t") }

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

// RefuseCode is why the loop refused what it read; the proxy names it
// with its own denial code (Server.Refuse).
type RefuseCode uint8

const (
	RefuseNone          RefuseCode = iota // not refused: the client is gone or timed out
	RefuseBadRequest                      // a head net/http's server or the smuggling checks refuse
	RefuseHeadTooLarge                    // a head over max_header_bytes
	RefuseInvalidHeader                   // a header value with a control character
	RefuseExpectation                     // an Expect other than 100-continue (417)
)

// Refusal is what the loop refused before any handler saw it.
type Refusal struct {
	Code   RefuseCode
	Reason string        // for the audit line: which check, never a value the client sent
	Req    *http.Request // the request refused; nil when its head could not be read
}

// refuse has the Server's callback audit r and answer it; the
// connection closes after it.
func (c *Conn) refuse(r Refusal) {
	c.writeRefusal(c.cs.Refuse(c.ctx, r))
}

// writeRefusal writes resp, the answer to a Refusal, with Connection:
// close.
func (c *Conn) writeRefusal(resp *http.Response) {
	resp.Header.Set("Connection", "close")
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = resp.Write(c.bw)
	_ = c.bw.Flush()
}

// serveRequest runs the handler for req and reports whether the
// connection may carry another request.
func (c *Conn) serveRequest(req *http.Request) bool {
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
			c.refuse(Refusal{Code: RefuseExpectation, Reason: "Expect: " + ex, Req: req})
			return false
		}
		req.Header.Del("Expect")
		if body != nil {
			ec = &expectContinue{rc: body, w: w}
			req.Body = ec
		} else {
			// No body to wait for, but the client asked: answer 100
			// anyway. botocore takes a final response that comes
			// without it for an early one, and its next request on
			// the connection then stalls until its read timeout.
			_, _ = c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if c.bw.Flush() != nil {
				return false
			}
		}
	}
	if c.admit != nil {
		if resp := c.admit(req); resp != nil {
			c.writeRefusal(resp)
			return false
		}
	}
	req, watch := c.watchHangup(req, body)
	c.watch = watch
	c.cs.Handler.ServeHTTP(w, req)
	if watch.stop() {
		return false
	}
	if w.hijacked {
		return false
	}
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
