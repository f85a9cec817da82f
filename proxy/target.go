package proxy

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// target is a request's destination after normalization.
type target struct {
	host string // lower-case ASCII (punycode), no trailing dot
	port int    // 443 when the request said 80 or nothing
	path string // cleaned, decoded path used for prefix checks
	// rewrite is set when cleaning changed the path: the cleaned form is
	// what goes upstream, so the upstream sees exactly what was checked.
	rewrite bool
}

var idnaProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.BidiRule(), idna.StrictDomainName(true))

// parseTarget checks and normalizes an absolute-form request target and
// its Host header.
func parseTarget(r *http.Request) (target, *denial) {
	u := r.URL
	if u.Scheme != "http" {
		return target{}, deny(CodeSchemeNotAllowed, "the request target must be http://…; the proxy adds TLS (use http:// with HTTP_PROXY, not CONNECT)")
	}
	if u.User != nil {
		return target{}, deny(CodeUserinfo, "the request target must not carry user information")
	}
	host, err := normalizeHost(u.Hostname())
	if err != nil {
		return target{}, deny(CodeBadRequest, "the request target's host is not a valid DNS name")
	}
	port := 443
	if p := u.Port(); p != "" && p != "80" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return target{}, deny(CodeBadRequest, "the request target's port is not valid")
		}
		port = n
	}
	if r.Host != "" && r.Host != u.Host {
		hh, hp, err := splitHostPortDefault(r.Host)
		nh, nerr := normalizeHost(hh)
		if err != nil || nerr != nil || nh != host || portOr80(hp) != portOr80(u.Port()) {
			return target{}, deny(CodeHostMismatch, "the Host header disagrees with the request target")
		}
	}
	p, rewrite, ok := cleanPath(u)
	if !ok {
		return target{}, deny(CodePathNotAllowed, "the request path holds a backslash, a control character or an invalid escape")
	}
	return target{host: host, port: port, path: p, rewrite: rewrite}, nil
}

func portOr80(p string) string {
	if p == "" {
		return "80"
	}
	return p
}

func splitHostPortDefault(hp string) (string, string, error) {
	if !strings.Contains(hp, ":") || strings.HasSuffix(hp, "]") {
		return strings.Trim(hp, "[]"), "", nil
	}
	return net.SplitHostPort(hp)
}

// normalizeHost maps an IDN to punycode, lower-cases, and drops one
// trailing dot. IP literals pass through (they never match a destination).
func normalizeHost(h string) (string, error) {
	if n, ok := hostCache.load(h); ok {
		return n, nil
	}
	n, err := normalizeHostUncached(h)
	if err == nil && len(h) <= 255 {
		hostCache.store(h, n)
	}
	return n, err
}

// hostCache remembers normalized host names: a plugin names the same few
// hosts over and over, and IDNA mapping is a measurable part of a
// request's cost. Bounded: cleared when full.
var hostCache = memo[string, string]{max: 4096}

func normalizeHostUncached(h string) (string, error) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", errEmptyHost
	}
	if ip := net.ParseIP(h); ip != nil || strings.Contains(h, "%") {
		return strings.ToLower(h), nil
	}
	a, err := idnaProfile.ToASCII(h)
	if err != nil {
		return "", err
	}
	return strings.ToLower(a), nil
}

type hostError string

func (e hostError) Error() string { return string(e) }

const errEmptyHost = hostError("empty host")

// cleanPath decodes the path, refuses backslashes and control characters
// (some servers treat \ as /), and resolves dot segments and repeated
// slashes, so that "..", "%2e%2e" and "//" cannot step out of a prefix.
// A trailing slash is kept.
func cleanPath(u *url.URL) (string, bool, bool) {
	raw := u.EscapedPath()
	if raw == "" {
		raw = "/"
	}
	dec, err := url.PathUnescape(raw)
	if err != nil {
		return "", false, false
	}
	for i := 0; i < len(dec); i++ {
		if c := dec[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return "", false, false
		}
	}
	if !strings.HasPrefix(dec, "/") {
		dec = "/" + dec
	}
	segs := strings.Split(dec, "/")
	out := make([]string, 0, len(segs))
	changed := false
	for i, s := range segs {
		switch {
		case s == "" && i != 0 && i != len(segs)-1:
			changed = true // "//"
		case s == ".":
			changed = true
		case s == "..":
			changed = true
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	cleaned := strings.Join(out, "/")
	if cleaned == "" {
		cleaned = "/"
	}
	if !strings.HasPrefix(cleaned, "/") {
		cleaned = "/" + cleaned
	}
	// %2e in a segment decodes to "." above; if the raw form differs
	// from the decoded one only by escapes, no rewrite is needed.
	return cleaned, changed, true
}
