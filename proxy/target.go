package proxy

import (
	"cmp"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/airlock-dev/airlock/proxy/internal/h1"
)

// target is a request's destination after normalization.
type target struct {
	host string // lower-case ASCII (punycode), no trailing dot
	port int    // 443 when the request said 80 or nothing
	path string // cleaned, decoded path used for prefix checks
	// literal is the decoded path without dot or empty segments
	// resolved: how an upstream that does not normalize paths (S3) reads
	// it. Destinations are checked on both forms.
	literal string
	// raw is the path exactly as the client sent it, escapes and all:
	// what goes upstream. The proxy never rewrites a path (for S3 the
	// path is an object key: a rewritten key is silent data corruption).
	raw string
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
	raw := rawPath(r)
	p, literal, ok := cleanPath(raw)
	if !ok {
		return target{}, deny(CodePathNotAllowed, "the request path holds a backslash, a control character or an invalid escape")
	}
	if paramDotSegment(literal) {
		return target{}, deny(CodePathNotAllowed, "a dot segment of the path carries ';' parameters, which some servers read as the dot segment; send the path without them")
	}
	return target{host: host, port: port, path: p, literal: literal, raw: raw}, nil
}

// rawPath is the path of r's request target exactly as the client sent
// it (http.ReadRequest keeps the target in RequestURI; a request made in
// process has none, and its URL's path is used).
func rawPath(r *http.Request) string {
	s := r.RequestURI
	if s == "" {
		return cmp.Or(r.URL.EscapedPath(), "/")
	}
	if !strings.HasPrefix(s, "/") {
		// Absolute form: drop the scheme and the authority.
		_, rest, _ := strings.Cut(s, ":")
		rest, ok := strings.CutPrefix(rest, "//")
		if !ok {
			return cmp.Or(r.URL.EscapedPath(), "/")
		}
		s = ""
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			s = rest[i:]
		}
	}
	s, _, _ = strings.Cut(s, "?")
	return cmp.Or(s, "/")
}

// requestTarget is the origin-form target sent upstream
// (h1.RequestTarget): the client's exact path, which prepare puts in
// Opaque, and the query as sent.
func requestTarget(u *url.URL) string { return h1.RequestTarget(u) }

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
	// IDNA lets empty labels through ("..", ".a", "a..b", "a.." after the
	// one trailing dot goes): none is a DNS name.
	if strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") {
		return "", errEmptyLabel
	}
	// An IPv6 literal, with or without a zone: "%" is allowed nowhere else.
	if ip := net.ParseIP(h); ip != nil || strings.Contains(h, ":") && strings.Contains(h, "%") {
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

const (
	errEmptyHost  = hostError("empty host")
	errEmptyLabel = hostError("empty label in host")
)

// cleanPath decodes the raw path, refuses backslashes and control
// characters (some servers treat \ as /), and resolves dot segments and
// repeated slashes, so that "..", "%2e%2e" and "//" cannot step out of a
// prefix (a trailing slash is kept). It also returns the decoded path
// with nothing resolved.
func cleanPath(raw string) (cleaned, literal string, ok bool) {
	dec, err := url.PathUnescape(raw)
	if err != nil {
		return "", "", false
	}
	for i := 0; i < len(dec); i++ {
		if c := dec[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return "", "", false
		}
	}
	if !strings.HasPrefix(dec, "/") {
		dec = "/" + dec
	}
	if !hasDotOrEmptySegment(dec) {
		return dec, dec, true // already clean: the usual case, no allocation
	}
	return resolveSegments(dec), dec, true
}

// resolveSegments drops empty and "." segments of p and resolves ".."
// ones, never above the root; a trailing slash is kept.
func resolveSegments(p string) string {
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		switch {
		case s == "" && i != 0 && i != len(segs)-1, s == ".":
			// "//" and "./"
		case s == "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	cleaned := strings.Join(out, "/")
	if !strings.HasPrefix(cleaned, "/") {
		cleaned = "/" + cleaned
	}
	return cleaned
}

// paramDotSegment reports whether the decoded path p has a segment that
// is "." or ".." or empty before ';' parameters ("..;", "..;x=1",
// ";x"). Servlet containers (Tomcat, Jetty) and Spring drop a segment's
// parameters before they resolve dot and empty segments, so
// "/v1/..;/admin" and "/v1/;/../admin" are "/admin" to them, while
// cleanPath keeps "..;" as a name inside "/v1/" and lets ".." take ";".
func paramDotSegment(p string) bool {
	for i := strings.Index(p, ";"); i >= 0; {
		seg := p[:i]
		if j := strings.LastIndexByte(seg, '/'); j >= 0 {
			seg = seg[j+1:]
		}
		if seg == "" || seg == "." || seg == ".." {
			return true
		}
		next := strings.Index(p[i+1:], ";")
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// hasDotOrEmptySegment reports whether the path p (starting with "/")
// has a segment cleanPath would drop or resolve: "", "." or "..", other
// than the empty first segment and a trailing slash's.
func hasDotOrEmptySegment(p string) bool {
	return strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") ||
		strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")
}

// upstreamAuthority is the authority a request goes upstream with: the
// normalized host, and the port unless it is 443. sent, the authority
// the client sent, is returned as it is when it already has that form
// (the usual case: no string is built per request).
func upstreamAuthority(host string, port int, sent string) string {
	if port == 443 {
		return host
	}
	var buf [8]byte
	ps := strconv.AppendInt(buf[:0], int64(port), 10)
	if len(sent) == len(host)+1+len(ps) && strings.HasPrefix(sent, host) && sent[len(host)] == ':' &&
		sent[len(host)+1:] == string(ps) && !strings.Contains(host, ":") {
		return sent
	}
	return net.JoinHostPort(host, string(ps))
}
