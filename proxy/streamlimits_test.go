package proxy

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/broker"
)

// An open socket holds one of its plugin's concurrency slots until it
// closes: with a cap of one, a second socket (or any request) is refused
// while the first is open, and admitted after.
func TestWebSocketHoldsConcurrencySlot(t *testing.T) {
	w := newWSFixture(t, func(c *Config) { c.Limits.PerPluginConcurrency = 1 })
	first, _, err := w.dialGo(t, "wss", w.issueWS(t, "api.write", "inv-slot-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := wsRoundTrip(t, first, websocket.MessageText, "hello"); got != "echo:hello" {
		t.Fatalf("got %q", got)
	}
	_, resp, err := w.dialGo(t, "wss", w.issueWS(t, "api.write", "inv-slot-2"))
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get(HeaderError) != CodeTooManyConcurrent {
		t.Fatalf("a second socket beside the first: err %v, resp %+v", err, resp)
	}
	if err := first.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"invocation":"inv-slot-1"`)
	second, _, err := w.dialGo(t, "wss", w.issueWS(t, "api.write", "inv-slot-3"))
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	second.CloseNow()
}

// A socket in a tunnel opened with the plugin pass closes with 1008 when
// the pass is revoked, though its own handle is still live.
func TestWebSocketLostPass(t *testing.T) {
	w := newWSFixture(t, nil)
	iss, err := w.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "pass-ws", Pass: true,
		Destinations: []broker.Destination{{Host: "api.example.com", Port: w.ws.port}}})
	if err != nil {
		t.Fatal(err)
	}
	h := w.issueWS(t, "api.placeholder", "inv-ws-pass")
	c, resp, err := w.dialGoWith(t, "wss", iss.Handle, http.Header{"Authorization": {"Bearer " + h}})
	if err != nil {
		t.Fatalf("dial: %v (%+v)", err, resp)
	}
	defer c.CloseNow()
	if a := w.ws.lastAuth(t); a != "Bearer "+testSecret {
		t.Fatalf("the upstream saw Authorization %q", a)
	}
	if _, err := w.b.RevokeInvocation(context.Background(), "pass-ws"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err = c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation {
		t.Fatalf("after the pass was revoked: %v", err)
	}
}
