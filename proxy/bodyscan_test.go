package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"testing/iotest"
)

const testHandleShape = "alh_0123456789abcdefghijABCDEFGHIJ0123456789abcdefghi"

// scanAll reads body through a bodyScanner, rd wrapping the source.
func scanAll(body []byte, rd func(io.Reader) io.Reader) ([]byte, bool, error) {
	hit := false
	out, err := io.ReadAll(&bodyScanner{src: io.NopCloser(rd(bytes.NewReader(body))), hit: func() { hit = true }})
	return out, hit, err
}

// The streaming scan hands out everything before a handle and never the
// handle, however the reads split it; a body without one passes whole,
// also one that ends in what could begin a handle.
func TestBodyScanner(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		handle     bool
	}{
		{"no handle", strings.Repeat("x", 70000) + "a", false},
		{"prefix without a handle", "alh_short alh_ alh_alh_" + strings.Repeat("a", 40) + " al", false},
		{"a handle", `{"api_key":"` + testHandleShape + `"}`, true},
		{"a handle after 1 MiB", strings.Repeat("y", 1<<20) + testHandleShape, true},
		{"a handle after a false start", "alh_alh_" + testHandleShape[4:] + "zz", true},
	} {
		for name, rd := range map[string]func(io.Reader) io.Reader{
			"whole": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader, "half": iotest.HalfReader,
		} {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				out, hit, err := scanAll([]byte(tt.body), rd)
				if !tt.handle {
					if err != nil || hit || string(out) != tt.body {
						t.Fatalf("err %v, hit %v, %d of %d bytes", err, hit, len(out), len(tt.body))
					}
					return
				}
				if !errors.Is(err, errHandleInBody) || !hit {
					t.Fatalf("err %v, hit %v", err, hit)
				}
				at := strings.Index(tt.body, testHandleShape)
				if len(out) > at || !strings.HasPrefix(tt.body, string(out)) {
					t.Fatalf("handed out %d bytes, the handle starts at %d", len(out), at)
				}
			})
		}
	}
}

// FuzzBodyScanner: what the scanner hands out is a prefix of the body
// that never holds a handle, and all of a body that holds none.
func FuzzBodyScanner(f *testing.F) {
	f.Add([]byte("x "+testHandleShape+" y"), uint8(0))
	f.Add([]byte("alh_alh_"+testHandleShape), uint8(1))
	f.Add([]byte("plain body ending in alh"), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, mode uint8) {
		rd := []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader}[mode%3]
		out, _, err := scanAll(body, rd)
		if !bytes.HasPrefix(body, out) || bytesHoldHandle(out) {
			t.Fatalf("handed out %q of %q", out, body)
		}
		if !bytesHoldHandle(body) && (err != nil || len(out) != len(body)) {
			t.Fatalf("a body without a handle: err %v, %d of %d bytes", err, len(out), len(body))
		}
	})
}

// A handle in a request body is refused with handle_in_request in both
// modes: a body the proxy keeps (an idempotent request's) before
// anything is sent, a streamed one (a POST, chunked or not) before the
// handle is; the upstream never gets it, and a body without one passes
// whole.
func TestHandleInBodyRefused(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	for _, mode := range []string{"plain", "intercept"} {
		h := f.issue(t, "api.write", "inv-body-"+mode)
		c, u := f.client(h), f.url
		if mode == "intercept" {
			c, u = f.httpsClient(t, h, caFile), f.httpsURL
		}
		for _, tt := range []struct {
			name, method, body string
			chunked            bool
		}{
			{"kept PUT body", http.MethodPut, `{"api_key":"` + h + `"}`, false},
			{"streamed POST body", http.MethodPost, `{"api_key":"` + h + `"}`, false},
			{"form POST body", http.MethodPost, "api_key=" + h + "&x=1", false},
			{"chunked POST, handle after 2 MiB", http.MethodPost, strings.Repeat("z", 2<<20) + h, true},
		} {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				n := f.up.count()
				var body io.Reader = strings.NewReader(tt.body)
				if tt.chunked {
					body = io.MultiReader(body) // no length: sent chunked
				}
				req, _ := http.NewRequest(tt.method, u("/echo"), body)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get(HeaderError) != CodeHandleInRequest || strings.Contains(string(b), h) {
					t.Fatalf("%d %q %.200s", resp.StatusCode, resp.Header.Get(HeaderError), b)
				}
				if tt.method == http.MethodPut && f.up.count() != n {
					t.Fatal("a kept body's request reached the upstream")
				}
				f.up.mu.Lock()
				defer f.up.mu.Unlock()
				for _, s := range f.up.seen {
					if strings.Contains(s.Body, h) {
						t.Fatal("the upstream got the handle")
					}
				}
			})
		}
		t.Run(mode+"/no handle", func(t *testing.T) {
			want := strings.Repeat("alh_ not a handle ", 5000) + "al"
			status, code, body := do(t, c, http.MethodPost, u("/echo"), nil, want)
			if status != http.StatusOK || !strings.Contains(body, want) {
				t.Fatalf("%d %q: the body did not pass whole", status, code)
			}
		})
	}
	// curl, as a plugin's script posts JSON.
	h := f.issue(t, "api.write", "inv-body-curl")
	out, err := exec.Command("curl", "-sS", "--max-time", "10", "-x", "http://"+h+"@"+f.addr, "-H", "Content-Type: application/json",
		"--data", `{"api_key":"`+h+`"}`, "-w", "\n%{http_code}", f.url("/echo")).CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "\n403") || !strings.Contains(string(out), CodeHandleInRequest) {
		t.Fatalf("curl: %v %s", err, out)
	}
	if strings.Contains(f.audit.String(), "alh_") {
		t.Fatal("a handle in the audit log")
	}
}
