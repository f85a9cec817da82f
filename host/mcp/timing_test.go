package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/host/policy"
)

// A call approved while it waits within Options.ApprovalHold runs to its
// end: the hold ends with the wait for approval, it does not cancel the
// call at the plugin, nor is the call then said to wait for approval.
func TestApprovedWithinHoldRunsToTheEnd(t *testing.T) {
	const hold = 300 * time.Millisecond
	started := make(chan struct{}, 1)
	f := newFixtureOpts(t, hostmcp.Options{ApprovalHold: hold}, approvalPolicy, func(h *host.Host) error {
		return h.Add("stub", host.KindExecuta, func(context.Context) (host.Runtime, error) {
			// The plugin takes longer than the hold.
			return &stub{exited: make(chan struct{}), risk: policy.RiskPrivileged, slow: 4 * hold, started: started}, nil
		})
	}, "agent")
	progress := make(chan string, 8)
	cs := connect(t, f.url, f.tokens["agent"], &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		}})
	waitTool(t, cs, nil, "stub__echo", true)
	ctx := context.Background()
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": "rm"}}
		params.SetProgressToken("p1")
		res, err := cs.CallTool(ctx, params)
		done <- answer{res, err}
	}()
	var id string
	select {
	case msg := <-progress:
		approvals, err := f.ledger.ListApprovals(ctx)
		if err != nil || len(approvals) != 1 {
			t.Fatalf("approvals after %q: %v %v", msg, approvals, err)
		}
		id = approvals[0].ID
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification for the held call")
	}
	if _, err := f.ledger.DecideApproval(ctx, id, "bob", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	select {
	case <-started:
	default:
		t.Fatalf("the approved call did not reach the plugin: %+v", a.res.StructuredContent)
	}
	if out, _ := a.res.StructuredContent.(map[string]any); a.res.IsError || out["status"] != "STATUS_SUCCEEDED" {
		t.Fatalf("a call approved within the hold: %+v", out)
	}
}
