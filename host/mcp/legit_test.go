package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/host/policy"
)

// A session's standing stream is not cut at the bound of a POST's
// answer: the Go SDK client takes list changes on its session's GET
// stream, and a change long after the call bound and one write timeout
// still reaches it. (The SDK's newer protocol takes them on a
// subscriptions/listen POST instead, which that bound would cut; the
// stateful transport this server uses does not serve it, and clients
// fall back, which this test also checks.)
func TestListenStreamOutlivesCallBound(t *testing.T) {
	const bound = 100 * time.Millisecond
	f := newFixtureOpts(t, hostmcp.Options{CallTimeout: bound, WriteTimeout: bound}, allowAll, nil, "agent")
	changed := make(chan struct{}, 64)
	cs := connect(t, f.url, f.tokens["agent"], &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	if v := cs.InitializeResult().ProtocolVersion; v >= "2026-07-28" {
		t.Fatalf("protocol %s: list changes would come on a POST, under its bound", v)
	}
	if err := addStub(f.h, "early"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no list change for a plugin added at once")
	}
	// The session stays open past a POST's bound.
	time.Sleep(5 * bound)
	for len(changed) > 0 {
		<-changed
	}
	if err := addStub(f.h, "late"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no list change after the POST bound: the session's stream was cut")
	}
}

// A call held for approval, approved, that then reports progress and
// answers a large result halfway through its call timeout is delivered
// whole to the Go SDK client reading at its own pace: the POST's bound
// (the call timeout and one write timeout from the request) leaves it
// room. (Halfway, not later: the rest is room for a loaded machine.)
func TestHeldCallAnsweredLateDelivered(t *testing.T) {
	const (
		callTimeout = 4 * time.Second
		size        = 1 << 20
	)
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", size) + `"}`)
	f := newFixtureOpts(t, hostmcp.Options{CallTimeout: callTimeout, ApprovalHold: callTimeout, WriteTimeout: 300 * time.Millisecond},
		approvalPolicy, func(h *host.Host) error {
			return h.Add("stub", host.KindExecuta, func(context.Context) (host.Runtime, error) {
				return &stub{exited: make(chan struct{}), risk: policy.RiskPrivileged, slow: callTimeout / 2, out: big,
					running: []host.Diagnostic{{Code: "step", Message: "working"}}}, nil
			})
		}, "agent")
	progress, done := callInBackground(t, f)
	ctx := context.Background()
	select {
	case <-progress:
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification for the held call")
	}
	approvals, err := f.ledger.ListApprovals(ctx)
	if err != nil || len(approvals) != 1 {
		t.Fatalf("approvals: %v %v", approvals, err)
	}
	if _, err := f.ledger.DecideApproval(ctx, approvals[0].ID, "bob", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	out, _ := a.res.StructuredContent.(map[string]any)
	if a.res.IsError || out["status"] != "STATUS_SUCCEEDED" {
		t.Fatalf("the late answer: %+v", out)
	}
	raw, _ := json.Marshal(out)
	if len(raw) < size {
		t.Fatalf("the result has %d bytes, want more than %d", len(raw), size)
	}
	if len(progress) == 0 {
		t.Fatal("the plugin's progress did not reach the client")
	}
}

// A call whose request body arrives slowly (within the body's own
// bound: 64 KiB per write timeout) and that then runs most of its call
// timeout is answered: the POST's answer is bounded from the end of its
// body, where the call's own time starts, not from its arrival.
func TestSlowUploadThenLongCallAnswered(t *testing.T) {
	const (
		callTimeout = 2 * time.Second
		writeTO     = time.Second
		piece       = 64 << 10
		pieces      = 5
		gap         = 600 * time.Millisecond // under writeTO per 64 KiB
	)
	f := newFixtureOpts(t, hostmcp.Options{CallTimeout: callTimeout, WriteTimeout: writeTO}, allowAll,
		func(h *host.Host) error {
			return h.Add("stub", host.KindExecuta, func(context.Context) (host.Runtime, error) {
				return &stub{exited: make(chan struct{}), slow: callTimeout * 3 / 4}, nil
			})
		}, "agent")
	session := openSession(t, f, "agent")
	// JSON allows whitespace between tokens: the padding is the upload.
	body := `{"jsonrpc":"2.0","id":2,` + strings.Repeat(" ", pieces*piece) +
		`"method":"tools/call","params":{"name":"stub__echo","arguments":{"say":"hi"}}}`
	u, _ := url.Parse(f.url)
	head := callHead(f, "agent", session, len(body))
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(body); i += piece {
		if i > 0 {
			time.Sleep(gap) // the client's pace, not a wait for the server
		}
		if _, err := io.WriteString(conn, body[i:min(i+piece, len(body))]); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound for the test
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	answer, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), "STATUS_SUCCEEDED") {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, answer, err)
	}
}
