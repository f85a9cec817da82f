package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

func TestInjectionModes(t *testing.T) {
	f := newFixture(t, nil)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("bot:"+testSecret))
	tests := []struct {
		intent string
		method string
		path   string
		header http.Header
		check  func(t *testing.T, s seenRequest)
	}{
		{"api.write", "POST", "/x", http.Header{"Authorization": {"Bearer plugin-tried-its-own"}}, func(t *testing.T, s seenRequest) {
			if got := s.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+testSecret {
				t.Fatalf("Authorization = %q", got)
			}
		}},
		{"api.read", "GET", "/x", nil, func(t *testing.T, s seenRequest) {
			if s.Header.Get("X-Api-Key") != testSecret {
				t.Fatalf("X-Api-Key = %q", s.Header.Get("X-Api-Key"))
			}
		}},
		{"api.basic", "PUT", "/x", nil, func(t *testing.T, s seenRequest) {
			if s.Header.Get("Authorization") != basic {
				t.Fatalf("Authorization = %q", s.Header.Get("Authorization"))
			}
		}},
		{"api.query", "GET", "/x?b=2&api_key=forged&a=%20", nil, func(t *testing.T, s seenRequest) {
			if s.Query != "b=2&a=%20&api_key="+testSecret {
				t.Fatalf("query = %q", s.Query)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.intent, func(t *testing.T) {
			h := f.issue(t, tt.intent, "inv-"+tt.intent)
			code, errCode, body := do(t, f.client(h), tt.method, f.url(tt.path), tt.header, "")
			if code != http.StatusOK {
				t.Fatalf("status %d %s %s", code, errCode, body)
			}
			s := f.up.last(t)
			tt.check(t, s)
			for k := range s.Header {
				if strings.HasPrefix(k, "Proxy-") || k == "X-Forwarded-For" {
					t.Fatalf("upstream saw %s", k)
				}
			}
		})
	}
}

func TestPlaceholderSubstitution(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.placeholder", "inv-ph")
	// The plugin uses the handle where the key would go, through the proxy
	// with no Proxy-Authorization at all.
	code, _, body := do(t, f.client(""), "POST", f.url("/x"), http.Header{"Authorization": {"Bearer " + h}}, "{}")
	if code != http.StatusOK {
		t.Fatalf("status %d %s", code, body)
	}
	if got := f.up.last(t).Header.Get("Authorization"); got != "Bearer "+testSecret {
		t.Fatalf("upstream Authorization = %q", got)
	}
	// With Proxy-Authorization but no placeholder in the header: refused,
	// never sent without the credential.
	n := f.up.count()
	code, errCode, _ := do(t, f.client(h), "POST", f.url("/x"), nil, "{}")
	if code != http.StatusBadRequest || errCode != CodePlaceholderMissing || f.up.count() != n {
		t.Fatalf("no placeholder: %d %s (upstream requests %d -> %d)", code, errCode, n, f.up.count())
	}
}

// The upstream echoes the request, secret included; the plugin must not
// see it in the body or the headers.
func TestEchoGuard(t *testing.T) {
	f := newFixture(t, nil)
	for _, intent := range []string{"api.write", "api.basic", "api.query", "api.read"} {
		t.Run(intent, func(t *testing.T) {
			h := f.issue(t, intent, "inv-echo-"+intent)
			method := "POST"
			if intent == "api.query" || intent == "api.read" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, f.url("/echo"), nil)
			resp, err := f.client(h).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var sb bytes.Buffer
			if _, err := sb.ReadFrom(resp.Body); err != nil {
				t.Fatal(err)
			}
			all := sb.String() + strings.Join(resp.Header.Values("X-Echo-Auth"), "")
			for _, form := range []string{testSecret, base64.StdEncoding.EncodeToString([]byte(testSecret)),
				base64.StdEncoding.EncodeToString([]byte("bot:" + testSecret))} {
				if strings.Contains(all, form) {
					t.Fatalf("the plugin saw the secret (form %q): %s", form, all)
				}
			}
			if !strings.Contains(all, Redaction) {
				t.Fatalf("no redaction marker in %s", all)
			}
			if resp.ContentLength >= 0 && int(resp.ContentLength) != sb.Len() {
				t.Fatalf("Content-Length %d but body %d bytes", resp.ContentLength, sb.Len())
			}
		})
	}
	if !strings.Contains(f.audit.String(), `"echo_redactions":1`) && !strings.Contains(f.audit.String(), `"echo_redactions":2`) {
		t.Fatalf("audit lines do not record redactions:\n%s", f.audit.String())
	}
}

// A multi-line secret (a PEM key, here sent as a query parameter) echoed
// JSON-escaped, with CRLF line ends, or in unpadded base64 and base64url
// is redacted like the secret itself.
func TestEchoGuardDerivedForms(t *testing.T) {
	f := newFixture(t, nil)
	pem := "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg/+abc\nZm9vYmFyYmF6cXV4+/0123456789\n-----END PRIVATE KEY-----\n"
	f.writeSecret(t, pem)
	_, _, body := do(t, f.client(f.issue(t, "api.query", "inv-pem")), "GET", f.url("/reformat"), nil, "")
	for _, line := range []string{"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg", "Zm9vYmFyYmF6cXV4", "TUlHSEFnRUFNQk1H"} {
		if strings.Contains(body, line) {
			t.Fatalf("a form of the PEM secret passed the guard (%q): %s", line, body)
		}
	}
	if strings.Count(body, Redaction) != 4 {
		t.Fatalf("want 4 redactions: %s", body)
	}
}

// The echo guard covers trailers too: they arrive after the body and are
// forwarded after it.
func TestEchoGuardTrailers(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-trailer")
	resp, err := f.client(h).Get(f.url("/trailer"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "part one,part two" {
		t.Fatalf("body %q", body)
	}
	got := resp.Trailer.Get("X-Echo-Trailer")
	if strings.Contains(got, testSecret) || got != "Bearer "+Redaction {
		t.Fatalf("trailer %q", got)
	}
	if f.up.last(t).Header.Get("Authorization") != "Bearer "+testSecret {
		t.Fatal("the upstream did not get the secret")
	}
}

func TestDenials(t *testing.T) {
	f := newFixture(t, nil)
	write := f.issue(t, "api.write", "inv-d1")
	read := f.issue(t, "api.read", "inv-d2")
	narrow := f.issue(t, "api.narrow", "inv-d3")
	port := f.up.port
	other := func(host string) string { return "http://" + host + ":" + itoa(port) + "/x" }
	tests := []struct {
		name, handle, method, url string
		header                    http.Header
		wantStatus                int
		wantCode                  string
	}{
		{"no handle", "", "GET", f.url("/x"), nil, 407, CodeHandleMissing},
		{"garbage handle", "alh_not-a-handle", "GET", f.url("/x"), nil, 403, CodeHandleInvalid},
		{"undeclared host", write, "GET", other("evil.example.net"), nil, 403, CodeDestination},
		{"undeclared port", write, "GET", "http://api.example.com:8443/x", nil, 403, CodeDestination},
		{"wildcard is one label", write, "GET", other("b.a.example.org"), nil, 403, CodeDestination},
		{"wildcard apex", write, "GET", other("example.org"), nil, 403, CodeDestination},
		{"read intent POST", read, "POST", f.url("/x"), nil, 403, CodeMethodForIntent},
		{"read intent DELETE", read, "DELETE", f.url("/x"), nil, 403, CodeMethodForIntent},
		{"intent binding narrows path", narrow, "GET", f.url("/v2/x"), nil, 403, CodeDestination},
		{"dot-dot escape", narrow, "GET", f.url("/v1/../admin"), nil, 403, CodeDestination},
		{"encoded dot-dot escape", narrow, "GET", f.url("/v1/%2e%2e/admin"), nil, 403, CodeDestination},
		{"encoded slash escape", narrow, "GET", f.url("/v1%2F..%2Fadmin"), nil, 403, CodeDestination},
		{"backslash", narrow, "GET", f.url("/v1/..%5Cadmin"), nil, 400, CodePathNotAllowed},
		{"empty label in host", write, "GET", other("api..example.com"), nil, 400, CodeBadRequest},
		{"host of dots", write, "GET", other(".."), nil, 400, CodeBadRequest},
		{"percent in a name", write, "GET", other("api%25.example.com"), nil, 400, CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := f.up.count()
			req, _ := http.NewRequest(tt.method, tt.url, nil)
			if h := tt.header.Get("Host"); h != "" {
				req.Host = h
			}
			resp, err := f.client(tt.handle).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || resp.Header.Get(HeaderError) != tt.wantCode {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, resp.Header.Get(HeaderError), tt.wantStatus, tt.wantCode)
			}
			if f.up.count() != n {
				t.Fatal("a denied request reached the upstream")
			}
		})
	}
	if strings.Contains(f.audit.String(), write) || strings.Contains(f.audit.String(), testSecret) {
		t.Fatal("an audit line holds a handle or the secret")
	}
}

func TestConnectAndOriginForm(t *testing.T) {
	f := newFixture(t, nil)
	req, _ := http.NewRequest(http.MethodConnect, "http://"+f.addr, nil)
	req.Host = "api.example.com:443"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get(HeaderError) != CodeConnectNotAllowed {
		t.Fatalf("CONNECT: %d %s", resp.StatusCode, resp.Header.Get(HeaderError))
	}
	resp, err = http.Get("http://" + f.addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(HeaderError) != CodeAbsoluteFormRequired {
		t.Fatalf("origin-form: %d %s", resp.StatusCode, resp.Header.Get(HeaderError))
	}
}

func TestExpiredRevokedAndOtherInvocation(t *testing.T) {
	clock := testenv.NewClock()
	f := newFixtureWith(t, nil, fixtureOpts{now: clock.Now})
	ctx := context.Background()
	live := brokerReq("inv-r", f.up.port, 0)
	live.Deadline = clock.Now().Add(time.Minute)
	li, err := f.b.Issue(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	h := li.Handle
	if code, _, _ := do(t, f.client(h), "GET", f.url("/x"), nil, ""); code != 200 {
		t.Fatal("live handle refused")
	}
	if _, err := f.b.RevokeInvocation(ctx, "inv-r"); err != nil {
		t.Fatal(err)
	}
	if code, errCode, _ := do(t, f.client(h), "GET", f.url("/x"), nil, ""); code != 403 || errCode != CodeHandleInvalid {
		t.Fatalf("revoked: %d %s", code, errCode)
	}
	if !strings.Contains(f.audit.String(), "handle was revoked") {
		t.Fatal("the audit line does not say the handle was revoked")
	}
	short := brokerReq("inv-short", f.up.port, 0)
	short.Deadline = clock.Now().Add(150 * time.Millisecond)
	iss, err := f.b.Issue(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(200 * time.Millisecond) // the broker's clock: past the deadline
	if code, errCode, _ := do(t, f.client(iss.Handle), "GET", f.url("/x"), nil, ""); code != 403 || errCode != CodeHandleInvalid {
		t.Fatalf("expired: %d %s", code, errCode)
	}
	if !strings.Contains(f.audit.String(), "handle has expired") {
		t.Fatal("the audit line does not say the handle expired")
	}
}

func TestRedirectPassedBackNotFollowed(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-redir")
	req, _ := http.NewRequest("GET", f.url("/redirect"), nil)
	resp, err := f.client(h).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || !strings.Contains(resp.Header.Get("Location"), "169.254.169.254") {
		t.Fatalf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// A client that follows it through the proxy is refused.
	code, errCode, _ := do(t, f.client(h), "GET", resp.Header.Get("Location"), nil, "")
	if code != 403 || errCode != CodeDestination {
		t.Fatalf("following the redirect: %d %s", code, errCode)
	}
}

func TestHopByHopStripped(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-hop")
	req, _ := http.NewRequest("GET", f.url("/hop"), nil)
	req.Header.Set("Connection", "X-Secret-Hop, Keep-Alive")
	req.Header.Set("X-Secret-Hop", "internal")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("TE", "trailers")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Proxy-Foo", "bar")
	resp, err := f.client(h).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := f.up.last(t)
	for _, k := range []string{"X-Secret-Hop", "Keep-Alive", "Te", "Upgrade", "Proxy-Foo", "Proxy-Authorization", "Connection"} {
		if s.Header.Get(k) != "" {
			t.Errorf("upstream saw hop-by-hop %s", k)
		}
	}
}

func TestStripHopByHopResponse(t *testing.T) {
	h := http.Header{"Connection": {"X-A, x-b", " ,x-c,"}, "X-A": {"1"}, "X-B": {"2"}, "X-C": {"3"}, "Keep-Alive": {"t"},
		"Trailer": {"X"}, "Proxy-Authenticate": {"Basic"}, "Content-Type": {"text/plain"}, "Upgrade": {"h2c"},
		"Te": {"trailers"}, "Transfer-Encoding": {"chunked"}, "Proxy-Connection": {"keep-alive"}, "Proxy-X": {"y"}}
	stripHopByHop(h)
	if len(h) != 1 || h.Get("Content-Type") != "text/plain" {
		t.Fatalf("left %v", h)
	}
}

// The Host header of an absolute-form request must name the target (the
// issue's rule, stricter than RFC 9112 §3.2.2's "ignore it"): a mismatch
// is refused before anything is sent, and an equivalent spelling passes
// with Host regenerated from the target, so a plugin cannot steer the
// upstream's virtual host either way.
func TestHostHeaderMustMatchTarget(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-host")
	port := itoa(f.up.port)
	for _, tt := range []struct {
		name, head string
		status     int
		code       string
	}{
		{"other host", "Host: evil.example.net\r\n", 400, CodeHostMismatch},
		{"other port", "Host: api.example.com:1\r\n", 400, CodeHostMismatch},
		{"port missing", "Host: api.example.com\r\n", 400, CodeHostMismatch},
		{"two Host headers", "Host: api.example.com:" + port + "\r\nHost: evil.example.net\r\n", 400, CodeBadRequest},
		{"no Host header", "", 400, CodeBadRequest},
		{"malformed Host", "Host: api example\r\n", 400, CodeBadRequest},
		{"same host", "Host: api.example.com:" + port + "\r\n", 200, ""},
		{"case and trailing dot", "Host: API.Example.COM.:" + port + "\r\n", 200, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := f.up.count()
			rc := dialRaw(t, f)
			rc.send("GET " + f.url("/x") + " HTTP/1.1\r\n" + tt.head + "Proxy-Authorization: Bearer " + h + "\r\n\r\n")
			resp, _ := rc.response("GET")
			if resp.StatusCode != tt.status || resp.Header.Get(HeaderError) != tt.code {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, resp.Header.Get(HeaderError), tt.status, tt.code)
			}
			if tt.status != 200 {
				if f.up.count() != n {
					t.Fatal("a refused request reached the upstream")
				}
				return
			}
			if host := f.up.last(t).Host; host != "api.example.com:"+port {
				t.Fatalf("upstream Host = %q", host)
			}
		})
	}
}

// Vault admins rotated the secret; the upstream now refuses the old one.
// The proxy refetches, sees a newer version and retries once.
func TestRotationAwareRetry(t *testing.T) {
	// The broker's clock is its secret cache's too: the test moves it past
	// MinFreshInterval instead of sleeping.
	clock := testenv.NewClock()
	f := newFixtureWith(t, nil, fixtureOpts{now: clock.Now})
	req := brokerReq("inv-rot", f.up.port, 0)
	req.Deadline = clock.Now().Add(time.Minute)
	iss, err := f.b.Issue(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	h := iss.Handle
	if code, _, _ := do(t, f.client(h), "GET", f.url("/x"), nil, ""); code != 200 {
		t.Fatal("warm-up failed")
	}
	f.writeSecret(t, "sk-rotated-99999999")
	f.up.mu.Lock()
	f.up.rotated = "Bearer sk-rotated-99999999"
	f.up.mu.Unlock()
	// Fresh reads come at most once per broker.MinFreshInterval per secret.
	clock.Advance(broker.MinFreshInterval)
	code, _, body := do(t, f.client(h), "PUT", f.url("/protected"), nil, "payload")
	if code != 200 || body != "welcome" {
		t.Fatalf("after rotation: %d %q", code, body)
	}
	s := f.up.last(t)
	if s.Body != "payload" || s.Header.Get("Authorization") != "Bearer sk-rotated-99999999" {
		t.Fatalf("retried request: body %q auth %q", s.Body, s.Header.Get("Authorization"))
	}
	if !strings.Contains(f.audit.String(), `"retried":true`) {
		t.Fatal("the audit line does not record the retry")
	}
	// A non-idempotent request is not retried.
	f.writeSecret(t, "sk-rotated-again-0000")
	f.up.mu.Lock()
	f.up.rotated = "Bearer sk-rotated-again-0000"
	f.up.mu.Unlock()
	n := f.up.count()
	if code, _, _ := do(t, f.client(h), "POST", f.url("/protected"), nil, "x"); code != 401 || f.up.count() != n+1 {
		t.Fatalf("POST after rotation: %d, upstream requests %d", code, f.up.count()-n)
	}
}

func TestSecretUnavailable(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-503")
	f.b.RefreshSecrets()
	if err := writeFileMode(f.secrets, 0o644); err != nil {
		t.Fatal(err)
	}
	f.b.RefreshSecrets()
	n := f.up.count()
	code, errCode, _ := do(t, f.client(h), "GET", f.url("/x"), nil, "")
	if code != http.StatusServiceUnavailable || errCode != CodeSecretUnavailable || f.up.count() != n {
		t.Fatalf("secret unavailable: %d %s, upstream requests +%d", code, errCode, f.up.count()-n)
	}
}
