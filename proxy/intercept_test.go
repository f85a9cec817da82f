package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newInterceptFixture is a fixture with CONNECT interception on; the CA is
// created in a temporary directory, and its certificate's path returned.
func newInterceptFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "intercept-ca.pem")
	f := newFixture(t, func(c *Config) {
		c.Intercept = InterceptConfig{CAFile: caFile, CAKeyFile: filepath.Join(dir, "intercept-ca.key")}
	})
	return f, caFile
}

func (f *fixture) httpsURL(path string) string {
	return "https://api.example.com:" + strconv.Itoa(f.up.port) + path
}

// httpsClient is a Go client with the proxy as HTTPS_PROXY would set it
// and the intercept CA trusted, as SSL_CERT_FILE would.
func (f *fixture) httpsClient(t *testing.T, handle, caFile string) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: f.addr, User: url.User(handle)}),
		TLSClientConfig: &tls.Config{RootCAs: interceptPool(t, caFile)},
	}}
}

// rawConnect sends a CONNECT for target and returns the connection, the
// status and the X-Airlock-Error code.
func rawConnect(t *testing.T, addr, target, handle string) (net.Conn, int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if handle != "" {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(handle+":")) + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, resp.StatusCode, resp.Header.Get(HeaderError)
}

// A plain Go client with an https:// URL: the secret is injected inside
// the tunnel, the echo is redacted, and the tunnel carries several
// requests, each audited.
func TestInterceptGoClient(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	c := f.httpsClient(t, f.issue(t, "api.write", "inv-https"), caFile)
	for i := range 2 {
		code, errCode, body := do(t, c, http.MethodGet, f.httpsURL("/echo"), nil, "")
		if code != http.StatusOK || errCode != "" {
			t.Fatalf("request %d: status %d, code %q: %s", i, code, errCode, body)
		}
		if strings.Contains(body, testSecret) || !strings.Contains(body, Redaction) {
			t.Fatalf("request %d: the echo was not redacted: %s", i, body)
		}
		if got := f.up.last(t).Header.Get("Authorization"); got != "Bearer "+testSecret {
			t.Fatalf("upstream saw Authorization %q", got)
		}
	}
	// A request's audit line is written when the proxy has finished the
	// response, which may be just after the client has read it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := strings.Count(f.audit.String(), `"method":"GET"`)
		if n == 2 {
			break
		}
		if n > 2 || time.Now().After(deadline) {
			t.Fatalf("%d audited GETs, want 2:\n%s", n, f.audit.String())
		}
	}
}

// What a plugin must not be able to do through CONNECT.
func TestInterceptRefusals(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	h := f.issue(t, "api.write", "inv-refuse")
	port := strconv.Itoa(f.up.port)
	for _, tc := range []struct {
		name, target, handle string
		status               int
		code                 string
	}{
		{"undeclared host", "other.example.net:" + port, h, 403, CodeDestination},
		{"undeclared port", "api.example.com:" + strconv.Itoa(f.up.port^1), h, 403, CodeDestination},
		{"IP literal", "127.0.0.1:" + port, h, 403, CodeDestination},
		{"port 80", "api.example.com:80", h, 400, CodeBadRequest},
		{"no port", "api.example.com", h, 400, CodeBadRequest},
		{"no handle", "api.example.com:" + port, "", 407, CodeHandleMissing},
		{"unknown handle", "api.example.com:" + port, flipLastByte(h), 403, CodeHandleInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, status, code := rawConnect(t, f.addr, tc.target, tc.handle)
			if status != tc.status || code != tc.code {
				t.Fatalf("status %d code %q, want %d %q", status, code, tc.status, tc.code)
			}
		})
	}
	if n := f.proxy.ca.Load().leaves.size(); n != 0 {
		t.Fatalf("%d certificates minted for refused CONNECTs", n)
	}

	t.Run("internal address inside the tunnel", func(t *testing.T) {
		f.res.set("internal.example.org", "10.1.2.3")
		c := f.httpsClient(t, h, caFile)
		code, errCode, _ := do(t, c, http.MethodGet, "https://internal.example.org:"+port+"/", nil, "")
		if code != http.StatusForbidden || errCode != CodeAddressNotAllowed {
			t.Fatalf("status %d code %q", code, errCode)
		}
	})

	t.Run("another Host inside the tunnel", func(t *testing.T) {
		conn, status, _ := rawConnect(t, f.addr, "api.example.com:"+port, h)
		if status != http.StatusOK {
			t.Fatalf("CONNECT: %d", status)
		}
		tc := tls.Client(conn, &tls.Config{ServerName: "api.example.com", RootCAs: poolOf(t, caFile)})
		if _, err := io.WriteString(tc, "GET /echo HTTP/1.1\r\nHost: b.a.example.org:"+port+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(HeaderError) != CodeHostMismatch {
			t.Fatalf("status %d code %q", resp.StatusCode, resp.Header.Get(HeaderError))
		}
	})

	t.Run("another TLS server name", func(t *testing.T) {
		conn, status, _ := rawConnect(t, f.addr, "api.example.com:"+port, h)
		if status != http.StatusOK {
			t.Fatalf("CONNECT: %d", status)
		}
		tc := tls.Client(conn, &tls.Config{ServerName: "b.a.example.org", RootCAs: poolOf(t, caFile)})
		if err := tc.Handshake(); err == nil {
			t.Fatal("a handshake for another name inside the tunnel succeeded")
		}
	})

	t.Run("handle revoked mid-tunnel", func(t *testing.T) {
		h2 := f.issue(t, "api.write", "inv-revoke-mid")
		c := f.httpsClient(t, h2, caFile)
		if code, errCode, _ := do(t, c, http.MethodGet, f.httpsURL("/ok"), nil, ""); code != http.StatusOK {
			t.Fatalf("before revocation: %d %q", code, errCode)
		}
		if _, err := f.b.RevokeInvocation(context.Background(), "inv-revoke-mid"); err != nil {
			t.Fatal(err)
		}
		// The same kept-alive tunnel carries the next request.
		if code, errCode, _ := do(t, c, http.MethodGet, f.httpsURL("/ok"), nil, ""); code != http.StatusForbidden || errCode != CodeHandleInvalid {
			t.Fatalf("after revocation: %d %q", code, errCode)
		}
	})
}

func poolOf(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pem)
	return p
}

// flipLastByte keeps a handle's shape but not its value.
func flipLastByte(h string) string {
	b := []byte(h)
	b[len(b)-1] ^= 0x01
	return string(b)
}

// Unmodified clients with an https:// URL, configured only through the
// environment a plugin gets: HTTPS_PROXY with the handle, and the
// intercept CA in SSL_CERT_FILE / CURL_CA_BUNDLE.
func TestRealClientsIntercept(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	runRealClients(t, f, f.httpsURL("/echo"), func(p string) []string {
		return []string{"HTTPS_PROXY=" + p, "https_proxy=" + p, "SSL_CERT_FILE=" + caFile, "CURL_CA_BUNDLE=" + caFile}
	})
}

// Events stream through the tunnel as they are sent, as through an
// absolute-form request (TestStreamEventsPassAsSent).
func TestInterceptStreamEvents(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	resp := openEvents(t, f.httpsClient(t, f.issue(t, "api.write", "inv-https-stream"), caFile), f.httpsURL("/events?sse=1"))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		ev := "data: t" + strconv.Itoa(i) + "\n\n"
		f.up.events <- ev
		got := make([]byte, len(ev))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != ev {
			t.Fatalf("event %d: %q, %v", i, got, err)
		}
	}
	close(f.up.events)
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the last event: %q, %v", rest, err)
	}
}

// An SDK-style client for a placeholder intent: an https:// base URL and
// "Authorization: Bearer <handle>" as its API key, the handle also in
// HTTPS_PROXY so the CONNECT is attributed. The upstream gets the secret.
func TestInterceptPlaceholderClient(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	h := f.issue(t, "api.placeholder", "inv-https-ph")
	code, errCode, body := do(t, f.httpsClient(t, h, caFile), http.MethodPost, f.httpsURL("/v1/chat"),
		http.Header{"Authorization": {"Bearer " + h}}, `{"model":"m"}`)
	if code != http.StatusOK || errCode != "" {
		t.Fatalf("status %d code %q: %s", code, errCode, body)
	}
	if got := f.up.last(t).Header.Get("Authorization"); got != "Bearer "+testSecret {
		t.Fatalf("upstream Authorization = %q", got)
	}
}
