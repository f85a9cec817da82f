package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/coder/websocket"
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
				// Only the kept-body cases send PUT, and none may reach the
				// upstream at all. (A count taken before the request would
				// race the previous case's cut upload still arriving.)
				f.up.mu.Lock()
				defer f.up.mu.Unlock()
				for _, s := range f.up.seen {
					if s.Method == http.MethodPut {
						t.Fatal("a kept body's request reached the upstream")
					}
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

// A gRPC message holding a handle is not sent: the call ends with
// PERMISSION_DENIED handle_in_request (a unary call, and the second
// message of a bidirectional one after the first went through), from
// grpc-go and grpcio, and the next call on the connection works.
func TestGRPCHandleInMessageRefused(t *testing.T) {
	g := newGRPCFixture(t)
	for _, c := range grpcClients()[:2] {
		t.Run(c.name, func(t *testing.T) {
			h := g.issueGRPC(t, "api.write", "inv-grpc-handle-"+c.name)
			res := g.run(t, c, g.target(), h, "handle", "", nil)
			for _, call := range []string{"unary-handle", "bidi-handle"} {
				r := res[call]
				if r.Code != 7 || !strings.Contains(r.Message, CodeHandleInRequest) {
					t.Errorf("%s: %+v, want PERMISSION_DENIED %s", call, r, CodeHandleInRequest)
				}
				for _, reply := range r.Replies {
					if strings.Contains(reply, h) {
						t.Errorf("%s: the upstream got the handle: %q", call, reply)
					}
				}
			}
			if r := res["after"]; r.Code != 0 || len(r.Replies) != 1 || r.Replies[0] != "unary:hi:true" {
				t.Errorf("the next call: %+v", r)
			}
		})
	}
	waitAudit(t, g.fixture, `"code":"handle_in_request"`, `"path":"/t.T/Bidi"`)
}

// A WebSocket message from the plugin holding a handle is not sent: the
// socket closes with 1008 "airlock handle_in_request" and the audit
// says so; from a Go client in both modes and from Python websockets.
func TestWebSocketHandleInMessageRefused(t *testing.T) {
	w := newWSFixture(t, nil)
	for _, scheme := range []string{"ws", "wss"} {
		t.Run("go/"+scheme, func(t *testing.T) {
			h := w.issueWS(t, "api.write", "inv-ws-handle-"+scheme)
			c, _, err := w.dialGo(t, scheme, h)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			if got := wsRoundTrip(t, c, websocket.MessageText, "hello"); got != "echo:hello" {
				t.Fatalf("got %q", got)
			}
			if err := c.Write(context.Background(), websocket.MessageText, []byte("key="+h)); err != nil {
				t.Fatal(err)
			}
			if ce := readClose(t, c); ce.Code != websocket.StatusPolicyViolation || ce.Reason != "airlock "+CodeHandleInRequest {
				t.Fatalf("close %v", ce)
			}
		})
	}
	c := wsClients()[0]
	lines := w.runClient(t, c, w.issueWS(t, "api.write", "inv-ws-handle-py"), "handle", nil)
	last := lines[len(lines)-1]
	for _, l := range lines {
		if l.Sent == "handle" {
			t.Fatalf("%s: the message with the handle was echoed: %+v", c.name, l)
		}
	}
	if last.CloseCode == nil || *last.CloseCode != 1008 || last.CloseReason != "airlock "+CodeHandleInRequest {
		t.Fatalf("%s: %+v", c.name, last)
	}
	waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"closed_by":"handle_in_request"`, `"close_code":1008`)
	if strings.Contains(w.audit.String(), "alh_") {
		t.Fatal("a handle in the audit log")
	}
}

// A request body that ends inside a gRPC message header is passed on
// byte for byte, never padded to a whole header.
func TestGRPCScannerPassesATornHeaderAsItCame(t *testing.T) {
	for _, torn := range []string{"\x00", "\x00\x00\x01", "\x00\x00\x00\x07"} {
		g := &grpcRequestScanner{src: io.NopCloser(strings.NewReader(torn)), hit: func() { t.Error("no handle here") }}
		got, err := io.ReadAll(g)
		if err != nil || string(got) != torn {
			t.Errorf("%q came out as %q (%v)", torn, got, err)
		}
	}
}
