package h1

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
)

// The request the proxy re-originates upstream, written by hand for the
// same reasons as the response the loop writes (respwriter.go); the
// response is read back by ReadResponse (headfast.go). FuzzWriteRequest
// holds the writer to net/http's.

// WriteRequest writes req to the upstream in origin-form. Unlike
// Request.Write it adds no User-Agent, does not sort headers, and does not
// pass on the client's Connection: close: the upstream connection is the
// proxy's own. The body is sent with its Content-Length when known, else
// chunked; a body shorter than its Content-Length is an error.
func WriteRequest(w *bufio.Writer, req *http.Request) error {
	target := RequestTarget(req.URL)
	if !validTarget(target) {
		return ErrInvalidTarget
	}
	b := w.AvailableBuffer()
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	b = appendHeaderValue(b, host)
	b = append(b, "\r\n"...)
	for k, vv := range req.Header {
		// Names were checked where the request was read (and injected
		// names by the broker's config); values get appendHeader's guard.
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue
		}
		for _, v := range vv {
			b = AppendHeader(b, k, v)
		}
	}
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	switch {
	case body == nil && req.ContentLength <= 0:
		if req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
			b = append(b, "Content-Length: 0\r\n"...)
		}
	case req.ContentLength > 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, req.ContentLength, 10)
		b = append(b, "\r\n"...)
	default:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	b = append(b, "\r\n"...)
	if _, err := w.Write(b); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	defer body.Close()
	if req.ContentLength > 0 {
		n, err := io.CopyN(w, body, req.ContentLength)
		if err == io.EOF && n < req.ContentLength {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	cw := httputil.NewChunkedWriter(w)
	if _, err := io.Copy(cw, body); err != nil {
		return err
	}
	if err := cw.Close(); err != nil {
		return err
	}
	_, err := w.WriteString("\r\n")
	return err
}

// ErrInvalidTarget refuses to write a request whose target holds a byte
// that would end or split a request line (a space or a control
// character): the upstream would read another request line than the one
// the proxy checked. A URL parser may keep such bytes raw in a query.
var ErrInvalidTarget = errors.New("the request target holds a space or a control character")

func validTarget(t string) bool {
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return t != ""
}

// RequestTarget is the origin-form target sent upstream: the client's
// exact path, which prepare puts in Opaque, and the query as sent (with
// a query injection's parameter); a URL without Opaque is sent as Go
// escapes it.
func RequestTarget(u *url.URL) string {
	if u.Opaque == "" {
		return u.RequestURI()
	}
	if u.ForceQuery || u.RawQuery != "" {
		return u.Opaque + "?" + u.RawQuery
	}
	return u.Opaque
}
