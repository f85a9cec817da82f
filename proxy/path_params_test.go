package proxy

import (
	"strconv"
	"strings"
	"testing"
)

// A dot or empty segment with ';' parameters is refused before anything
// goes upstream: servlet containers and Spring drop the parameters and
// then resolve the segment, so "/v1/..;/admin" reaches "/admin" there
// although both of the proxy's readings of it ("/v1/..;/admin") are
// inside the declared prefix "/v1/". Parameters on a named segment stay
// data.
func TestPathDotSegmentParameters(t *testing.T) {
	f, _ := newInterceptFixture(t)
	h := f.issue(t, "api.narrow", "inv-params")
	port := strconv.Itoa(f.up.port)
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"dot dot with an empty parameter", "/v1/..;/admin", 400, CodePathNotAllowed},
		{"dot dot with a parameter", "/v1/..;x=1/admin", 400, CodePathNotAllowed},
		{"escaped dot dot with a parameter", "/v1/%2e%2e;/admin", 400, CodePathNotAllowed},
		{"escaped semicolon", "/v1/..%3B/admin", 400, CodePathNotAllowed},
		{"dot with a parameter", "/v1/.;/x", 400, CodePathNotAllowed},
		{"empty segment with a parameter, then dot dot", "/v1/;/../admin", 400, CodePathNotAllowed},
		{"parameters on a name", "/v1/a;b=..;c/d", 200, ""},
		{"dot dot inside a name's parameters", "/v1/x;../y", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.up.count()
			head := "GET http://api.example.com:" + port + tc.path + " HTTP/1.1\r\nHost: api.example.com:" + port + "\r\n" +
				"Proxy-Authorization: Bearer " + h + "\r\n\r\n"
			checkPathSent(t, f, dialRaw(t, f).c, head, before, tc.path, tc.status, tc.code)
		})
	}
}

// FuzzParamDotSegment holds paramDotSegment's scan to the plain reading:
// split the path into segments, cut each at its first ';'.
func FuzzParamDotSegment(f *testing.F) {
	for _, s := range []string{"/v1/..;/a", "/v1/a;b", "/;", "/a;..;/b", "/.;x", "/a/..;", ";", "/a;b/;c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		want := false
		for _, seg := range strings.Split(p, "/") {
			if before, _, ok := strings.Cut(seg, ";"); ok && (before == "" || before == "." || before == "..") {
				want = true
			}
		}
		if got := paramDotSegment(p); got != want {
			t.Fatalf("paramDotSegment(%q) = %v, want %v", p, got, want)
		}
	})
}
