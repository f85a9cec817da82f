package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// An upstream that echoes the secret in its close frame's reason (at
// most 123 bytes, enough for most API keys) must not hand it to the
// plugin: the reason passes the echo guard like a message does.
func TestWebSocketCloseReasonEchoGuarded(t *testing.T) {
	w := newWSFixture(t, nil)
	for _, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			c, resp, err := w.dialGo(t, scheme, w.issueWS(t, "api.write", "inv-ws-close-"+scheme))
			if err != nil {
				t.Fatalf("dial: %v (%v)", err, resp)
			}
			defer c.CloseNow()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Write(ctx, websocket.MessageText, []byte("close-auth")); err != nil {
				t.Fatal(err)
			}
			_, _, err = c.Read(ctx)
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("want a close, got %v", err)
			}
			if strings.Contains(ce.Reason, testSecret) {
				t.Fatalf("the close reason carries the secret: %q", ce.Reason)
			}
			waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"closed_by":"upstream"`, `"echo_redactions":1`)
		})
	}
}

// A handshake the upstream refuses has its answer's body sent back
// through the guard; the WebSocket library keeps only its first KiB, so
// a secret that straddles the cut must not pass as an unmatched prefix.
// What is dropped does not depend on the content (no prefix oracle):
// the cut body is always the longest form minus one byte shorter.
func TestWebSocketRefusedBodyCutGuarded(t *testing.T) {
	w := newWSFixture(t, nil)
	for _, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			h := w.issueWS(t, "api.write", "inv-ws-refuse-cut-"+scheme)
			u := scheme + "://api.example.com:" + strconv.Itoa(w.ws.Port) + "/refuse-echo"
			_, resp, err := w.dialGoURL(t, u, h, &websocket.DialOptions{})
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("want the upstream's 403, got %v %v", err, resp)
			}
			body, _ := io.ReadAll(resp.Body)
			prefix := testSecret[:len(testSecret)-1]
			keep := newEchoForms(secretForms(testSecret)).keep
			if !strings.HasPrefix(string(body), "xxxx") || strings.Contains(string(body), prefix) || len(body) != 1024-keep {
				t.Fatalf("the refused handshake's body carries part of the secret: %q", body[max(0, len(body)-40):])
			}
		})
	}
}

// A refused handshake's answer compressed anyway (no one asked for it)
// cannot be scanned: it is refused as any other compressed response is,
// rather than handed to the plugin to decompress.
func TestWebSocketRefusedCompressedAnswer(t *testing.T) {
	w := newWSFixture(t, nil)
	for _, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			h := w.issueWS(t, "api.write", "inv-ws-refuse-gz-"+scheme)
			u := scheme + "://api.example.com:" + strconv.Itoa(w.ws.Port) + "/refuse-gzip"
			_, resp, err := w.dialGoURL(t, u, h, &websocket.DialOptions{})
			if err == nil || resp == nil {
				t.Fatalf("want a refusal, got %v %v", err, resp)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.Header.Get("Content-Encoding") == "gzip" {
				if zr, zerr := gzip.NewReader(bytes.NewReader(body)); zerr == nil {
					body, _ = io.ReadAll(zr)
				}
			}
			if strings.Contains(string(body), testSecret) || resp.Header.Get(HeaderError) != CodeUnscannable {
				t.Fatalf("got %d %q: %q", resp.StatusCode, resp.Header.Get(HeaderError), body)
			}
		})
	}
}

// A handshake whose secret is injected into the query (kind query) and
// whose upstream cannot be reached must not put the secret in the audit
// line: the HTTP client's error quotes the whole URL.
func TestWebSocketDialErrorKeepsSecretOutOfAudit(t *testing.T) {
	w := newWSFixture(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().(*net.TCPAddr).Port
	l.Close()
	for _, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			h := w.issueAt(t, "api.query", "inv-ws-dead-"+scheme, dead)
			u := scheme + "://api.example.com:" + strconv.Itoa(dead) + "/ws"
			_, resp, err := w.dialGoURL(t, u, h, &websocket.DialOptions{})
			if err == nil || resp == nil || resp.Header.Get(HeaderError) != CodeUpstreamUnreachable {
				t.Fatalf("want upstream_unreachable, got %v %v", err, resp)
			}
			waitAudit(t, w.fixture, `"code":"`+CodeUpstreamUnreachable+`"`, `"port":`+strconv.Itoa(dead))
			if strings.Contains(w.audit.String(), testSecret) {
				t.Fatalf("the audit holds the secret:\n%s", w.audit.String())
			}
		})
	}
}
