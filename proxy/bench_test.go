package proxy

import (
	"net/http"
	"net/url"
	"testing"
	"time"
)

// BenchmarkDecision is the per-request decision path without I/O: handle
// extraction and resolution, target parsing, destination check, limits,
// cached secret, header hygiene and injection. Goal: <= 20 µs p50.
func BenchmarkDecision(b *testing.B) {
	f := newBenchFixture(b)
	h := f.issueB(b, "api.write")
	u, _ := url.Parse(f.url("/v1/items?limit=10"))
	hdr := http.Header{"Proxy-Authorization": {"Bearer " + h}, "Accept": {"application/json"},
		"User-Agent": {"bench"}, "Connection": {"keep-alive"}}
	b.ReportAllocs()
	for b.Loop() {
		r := &http.Request{Method: "GET", URL: cloneURL(u), Host: u.Host, Header: hdr.Clone(), Body: http.NoBody}
		a := &auditRecord{start: time.Now()}
		x, d := f.proxy.prepare(r, a)
		if d != nil {
			b.Fatalf("denied: %s", d.code)
		}
		x.release()
	}
}

func cloneURL(u *url.URL) *url.URL { c := *u; return &c }
