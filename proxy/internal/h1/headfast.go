package h1

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The fast paths for the two heads on the proxy's hot path, over
// parseHeaderBlock (headparse.go): a client's HTTP/1.1 request
// (parseRequestFast, in readRequest) and an upstream's HTTP/1.1 response
// (parseResponseFast, in ReadResponse, which ClientConn calls). Each
// reads only a head that is whole in the buffered reader and that
// it is sure of, and consumes nothing otherwise: the same bytes then go
// to http.ReadRequest (readRequestSlow, conn.go) or http.ReadResponse.

const http11 = "HTTP/1.1"

// readRequest reads and checks one request head. On failure it returns
// why to refuse it, or RefuseNone when the client is gone or timed out.
// A plain head already whole in the buffer is read by the fast path;
// anything else by readRequestSlow (conn.go), from the same bytes.
func (c *Conn) readRequest() (*http.Request, RefuseCode, string) {
	// As readRequestSlow's, the request gets its context in watchHangup.
	if req := parseRequestFast(c.br, c.cs.HeaderLimit); req != nil {
		if req.Body != http.NoBody {
			_ = c.conn.SetReadDeadline(time.Time{}) // as readRequestSlow does
		}
		req.RemoteAddr = c.remote
		return req, RefuseNone, ""
	}
	return c.readRequestSlow()
}

// reqSpace is what a request read by the fast path needs besides its
// head, URL and header map, in one allocation: the request, its body and
// the slices of its header values.
type reqSpace struct {
	req  http.Request
	body sizedBody
	strs [16]string
}

// parseRequestFast reads the request head at the start of br's buffer,
// of at most limit bytes, as http.ReadRequest followed by readRequest's
// checks would (one Host, valid; header names and values valid; no
// Transfer-Encoding), and consumes it. It returns nil and consumes
// nothing for anything else: a head not yet whole, HTTP/1.0,
// CONNECT, Transfer-Encoding, any Host problem, and whatever
// parseHeaderBlock does not read.
func parseRequestFast(br *bufio.Reader, limit int64) *http.Request {
	head, line, rest, ok := fastHead(peekBuffered(br), limit)
	if !ok {
		return nil
	}
	method, rest1, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest1, " ")
	if !ok1 || !ok2 || proto != http11 || method == http.MethodConnect || !httpguts.ValidHeaderFieldName(method) {
		return nil
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil
	}
	space := new(reqSpace)
	hb, ok := parseHeaderBlock(rest, space.strs[:])
	if !ok || hb.hosts != 1 || !httpguts.ValidHostHeader(hb.host) {
		return nil
	}
	delete(hb.header, "Host")
	req := &space.req
	*req = http.Request{
		Method: method, URL: u, Proto: http11, ProtoMajor: 1, ProtoMinor: 1,
		Header: hb.header, Body: http.NoBody, Host: u.Host, RequestURI: target,
		Close: httpguts.HeaderValuesContainsToken(hb.header["Connection"], "close"),
	}
	if req.Host == "" || u.IsAbs() {
		// net/http takes an absolute-form target's; the proxy keeps the
		// header's, which parseTarget holds to the target.
		req.Host = hb.host
	}
	if hb.hasCL {
		req.ContentLength = hb.cl
	}
	_, _ = br.Discard(len(head))
	if req.ContentLength > 0 {
		space.body = sizedBody{src: io.LimitedReader{R: br, N: req.ContentLength}, closing: req.Close}
		req.Body = &space.body
	}
	return req
}

// ReadResponse reads the response to req from br: by the fast path when
// the head is whole in br's buffer once something has arrived, else by
// http.ReadResponse.
func ReadResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if br.Buffered() == 0 {
		if _, err := br.Peek(1); err != nil {
			// What http.ReadResponse returns when the first read fails.
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	if resp := parseResponseFast(br, req); resp != nil {
		return resp, nil
	}
	return http.ReadResponse(br, req)
}

// respSpace is a response read by the fast path, its body and the
// slices of its header values, in one allocation.
type respSpace struct {
	resp http.Response
	body sizedBody
	strs [16]string
}

// parseResponseFast reads the response head at the start of br's buffer
// as http.ReadResponse would, and consumes it. It returns nil and
// consumes nothing for anything else: a head not yet whole, a protocol
// other than HTTP/1.1, a status outside 100–599, a body delimited by the
// connection's close, and whatever parseHeaderBlock does not read.
func parseResponseFast(br *bufio.Reader, req *http.Request) *http.Response {
	head, line, rest, ok := fastHead(peekBuffered(br), math.MaxInt64)
	// "HTTP/1.1 200" and an optional " reason".
	if !ok || len(line) < 12 || line[:9] != http11+" " || len(line) > 12 && line[12] != ' ' {
		return nil
	}
	code := line[9:12]
	if code[0] < '1' || code[0] > '5' || !isDigit(code[1]) || !isDigit(code[2]) || !validValue(line[12:]) {
		return nil
	}
	space := new(respSpace)
	hb, ok := parseHeaderBlock(rest, space.strs[:])
	if !ok {
		return nil
	}
	status := int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	resp := &space.resp
	*resp = http.Response{
		Status: line[9:], StatusCode: status, Proto: http11, ProtoMajor: 1, ProtoMinor: 1,
		Header: hb.header, Body: http.NoBody, Request: req,
	}
	if httpguts.HeaderValuesContainsToken(hb.header["Connection"], "close") {
		delete(hb.header, "Connection")
		resp.Close = true
	}
	method := http.MethodGet
	if req != nil {
		method = req.Method
	}
	// net/http's framing (RFC 9112 §6.3), within what the fast path reads.
	switch {
	case method == http.MethodHead:
		resp.ContentLength = -1
		if hb.hasCL {
			resp.ContentLength = hb.cl
		}
	case status < 200 || status == http.StatusNoContent || status == http.StatusNotModified:
	case !hb.hasCL:
		return nil // delimited by the connection's close
	case hb.cl > 0:
		resp.ContentLength = hb.cl
		space.body = sizedBody{src: io.LimitedReader{R: br, N: hb.cl}, closing: resp.Close}
		resp.Body = &space.body
	}
	_, _ = br.Discard(len(head))
	return resp
}

// fastHead copies the head at the start of buf, up to and including the
// first blank line, into one string and splits off its start line (its
// CRLF dropped) from the header block. ok is false when buf holds no
// such head of at most limit bytes, or its start line does not end in
// CRLF.
func fastHead(buf []byte, limit int64) (head, line, rest string, ok bool) {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 || int64(end)+4 > limit {
		return "", "", "", false
	}
	eol := bytes.IndexByte(buf, '\n')
	if eol < 1 || buf[eol-1] != '\r' {
		return "", "", "", false
	}
	head = string(buf[:end+4])
	return head, head[:eol-1], head[eol+1:], true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
