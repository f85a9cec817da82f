package proxy

import (
	"context"
	"errors"
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
