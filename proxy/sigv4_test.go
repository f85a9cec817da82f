package proxy

import (
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// FuzzSigV4Canonical: the query and path the SigV4 signer canonicalizes
// by hand read as net/url reads them (where the two agree on what '+'
// and ';' mean), and the canonical forms hold only what UriEncode emits.
func FuzzSigV4Canonical(f *testing.F) {
	for _, s := range []string{"/mybucket/a//w.txt", "/b/logs/../x", "/b/a%2Bb+c;d", "/%C3%A9t%C3%A9/x%2Fy", "/"} {
		f.Add(s, "q=a%3Bb&r=c%2Bd&s=%20&u=&v")
	}
	f.Add("/x", "a=1&a=0&b")
	f.Fuzz(func(t *testing.T, path, query string) {
		vals, ok := sigv4Params(query)
		if std, err := url.ParseQuery(query); err == nil && !strings.ContainsAny(query, "+;") {
			if !ok || !maps.EqualFunc(vals, std, slices.Equal) {
				t.Fatalf("sigv4Params(%q) = %v %v, net/url reads %v", query, vals, ok, std)
			}
		}
		for _, s3 := range []bool{true, false} {
			canon, ok := sigv4CanonicalPath(path, s3)
			if !ok {
				if _, err := url.PathUnescape(path); err == nil && s3 {
					t.Fatalf("sigv4CanonicalPath(%q) refused a path net/url decodes", path)
				}
				continue
			}
			for i := 0; i < len(canon); i++ {
				c := canon[i]
				if c == '%' && i+2 < len(canon) && strings.IndexByte("0123456789ABCDEF", canon[i+1]) >= 0 && strings.IndexByte("0123456789ABCDEF", canon[i+2]) >= 0 {
					i += 2
					continue
				}
				if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/", c) >= 0) {
					t.Fatalf("canonical path %q of %q holds %q", canon, path, c)
				}
			}
			if s3 && !strings.Contains(strings.ToLower(path), "%2f") {
				want, _ := url.PathUnescape(path)
				if got, _ := url.PathUnescape(canon); got != want {
					t.Fatalf("canonical S3 path %q of %q decodes to %q, want %q", canon, path, got, want)
				}
			}
		}
	})
}
