package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// A Go client opens a socket in both modes (ws:// through HTTP_PROXY,
// re-originated as wss://; wss:// in an intercepted tunnel): the secret
// is injected into the handshake, messages go both ways, the upstream's
// subprotocol choice comes through, an echoed secret is redacted (in one
// message, across frames, and its later half across messages), and the
// socket is audited at open and at close with its byte counts.
func TestWebSocketGo(t *testing.T) {
	w := newWSFixture(t, nil)
	for _, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			c, resp, err := w.dialGo(t, scheme, w.issueWS(t, "api.write", "inv-ws-"+scheme))
			if err != nil {
				t.Fatalf("dial: %v (%v)", err, resp)
			}
			defer c.CloseNow()
			if c.Subprotocol() != "chat.v1" {
				t.Fatalf("subprotocol %q", c.Subprotocol())
			}
			if got := w.ws.LastAuth(t); got != "Bearer "+testSecret {
				t.Fatalf("the upstream's handshake had Authorization %q", got)
			}
			if got := wsRoundTrip(t, c, websocket.MessageText, "hello"); got != "echo:hello" {
				t.Fatalf("got %q", got)
			}
			if got := wsRoundTrip(t, c, websocket.MessageBinary, "\x00\x01bin"); got != "\x00\x01bin" {
				t.Fatalf("binary: got %q", got)
			}
			for _, m := range []string{"auth", "split"} {
				if got := wsRoundTrip(t, c, websocket.MessageText, m); !redacted(got) {
					t.Fatalf("%s: the echo was not redacted: %q", m, got)
				}
			}
			first := wsRoundTrip(t, c, websocket.MessageText, "split-msgs")
			_, second, err := c.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if half := testSecret[len(testSecret)/2:]; !strings.HasPrefix(first, "x:") || strings.Contains(string(second), half) {
				t.Fatalf("split across messages: %q then %q", first, second)
			}
			if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
				t.Fatal(err)
			}
			mode := map[string]string{"ws": modePlain, "wss": modeIntercept}[scheme]
			waitAudit(t, w.fixture, `"msg":"egress"`, `"status":101`, `"mode":"`+mode+`"`)
			waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"closed_by":"plugin"`, `"close_code":1000`, `"messages_up":5`, `"mode":"`+mode+`"`)
		})
	}
}

// What a socket may not do: each refusal comes before anything reaches
// the upstream, as the proxy's usual answer.
func TestWebSocketRefusals(t *testing.T) {
	w := newWSFixture(t, nil)
	for _, tc := range []struct {
		name  string
		dests []broker.Destination
		code  string
	}{
		{"path", []broker.Destination{{Host: "api.example.com", Port: w.ws.Port, PathPrefix: "/v1/"}}, CodeDestination},
		{"method", []broker.Destination{{Host: "api.example.com", Port: w.ws.Port, Methods: []string{"POST"}}}, CodeMethodNotDeclared},
	} {
		for _, scheme := range []string{"ws", "wss"} {
			t.Run(tc.name+"/"+scheme, func(t *testing.T) {
				before := w.ws.Handshakes()
				_, resp, err := w.dialGo(t, scheme, w.issueWS(t, "api.write", "inv-ws-refuse-"+tc.name+scheme, tc.dests...))
				if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden || resp.Header.Get(HeaderError) != tc.code {
					t.Fatalf("err %v, resp %+v; want 403 %s", err, resp, tc.code)
				}
				if w.ws.Handshakes() != before {
					t.Fatal("the upstream saw the refused handshake")
				}
			})
		}
	}
	// A malformed handshake is refused before the upstream is dialled.
	for _, hdr := range []http.Header{
		{"Sec-Websocket-Version": {"8"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}},
		{"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"c2hvcnQ="}},
	} {
		req, err := http.NewRequest(http.MethodGet, w.wsURL("http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = hdr
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		before := w.ws.Handshakes()
		resp, err := w.client(w.issueWS(t, "api.write", "inv-ws-malformed")).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(HeaderError) != CodeBadRequest || w.ws.Handshakes() != before {
			t.Fatalf("malformed handshake %v: %d %q", hdr, resp.StatusCode, resp.Header.Get(HeaderError))
		}
	}
	// An undeclared host is refused at the CONNECT (wss) or the
	// handshake (ws).
	h := w.issueWS(t, "api.write", "inv-ws-host", broker.Destination{Host: "other.example.org", Port: w.ws.Port})
	if _, resp, err := w.dialGo(t, "ws", h); err == nil || resp == nil || resp.Header.Get(HeaderError) != CodeDestination {
		t.Fatalf("undeclared host: err %v, resp %+v", err, resp)
	}
	before := w.ws.Handshakes()
	if c, _, err := w.dialGo(t, "wss", h); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		if c != nil {
			c.CloseNow()
		}
		t.Fatalf("undeclared host in a tunnel: err %v", err)
	}
	if w.ws.Handshakes() != before {
		t.Fatal("the upstream saw a handshake for an undeclared host")
	}
}

// readClose reads until the socket's close frame and returns it.
func readClose(t *testing.T, c *websocket.Conn) websocket.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce
		}
		if err != nil {
			t.Fatalf("the socket ended without a close frame: %v", err)
		}
	}
}

// A socket closes with 1008 when its handle is revoked and with 1009
// when a message is over the limit.
func TestWebSocketClosures(t *testing.T) {
	w := newWSFixture(t, func(c *Config) { c.Limits.MaxWebSocketMessage = 1024 })
	for _, scheme := range []string{"ws", "wss"} {
		t.Run("revoked/"+scheme, func(t *testing.T) {
			inv := "inv-ws-revoke-" + scheme
			c, _, err := w.dialGo(t, scheme, w.issueWS(t, "api.write", inv))
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			if err := c.Write(context.Background(), websocket.MessageText, []byte("hold")); err != nil {
				t.Fatal(err)
			}
			if _, err := w.b.RevokeInvocation(context.Background(), inv); err != nil {
				t.Fatal(err)
			}
			if ce := readClose(t, c); ce.Code != websocket.StatusPolicyViolation || ce.Reason != "airlock "+CodeHandleInvalid {
				t.Fatalf("close %v", ce)
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		c, _, err := w.dialGo(t, "wss", w.issueWS(t, "api.write", "inv-ws-big"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		_ = c.Write(context.Background(), websocket.MessageText, make([]byte, 2048))
		if ce := readClose(t, c); ce.Code != websocket.StatusMessageTooBig {
			t.Fatalf("close %v", ce)
		}
	})
	waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"closed_by":"revoked"`, `"close_code":1008`)
}

// A socket with no message either way for websocket_idle_timeout closes
// with 1001 on both sides.
func TestWebSocketIdle(t *testing.T) {
	w := newWSFixture(t, func(c *Config) { c.Limits.WebSocketIdleTimeout = 200 * time.Millisecond })
	c, _, err := w.dialGo(t, "wss", w.issueWS(t, "api.write", "inv-ws-idle"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if ce := readClose(t, c); ce.Code != websocket.StatusGoingAway || ce.Reason != "airlock idle timeout" {
		t.Fatalf("close %v", ce)
	}
	waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"closed_by":"idle"`, `"close_code":1001`)
}

// A socket closes with 1008 once its handle expires (the broker's clock
// passes the invocation deadline), as when it is revoked.
func TestWebSocketHandleExpires(t *testing.T) {
	clock := testenv.NewClock()
	w := newWSFixtureWith(t, fixtureOpts{now: clock.Now}, nil)
	iss, err := w.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-ws-expire", Intent: "api.write",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: w.ws.Port}}, Deadline: clock.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := w.dialGo(t, "wss", iss.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if got := wsRoundTrip(t, c, websocket.MessageText, "hello"); got != "echo:hello" {
		t.Fatalf("got %q", got)
	}
	clock.Advance(2 * time.Minute)
	if ce := readClose(t, c); ce.Code != websocket.StatusPolicyViolation || ce.Reason != "airlock "+CodeHandleInvalid {
		t.Fatalf("close %v", ce)
	}
}

// The WebSocket and stream limits are checked with the others; the
// stream check may not be slower than a second, the revocation promise.
func TestWebSocketLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*LimitsConfig)
		want   string
	}{
		{"message", func(l *LimitsConfig) { l.MaxWebSocketMessage = -1 }, "proxy.limits.max_websocket_message: must not be negative"},
		{"idle", func(l *LimitsConfig) { l.WebSocketIdleTimeout = -time.Second }, "proxy.limits.websocket_idle_timeout: must not be negative"},
		{"stream check negative", func(l *LimitsConfig) { l.StreamCheck = -time.Millisecond }, "proxy.limits.stream_check: must be between"},
		{"stream check over a second", func(l *LimitsConfig) { l.StreamCheck = MaxStreamCheck + time.Millisecond }, "proxy.limits.stream_check: must be between"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{}.WithDefaults()
			tc.mutate(&c.Limits)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}
