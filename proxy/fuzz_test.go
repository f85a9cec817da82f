package proxy

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/broker"
)

// FuzzParseTarget: no input panics; whatever is accepted is normalized
// (lower-case host, no trailing dot, cleaned absolute path without dot
// segments, empty segments or backslashes).
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"http://api.example.com/v1/x", "http://API.Example.com.:8080/a/../b", "http://xn--bcher-kva.example/",
		"http://bücher.example/%2e%2e/x", "http://[::1]:80/", "http://a.b/%5c", "http://user@a.b/", "https://a.b/", "http://a.b//x/./y",
		"http://../", "http://a..b/", "http://a%25./", "http://[fe80::1%25eth0]/"} {
		f.Add(s, "")
	}
	f.Add("http://a.example.com/x", "A.EXAMPLE.COM:80")
	f.Fuzz(func(t *testing.T, raw, host string) {
		u, err := url.Parse(raw)
		if err != nil || !u.IsAbs() {
			return
		}
		r := &http.Request{URL: u, Host: host, Header: http.Header{}}
		tg, d := parseTarget(r)
		if d != nil {
			if codeStatus[d.code] == 0 {
				t.Fatalf("unknown code %q", d.code)
			}
			return
		}
		if tg.host != strings.ToLower(tg.host) || strings.HasSuffix(tg.host, ".") || tg.host == "" {
			t.Fatalf("host not normalized: %q", tg.host)
		}
		if tg.port < 1 || tg.port > 65535 {
			t.Fatalf("port %d", tg.port)
		}
		p := tg.path
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "\\\\") || strings.Contains(p[1:], "//") && !strings.HasSuffix(p, "//") {
			t.Fatalf("path not cleaned: %q", p)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("dot segment left in %q", p)
			}
		}
	})
}

// FuzzDestination: a request allowed under a prefix really is under it,
// and wildcards match exactly one label.
func FuzzDestination(f *testing.F) {
	f.Add("api.example.com", "/v1/", "GET", "api.example.com", "/v1/x")
	f.Add("*.example.com", "/v1", "POST", "a.b.example.com", "/v1x")
	f.Add("*.example.com", "/", "GET", "example.com", "/")
	f.Fuzz(func(t *testing.T, pattern, prefix, method, host, path string) {
		d := broker.Destination{Host: pattern, PathPrefix: prefix, Port: 443}
		tg := target{host: host, port: 443, path: path}
		g := &broker.Grant{Class: broker.ClassWrite, Destinations: []broker.Destination{d}}
		if checkDestination(g, broker.Intent{}, method, tg) != nil {
			return
		}
		if rest, ok := strings.CutPrefix(pattern, "*."); ok {
			label, parent, _ := strings.Cut(host, ".")
			if label == "" || parent != rest {
				t.Fatalf("%q matched wildcard %q", host, pattern)
			}
		} else if pattern != host {
			t.Fatalf("%q matched %q", host, pattern)
		}
		if prefix != "" && prefix != "/" && !strings.HasPrefix(path, strings.TrimSuffix(prefix, "/")) {
			t.Fatalf("%q allowed under prefix %q", path, prefix)
		}
	})
}

// FuzzInject: substitution and query rewriting never leave the handle
// upstream, never add CR/LF, and keep other query parameters.
func FuzzInject(f *testing.F) {
	f.Add("Bearer HANDLE", "a=1&b=2", "sk-secret-value")
	f.Add("HANDLE HANDLE", "api_key=x&api_key=y", "v")
	f.Fuzz(func(t *testing.T, header, query, secret string) {
		const handle = "alh_0000000000000000000000000000000000000000000AAAAAA"
		header = strings.ReplaceAll(header, "HANDLE", handle)
		if badHeaderValue(header) {
			return
		}
		r := &http.Request{Header: http.Header{"Authorization": {header}}, URL: &url.URL{RawQuery: query}}
		in := broker.Intent{Inject: broker.Inject{Kind: &broker.PlaceholderInject{Headers: []string{"Authorization"}}}}
		_, d := injectors["placeholder"].inject(r, in.Inject.Kind, broker.Secret{Value: secret}, handle)
		switch {
		case badHeaderValue(secret):
			if d == nil {
				t.Fatal("a CR/LF/NUL secret was substituted")
			}
		case !strings.Contains(header, handle):
			if d == nil {
				t.Fatal("no placeholder, yet no denial")
			}
		case d != nil:
			t.Fatalf("denied: %v", d.detail)
		case strings.Contains(r.Header.Get("Authorization"), handle) && !strings.Contains(secret, handle):
			t.Fatal("the handle went upstream")
		}
		q := setQuery(query, "api_key", secret)
		vals, err := url.ParseQuery(q)
		if err == nil && (len(vals["api_key"]) != 1 || vals["api_key"][0] != secret) {
			t.Fatalf("setQuery(%q) = %q", query, q)
		}
	})
}
