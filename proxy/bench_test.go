package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	b.ReportMetric(prepareAllocs(b, f, h), "prepare-allocs/op")
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

// prepareAllocs is how many times the decision path itself allocates for
// one header-injected request: the measured run minus the request and
// audit record it is given.
func prepareAllocs(tb testing.TB, f *fixture, h string) float64 {
	u, _ := url.Parse(f.url("/v1/items?limit=10"))
	hdr := http.Header{"Proxy-Authorization": {"Bearer " + h}, "Accept": {"application/json"}, "User-Agent": {"bench"}}
	var sink *http.Request
	given := func() (*http.Request, *auditRecord) {
		r := &http.Request{Method: "GET", URL: cloneURL(u), Host: u.Host, Header: hdr.Clone(), Body: http.NoBody}
		sink = r
		return r, &auditRecord{start: time.Now()}
	}
	base := testing.AllocsPerRun(200, func() { given() })
	all := testing.AllocsPerRun(200, func() {
		x, d := f.proxy.prepare(given())
		if d != nil {
			tb.Fatalf("denied: %s %s", d.code, d.auditReason())
		}
		x.release()
	})
	_ = sink
	return all - base
}

// The decision path allocates the exchange, the injected header's value
// slice and nothing else for a steady stream of requests on one handle
// (issue 35: no allocation on the steady-state path beyond the
// request's own).
func TestPrepareAllocs(t *testing.T) {
	f := newBenchFixtureTB(t)
	if n := prepareAllocs(t, f, f.issueAt(t, "api.write", "inv-allocs", f.up.port)); n > 2 {
		t.Fatalf("the decision path allocates %v times per request, want at most 2", n)
	}
}

// BenchmarkInterceptRoundTrip is one GET through a kept-alive CONNECT
// tunnel with 16 concurrent clients: client TLS to the proxy, every
// check, injection, echo guard, audit record, upstream TLS and back.
func BenchmarkInterceptRoundTrip(b *testing.B) {
	dir := b.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	f := newFixture(b, func(c *Config) {
		c.Limits.PerHandleRPS, c.Limits.PerPluginRPS, c.Limits.PerPluginConcurrency = 1e9, 1e9, 1024
		c.Intercept = InterceptConfig{CAFile: caFile, CAKeyFile: filepath.Join(dir, "ca.key")}
	})
	h := f.issueB(b, "api.write")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, TLSClientConfig: &tls.Config{RootCAs: pool},
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: f.addr, User: url.User(h)})}}
	u := "https://api.example.com:" + strconv.Itoa(f.up.port) + "/ok"
	getParallel(b, c, u)
}

// BenchmarkPlainRoundTrip is one absolute-form GET (plain mode) with 16
// concurrent clients: every check, injection, echo guard, audit record,
// upstream TLS and back. Its allocations per request (client and upstream
// included, all in this process) track the request path's.
func BenchmarkPlainRoundTrip(b *testing.B) {
	f := newFixture(b, func(c *Config) {
		c.Limits.PerHandleRPS, c.Limits.PerPluginRPS, c.Limits.PerPluginConcurrency = 1e9, 1e9, 1024
	})
	h := f.issueB(b, "api.write")
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64,
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: f.addr, User: url.User(h)})}}
	u := "http://api.example.com:" + strconv.Itoa(f.up.port) + "/ok"
	getParallel(b, c, u)
}

// BenchmarkProcessors is the decision path of BenchmarkDecision with each
// inject kind: header injection next to the processors (the OAuth2 one
// with its token cached, as for every request but the first).
func BenchmarkProcessors(b *testing.B) {
	pf, v := processorFixture(b, nil)
	of, a := oauthFixture(b)
	for _, bc := range []struct {
		name, intent, url, body string
	}{
		{"header", "api.write", pf.url("/v1/items"), ""},
		{"hmac", "sig.hmac", "http://sig.example.org:" + strconv.Itoa(v.port) + "/hmac/sha256/x", `{"event":"paid","amount":1299}`},
		{"aws_sigv4", "aws.explicit", "http://sig.example.org:" + strconv.Itoa(v.port) + "/aws/items", `{"n":1}`},
		{"oauth2_client_credentials", "oauth.cc", a.apiURL("items"), ""},
	} {
		f := pf
		if bc.intent == "oauth.cc" {
			f = of
		}
		b.Run(bc.name, func(b *testing.B) {
			var h string
			if bc.intent == "api.write" {
				h = f.issueB(b, bc.intent)
			} else {
				h = f.issueFor(b, bc.intent)
			}
			u, _ := url.Parse(bc.url)
			hdr := http.Header{"Proxy-Authorization": {"Bearer " + h}, "Accept": {"application/json"}, "User-Agent": {"bench"}}
			b.ReportAllocs()
			for b.Loop() {
				r := &http.Request{Method: "POST", URL: cloneURL(u), Host: u.Host, Header: hdr.Clone(), Body: http.NoBody}
				if bc.body != "" {
					r.Body, r.ContentLength = io.NopCloser(strings.NewReader(bc.body)), int64(len(bc.body))
				}
				a := &auditRecord{start: time.Now()}
				x, d := f.proxy.prepare(r, a)
				if d != nil {
					b.Fatalf("denied: %s %s", d.code, d.auditReason())
				}
				x.release()
			}
		})
	}
}

// getParallel runs GETs of u with c from 8 goroutines per CPU and
// reports allocations.
func getParallel(b *testing.B, c *http.Client, u string) {
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(u)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
