package proxy

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// forward serves one absolute-form request: every check and the
// injection (prepare), the trip upstream (exchange.send), then the
// response relayed as a forward proxy relays it. It is the whole request
// path for both modes and for HTTP/2 streams; no proxy library sits in
// between (why: docs/proxy.md, "Why Airlock does not use goproxy").
func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	if !r.URL.IsAbs() {
		s.refuseEarly(w, r, deny(CodeAbsoluteFormRequired, "this is a forward proxy: send absolute-form requests (GET http://api.example.com/path), for example by setting HTTP_PROXY"))
		return
	}
	x := s.prepareOrAnswer(w, r, requestRecord(r))
	if x == nil {
		return
	}
	relay(w, x.send(r))
}

// requestRecord starts the audit record of an absolute-form request.
func requestRecord(r *http.Request) *auditRecord {
	return &auditRecord{start: time.Now(), Plugin: connPlugin(r.Context()), Method: r.Method, Host: r.URL.Hostname(), Path: pathForAudit(r.URL), Mode: requestMode(r)}
}

// prepareOrAnswer runs every check and the injection on r; a refusal is
// answered (and audited) on w, its concurrency slot given back, and nil
// returned.
func (s *Server) prepareOrAnswer(w http.ResponseWriter, r *http.Request, a *auditRecord) *exchange {
	x, d := s.prepare(r, a)
	if d != nil {
		if x != nil {
			x.release()
		}
		s.answer(w, r, a, d)
		return nil
	}
	return x
}

// relay writes resp to w and closes its body: the upstream's headers
// as they came (hop-by-hop ones are already gone), its trailers after
// the body. Trailers are announced in a Trailer header, sorted so the
// head does not depend on map order; a trailer the upstream did not
// announce is sent under http.TrailerPrefix, which the HTTP/1.1 and
// HTTP/2 response writers both understand. A field RFC 9110 §6.5.1
// forbids in trailers (Content-Length, Transfer-Encoding, Host,
// Authorization, …) is dropped, announced or not: net/http reads
// whatever the upstream sends after the last chunk, and a client that
// merges trailers would take it for framing. A response with trailers is
// flushed before they are set, so that even a short body goes chunked
// (HTTP/1.1) and the trailers are not lost.
func relay(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	h := w.Header()
	clear(h)
	for k, vv := range resp.Header {
		h[k] = vv
	}
	announced := 0
	if n := len(resp.Trailer); n > 0 {
		names := make([]string, 0, n)
		for k := range resp.Trailer {
			if httpguts.ValidTrailerHeader(k) {
				names = append(names, k)
			}
		}
		if len(names) > 0 {
			slices.Sort(names)
			h["Trailer"] = append(h["Trailer"], strings.Join(names, ", "))
		}
		announced = n
	}
	w.WriteHeader(resp.StatusCode)
	// guardedBody's WriteTo streams a body of unknown length chunk by
	// chunk, flushing each one.
	_, _ = io.Copy(w, resp.Body)
	// Close reads the trailers' redaction and writes the audit line.
	_ = resp.Body.Close()
	if len(resp.Trailer) == 0 {
		return
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	for k, vv := range resp.Trailer {
		if !httpguts.ValidTrailerHeader(k) {
			continue
		}
		if len(resp.Trailer) != announced {
			k = http.TrailerPrefix + k
		}
		h[k] = append(h[k][:len(h[k]):len(h[k])], vv...)
	}
}
