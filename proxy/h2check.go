package proxy

import (
	"cmp"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// An HTTP/2 request is held to HTTP/1.1's rules before anything else
// looks at it. Its pseudo-headers arrive as separate fields, so they can
// hold what an HTTP/1.1 request line and Host header cannot — a space in
// :path, which net/http's HTTP/2 server lets through, would be written
// into the request line sent upstream ("GET /v1/x /admin HTTP/1.1", the
// upstream reading a path the destination check never saw). The checks
// are the ones the HTTP/1.1 side makes (parseRequestFast, readRequestSlow
// through http.ReadRequest): the method a token, the target what one
// request-line field can hold and url.ParseRequestURI reads, one valid
// Host. And, per RFC 9113 §8.3.1, a host header beside :authority must
// name the same authority. FuzzH2RequestLine holds checkRequestLine to
// http.ReadRequest; TestH2PseudoHeadersDifferential holds the whole to
// net/http's HTTP/2 and HTTP/1.1 servers.

// checkH2Request checks r, a request read from an HTTP/2 stream, and
// drops its host header (the authority is r.Host).
func checkH2Request(r *http.Request) *denial {
	if d := checkRequestLine(r.Method, r.RequestURI, r.Host); d != nil {
		return d
	}
	if hosts, ok := r.Header["Host"]; ok {
		if len(hosts) != 1 || !sameAuthority(hosts[0], r.Host) {
			return deny(CodeHostMismatch, "the host header and :authority disagree (RFC 9113 §8.3.1)")
		}
		delete(r.Header, "Host")
	}
	return nil
}

// sameAuthority reports whether the https authorities a and b name the
// same host and port, as parseTarget compares a Host with a target:
// normalized host names, and no port standing for 443.
func sameAuthority(a, b string) bool {
	ah, ap, aerr := splitHostPortDefault(a)
	bh, bp, berr := splitHostPortDefault(b)
	an, anerr := normalizeHost(ah)
	bn, bnerr := normalizeHost(bh)
	return aerr == nil && berr == nil && anerr == nil && bnerr == nil && an == bn && cmp.Or(ap, "443") == cmp.Or(bp, "443")
}

// checkRequestLine reports whether method, target and authority, the
// pseudo-headers of an HTTP/2 request, could make the request line and
// Host header of an HTTP/1.1 request; the denial names the field.
func checkRequestLine(method, target, authority string) *denial {
	switch {
	case !httpguts.ValidHeaderFieldName(method):
		return deny(CodeInvalidPseudoHeader, "the :method pseudo-header is not a token, so it could not start an HTTP/1.1 request line")
	case strings.IndexByte(target, ' ') >= 0 || !validRequestURI(target):
		return deny(CodeInvalidPseudoHeader, "the :path pseudo-header is empty, holds a space or a control character, or is not a request target, which an HTTP/1.1 request line cannot carry")
	case authority == "" || !httpguts.ValidHostHeader(authority):
		return deny(CodeInvalidPseudoHeader, "the :authority pseudo-header is missing or not a valid host, which an HTTP/1.1 Host header could not carry")
	}
	return nil
}

// validRequestURI reports whether target is a request target as
// net/http's HTTP/1.1 server reads one (parseRequestFast does the same).
func validRequestURI(target string) bool {
	_, err := url.ParseRequestURI(target)
	return err == nil
}
