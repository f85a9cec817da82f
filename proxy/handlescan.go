package proxy

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/broker"
)

// A handle (or a plugin pass, which has a handle's form) is for the proxy
// alone. Injection replaces it where the intent says; any copy left
// anywhere else in the outgoing head — another header, a header name,
// the path, the query, the host — would hand it to a third party, so the
// request is refused instead (handle_in_request). The scan looks for the
// handle prefix, which a request without a handle almost never holds, so
// it costs a substring search per header value; only a hit is examined
// further. Copies in the forms a client commonly produces are found too:
// percent-encoded in the URL, base64 in a Basic credential, and
// case-folded in a header name (which Go's header map canonicalizes).

// handleLeft reports where in r, as it will be sent to host, a
// handle-shaped token remains: "" when nowhere. The answer names the
// place, never the value.
func handleLeft(r *http.Request, host string) string {
	if containsHandleFold(host) {
		return "the host name"
	}
	if uriHoldsHandle(r.URL) {
		return "the URL"
	}
	for name, vals := range r.Header {
		if containsHandleFold(name) {
			return "a header name"
		}
		for _, v := range vals {
			if containsHandle(v) || basicHoldsHandle(v) {
				return "the header " + strconv.Quote(name)
			}
		}
	}
	return ""
}

// uriHoldsHandle reports whether the request URI u sends (its opaque
// part or escaped path, then its query) holds a handle, plain or
// percent-encoded. It scans the parts without joining them, which would
// allocate: a handle cannot span the '?' between them, nor can a
// percent escape.
func uriHoldsHandle(u *url.URL) bool {
	path := u.Opaque
	if path == "" {
		path = u.EscapedPath()
	} else if strings.HasPrefix(path, "//") && containsHandle(u.Scheme) {
		return true
	}
	for _, s := range [2]string{path, u.RawQuery} {
		if containsHandle(s) || strings.Contains(s, "%") && containsHandle(unescapeAll(s)) {
			return true
		}
	}
	return false
}

// handleLeftDenial is the refusal for a handle found at where.
func handleLeftDenial(where string) *denial {
	return deny(CodeHandleInRequest, "a credential handle is in "+where+
		": send it only in Proxy-Authorization or in the header the intent substitutes; nothing was sent")
}

// containsHandle reports whether s holds a handle-shaped token.
func containsHandle(s string) bool {
	for {
		i := strings.Index(s, broker.HandlePrefix)
		if i < 0 {
			return false
		}
		if handleAt(s[i:]) != "" {
			return true
		}
		s = s[i+len(broker.HandlePrefix):]
	}
}

// containsHandleFold is containsHandle ignoring ASCII case, for places
// that lose it (header names, host names).
func containsHandleFold(s string) bool {
	n := len(broker.HandlePrefix) + 49
	for i := 0; i+n <= len(s); i++ {
		if !strings.EqualFold(s[i:i+len(broker.HandlePrefix)], broker.HandlePrefix) {
			continue
		}
		j := i + len(broker.HandlePrefix)
		for j < i+n && isBase62(s[j]) {
			j++
		}
		if j == i+n {
			return true
		}
	}
	return false
}

func isBase62(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
}

// basicHoldsHandle reports whether v is a Basic credential that decodes
// to a handle (an SDK that sends its API key as a Basic user name).
func basicHoldsHandle(v string) bool {
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return false
	}
	s := string(dec)
	return containsHandle(s) || strings.Contains(s, "%") && containsHandle(unescapeAll(s))
}

// unescapeAll percent-decodes s as far as it decodes.
func unescapeAll(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if u, err := url.PathUnescape(s[i : i+3]); err == nil {
				b.WriteString(u)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
