package proxy

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/internal/tracing/tracingtest"
)

// msgEvents are a span's message events as "TYPE id size".
func msgEvents(s tracingtest.Span) []string {
	var out []string
	for _, e := range s.Raw.Events {
		if e.Name != eventMessage {
			continue
		}
		a := map[string]string{}
		for _, kv := range e.Attributes {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				a[kv.Key] = strconv.FormatInt(v.IntValue, 10)
			} else {
				a[kv.Key] = kv.Value.GetStringValue()
			}
		}
		out = append(out, strings.Join([]string{a["rpc.message.type"], a["rpc.message.id"], a["rpc.message.uncompressed_size"]}, " "))
	}
	return out
}

// noSecretIn fails t when a span carries the secret or one of handles.
func noSecretIn(t *testing.T, spans []tracingtest.Span, handles ...string) {
	t.Helper()
	for _, s := range spans {
		for _, v := range s.Strings() {
			for _, bad := range append([]string{testSecret}, handles...) {
				if strings.Contains(v, bad) {
					t.Errorf("span %s carries a secret or handle in %q", s.Name, v)
				}
			}
		}
	}
}

// A gRPC call's request span counts its messages both ways and has an
// event per message with its direction, number and size; what the
// messages held is not in it.
func TestTraceGRPCMessages(t *testing.T) {
	rcv := tracingtest.NewReceiver(t)
	tr := newTracing(t, tracing.Config{Endpoint: rcv.URL()})
	g := newGRPCFixtureWith(t, fixtureOpts{tracing: tr})
	h := g.issueGRPC(t, "api.write", "inv-grpc-trace")
	g.run(t, grpcClients()[0], g.target(), h, "all", "", nil)
	waitAudit(t, g.fixture, `"path":"/t.T/Unary"`, `"status":200`)
	egressLines(t, g.fixture, 6)
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	noSecretIn(t, spans, h)
	// The calls of the scenario, by messages sent and received: unary
	// (twice), fail (no answer message), server, client and bidi
	// streaming.
	var counts []string
	var bidi tracingtest.Span
	for _, s := range spans {
		if s.Name != spanRequest || s.Attrs["rpc.system"] != "grpc" {
			continue
		}
		c := s.Attrs["airlock.grpc.messages_sent"] + "/" + s.Attrs["airlock.grpc.messages_received"]
		counts = append(counts, c)
		if c == "3/3" {
			bidi = s
		}
	}
	slices.Sort(counts)
	if got := strings.Join(counts, " "); got != "1/0 1/1 1/1 1/3 3/1 3/3" {
		t.Fatalf("gRPC request spans' messages sent/received: %s", got)
	}
	// "x", "docs", "echo" go up; "bidi:x", "bidi:docs" and the redacted
	// echo come back.
	ev := msgEvents(bidi)
	var sent []string
	received := 0
	for _, e := range ev {
		if strings.HasPrefix(e, "SENT ") {
			sent = append(sent, e)
		} else if strings.HasPrefix(e, "RECEIVED ") {
			received++
		}
	}
	if got := strings.Join(sent, ","); got != "SENT 1 1,SENT 2 4,SENT 3 4" || received != 3 || len(ev) != 6 {
		t.Fatalf("bidi call's message events %q", ev)
	}
}

// A relayed WebSocket is a span of its own under its handshake's request
// span (which has the upstream dial and exchange below it): it counts
// what the closing audit line counts, says who closed it, and has an
// event per message.
func TestTraceWebSocket(t *testing.T) {
	rcv := tracingtest.NewReceiver(t)
	tr := newTracing(t, tracing.Config{Endpoint: rcv.URL()})
	w := newWSFixtureWith(t, fixtureOpts{tracing: tr}, nil)
	h := w.issueWS(t, "api.write", "inv-ws-trace")
	c, resp, err := w.dialGo(t, "ws", h)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer c.CloseNow()
	if got := wsRoundTrip(t, c, websocket.MessageText, "hello"); got != "echo:hello" {
		t.Fatalf("got %q", got)
	}
	if got := wsRoundTrip(t, c, websocket.MessageText, "auth"); !redacted(got) {
		t.Fatalf("the echo was not redacted: %q", got)
	}
	if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"closed_by":"plugin"`)
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	noSecretIn(t, spans, h)
	byName := map[string]tracingtest.Span{}
	children := map[string][]string{}
	for _, s := range spans {
		byName[s.Name] = s
		children[s.ParentSpanID] = append(children[s.ParentSpanID], s.Name)
	}
	req, ws := byName[spanRequest], byName[spanWebSocket]
	if req.SpanID == "" || ws.ParentSpanID != req.SpanID || req.Attrs["http.response.status_code"] != "101" {
		t.Fatalf("spans %+v", spans)
	}
	kids := children[req.SpanID]
	slices.Sort(kids)
	if got := strings.Join(kids, ","); got != strings.Join([]string{spanSecret, spanDial, spanExchange, spanWebSocket}, ",") {
		t.Errorf("the handshake's child spans: %s", got)
	}
	want := map[string]string{"airlock.websocket.messages_up": "2", "airlock.websocket.messages_down": "2",
		"airlock.websocket.closed_by": "plugin", "airlock.websocket.close_code": "1000", "airlock.echo_redactions": "1"}
	for k, v := range want {
		if ws.Attrs[k] != v {
			t.Errorf("websocket span %s = %q, want %q", k, ws.Attrs[k], v)
		}
	}
	if ev := msgEvents(ws); len(ev) != 4 || ev[0] != "SENT 1 5" || ev[1] != "RECEIVED 1 10" {
		t.Errorf("websocket message events %q", ev)
	}
}

// traceOne has record fill a traced request's record, whose span is
// named name, and returns that span as the receiver got it.
func traceOne(t *testing.T, name string, record func(rt *reqTrace)) tracingtest.Span {
	t.Helper()
	rcv := tracingtest.NewReceiver(t)
	tr := newTracing(t, tracing.Config{Endpoint: rcv.URL()})
	ctx, sp := tr.Tracer("test").Start(context.Background(), name)
	record(&reqTrace{ctx: ctx, span: sp, recording: true})
	sp.End()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	return spans[0]
}

// Message events are in the order the messages were read, whichever
// goroutine recorded its message first: a WebSocket pump records a
// message once it is relayed, and the answer to it may be relayed back
// and recorded by the other pump before.
func TestMessageEventsInReadOrder(t *testing.T) {
	s := traceOne(t, spanWebSocket, func(rt *reqTrace) {
		sent := rt.now()
		rt.messageAt(sent.Add(time.Millisecond), true, false, 10)
		rt.messageAt(sent, false, false, 5)
		rt.endMessages(rt.span)
	})
	if ev := msgEvents(s); !slices.Equal(ev, []string{"SENT 1 5", "RECEIVED 1 10"}) {
		t.Fatalf("message events %q", ev)
	}
}

// However many messages a plugin sends on a traced stream, its span
// keeps maxMessageEvents of them: the counts cover every one, and what
// the proxy holds for the stream does not grow with them.
func TestMessageEventsBounded(t *testing.T) {
	const n = 10 * maxMessageEvents
	s := traceOne(t, spanRequest, func(rt *reqTrace) {
		for i := range n {
			rt.message(i%2 == 1, false, 1)
		}
		if got := cap(rt.msgs.events); got > 2*maxMessageEvents {
			t.Fatalf("%d events held for %d messages", got, n)
		}
		rt.traceGRPC(rt.span)
	})
	if ev := msgEvents(s); len(ev) != maxMessageEvents {
		t.Errorf("%d message events, want %d", len(ev), maxMessageEvents)
	}
	if s.Attrs["airlock.grpc.messages_sent"] != strconv.Itoa(n/2) || s.Attrs["airlock.grpc.messages_received"] != strconv.Itoa(n/2) {
		t.Errorf("counts %q %q, want %d each", s.Attrs["airlock.grpc.messages_sent"], s.Attrs["airlock.grpc.messages_received"], n/2)
	}
}
