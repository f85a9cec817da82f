package proxy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/broker"
)

// slowViolations is a ledger whose violation records take a while, as
// a remote store's do.
type slowViolations struct{ broker.Ledger }

func (l slowViolations) RecordViolation(ctx context.Context, v broker.Violation) error {
	time.Sleep(100 * time.Millisecond)
	return l.Ledger.RecordViolation(ctx, v)
}

// A handle sent in a WebSocket message is in the ledger as a violation
// before the plugin sees its socket closed: a plugin that ends its call
// on the close cannot have the host settle the outcome before the
// violation is there (and so dodge "violated" and its reaction).
func TestWebSocketHandleViolationRecordedBeforeClose(t *testing.T) {
	ledger := slowViolations{newTestLedger()}
	w := newWSFixtureWith(t, fixtureOpts{ledger: ledger}, nil)
	h := w.issueWS(t, "api.write", "inv-ws-leak")
	c, _, err := w.dialGo(t, "wss", h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(context.Background(), websocket.MessageText, []byte("here: "+h)); err != nil {
		t.Fatal(err)
	}
	if ce := readClose(t, c); ce.Code != websocket.StatusPolicyViolation || ce.Reason != "airlock "+CodeHandleInRequest {
		t.Fatalf("close %v", ce)
	}
	if got := violationKindsOf(t, ledger, "inv-ws-leak"); !slices.Contains(got, "handle_in_request") {
		t.Fatalf("when the plugin saw the close, the violations were %v", got)
	}
}
