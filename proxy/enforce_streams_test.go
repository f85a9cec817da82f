package proxy

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// A WebSocket's handshake counts one egress request; its messages'
// bytes, both ways, count when it closes, so the next handshake is
// refused once the bytes went over. A handle in a message is a
// violation.
func TestEgressBudgetWebSocket(t *testing.T) {
	w := newWSFixtureWith(t, fixtureOpts{ledger: ledgerForTest()}, nil)
	l := w.proxy.ledger
	key := broker.BudgetKeyInvocation("inv-wsb")
	iss, err := w.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-wsb", Intent: "api.write",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: w.ws.Port}}, Deadline: time.Now().Add(time.Minute),
		Budget: []broker.BudgetLine{{Key: key, Limits: broker.Limits{EgressRequests: 5, EgressBytes: 10}}}})
	if err != nil {
		t.Fatal(err)
	}
	c, resp, err := w.dialGo(t, "wss", iss.Handle)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	if got := wsRoundTrip(t, c, websocket.MessageText, "hello"); got != "echo:hello" {
		t.Fatalf("got %q", got)
	}
	if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"closed_by":"plugin"`)
	if got, want := spentOf(t, l, key), (broker.Spend{EgressRequests: 1, EgressBytes: int64(len("hello") + len("echo:hello"))}); got != want {
		t.Fatalf("spent %+v, want %+v", got, want)
	}
	_, resp, err = w.dialGo(t, "wss", iss.Handle)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get(HeaderError) != CodeBudgetExhausted {
		t.Fatalf("over the byte budget: %v %v", err, resp)
	}

	// A handle sent in a message closes the socket and is recorded.
	h := w.issueWS(t, "api.write", "inv-wsv")
	c, resp, err = w.dialGo(t, "wss", h)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte("token "+h)); err != nil {
		t.Fatal(err)
	}
	_, _, _ = c.Read(ctx)
	waitAudit(t, w.fixture, `"msg":"websocket_closed"`, `"closed_by":"handle_in_request"`)
	if got := violationKindsOf(t, l, "inv-wsv"); !slices.Equal(got, []string{"handle_in_request"}) {
		t.Fatalf("violations %v", got)
	}
}

// Each gRPC call through an intercepted tunnel counts one egress request
// and the bytes of its messages both ways; the call after the budget is
// spent ends RESOURCE_EXHAUSTED naming the budget.
func TestEgressBudgetGRPC(t *testing.T) {
	ca := testenv.NewCA(t)
	port := testenv.StartGRPCUpstream(t, ca.Issue(t, "api.example.com"), testSecret)
	f, caFile := newStreamFixture(t, fixtureOpts{ca: ca, ledger: ledgerForTest()}, nil)
	g := &grpcFixture{fixture: f, caFile: caFile, port: port}
	key := broker.BudgetKeyRun("run-grpc")
	iss, err := g.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-grpcb", Intent: "api.write",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: port}}, Deadline: time.Now().Add(time.Minute),
		Budget: []broker.BudgetLine{{Key: key, Limits: broker.Limits{EgressRequests: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	client := grpcClients()[0] // grpc-go
	if r := g.run(t, client, g.target(), iss.Handle, "unary", "", nil)["unary"]; r.Code != 0 {
		t.Fatalf("first call: %+v", r)
	}
	waitAudit(t, f, `"status":200`, `"invocation":"inv-grpcb"`)
	got := spentOf(t, g.proxy.ledger, key)
	if got.EgressRequests != 1 || got.EgressBytes <= 0 {
		t.Fatalf("spent %+v", got)
	}
	r := g.run(t, client, g.target(), iss.Handle, "unary", "", nil)["unary"]
	if r.Code != grpcResourceExhausted || !strings.Contains(r.Message, CodeBudgetExhausted) || !strings.Contains(r.Message, key) {
		t.Fatalf("second call: %+v", r)
	}
}
