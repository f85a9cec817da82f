package mcp_test

import (
	"context"
	"net/http"
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
	progress, done := callInBackground(t, f)
	ctx := context.Background()
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

// A client that ends its session, or cancels its call, while the call
// runs at the plugin ends the call: nothing keeps running for a
// requester that left.
func TestClientGoneEndsCall(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			started, ended := make(chan struct{}, 1), make(chan host.CallStatus, 1)
			f := newFixture(t, allowAll, func(h *host.Host) error {
				return h.Add("stub", host.KindExecuta, func(context.Context) (host.Runtime, error) {
					return &stub{exited: make(chan struct{}), risk: policy.RiskRead, slow: time.Hour, started: started, ended: ended}, nil
				})
			}, "agent", "other")
			cs := connect(t, f.url, f.tokens["agent"], nil)
			waitTool(t, cs, nil, "stub__echo", true)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{}})
			}()
			<-started
			if how == "cancel" {
				cancel()
			} else {
				// What a client's DELETE of its session does (the Go
				// SDK's client sends it only once its calls end).
				// Another principal's DELETE of the session ends nothing.
				if resp := deleteSession(t, f.url, f.tokens["other"], cs.ID()); resp.StatusCode != http.StatusForbidden {
					t.Fatalf("another principal's DELETE: %d", resp.StatusCode)
				}
				select {
				case <-ended:
					t.Fatal("another principal's DELETE ended the call")
				default:
				}
				dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
				defer dcancel()
				req, _ := http.NewRequestWithContext(dctx, http.MethodDelete, f.url, nil)
				req.Header.Set("Authorization", "Bearer "+f.tokens["agent"])
				req.Header.Set("Mcp-Session-Id", cs.ID())
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("the session's DELETE did not answer while its call ran: %v", err)
				}
				resp.Body.Close()
			}
			select {
			case st := <-ended:
				if st != host.CallCancelled {
					t.Fatalf("status %s", st)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the call still runs at the plugin after the client left")
			}
			cancel()
			<-done
		})
	}
}

// deleteSession sends a DELETE of session with token.
func deleteSession(t *testing.T, url, token, session string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
