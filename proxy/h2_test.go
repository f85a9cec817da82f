package proxy

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// h2Client is httpsClient speaking HTTP/2 to the proxy inside the tunnel.
func (f *fixture) h2Client(t *testing.T, handle, caFile string) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: f.addr, User: url.User(handle)}),
		TLSClientConfig:   &tls.Config{RootCAs: interceptPool(t, caFile)},
		ForceAttemptHTTP2: true,
	}}
}

// An HTTP/2 client inside a tunnel gets every check of the HTTP/1.1
// path per stream: the secret is injected, echoes in the head, the body
// and the trailers are redacted, an undeclared path is refused, and each
// stream is audited. The upstream speaks HTTP/1.1 only, so this is also
// the fallback upstream.
func TestInterceptHTTP2(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	c := f.h2Client(t, f.issue(t, "api.write", "inv-h2"), caFile)
	resp, err := c.Get(f.httpsURL("/echo"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
		t.Fatalf("got %s %d, want HTTP/2 200: %s", resp.Proto, resp.StatusCode, body)
	}
	if got := f.up.last(t).Header.Get("Authorization"); got != "Bearer "+testSecret {
		t.Fatalf("upstream saw Authorization %q", got)
	}
	for _, v := range []string{string(body), resp.Header.Get("X-Echo-Auth")} {
		if strings.Contains(v, testSecret) || !strings.Contains(v, Redaction) {
			t.Fatalf("the echo was not redacted: %q", v)
		}
	}
	resp, err = c.Get(f.httpsURL("/trailer"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if tr := resp.Trailer.Get("X-Echo-Trailer"); string(body) != "part one,part two" || strings.Contains(tr, testSecret) || !strings.Contains(tr, Redaction) {
		t.Fatalf("trailer: body %q, trailer %q", body, tr)
	}
	narrow := f.h2Client(t, f.issue(t, "api.narrow", "inv-h2-narrow"), caFile)
	resp, err = narrow.Get(f.httpsURL("/elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(HeaderError) != CodeDestination {
		t.Fatalf("undeclared path: %d %q", resp.StatusCode, resp.Header.Get(HeaderError))
	}
	waitAudit(t, f, `"path":"/trailer"`, `"mode":"intercept"`, `"status":200`)
}

// curl negotiates HTTP/2 inside the tunnel by ALPN.
func TestInterceptHTTP2Curl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is required (make tools installs it)")
	}
	f, caFile := newInterceptFixture(t)
	h := f.issue(t, "api.write", "inv-h2-curl")
	out, err := exec.Command(curl, "-sS", "--http2", "--proxy", "http://"+h+"@"+f.addr, "--cacert", caFile,
		"-w", "\n%{http_version}", f.httpsURL("/echo")).CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	s := string(out)
	if !strings.HasSuffix(s, "\n2") || strings.Contains(s, testSecret) || !strings.Contains(s, Redaction) {
		t.Fatalf("curl: %s", s)
	}
}
