package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
)

// errHeld ends the wait of a call held for approval past
// Options.ApprovalHold: the approval stays pending for a retry.
var errHeld = errors.New("the call waits for approval")

// MaxProgressMessage bounds the plugin's text in a progress notification.
const MaxProgressMessage = 512

// handler runs tools/call of plugin's method through the host's invoke
// path, for the principal the session authenticated as, acting for
// itself.
func (s *Server) handler(plugin, method string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, ok := principalOf(req)
		if !ok {
			return refused(control.Event{Error: "unauthenticated", Detail: "the session authenticated no principal"}), nil
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer s.track(req.Session.ID(), p.ID, cancel)()
		prog := &progress{ctx: ctx, req: req}
		var (
			mu      sync.Mutex
			pending *host.ApprovalPending
			hold    *time.Timer
			// admitted: the wait for approval is over and the call
			// goes to the plugin; the hold must not cancel it then,
			// nor may its end be told as "pending".
			admitted bool
		)
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			if hold != nil {
				hold.Stop()
			}
		}()
		args := req.Params.Arguments
		out, err := s.h.Invoke(ctx, plugin, host.InvokeRequest{Method: method, JSON: args,
			Deadline: time.Now().Add(s.opts.callTimeout()), Caller: p,
			Actor: host.Actor{Kind: control.ActorPrincipal, Principal: p.ID},
			OnRunning: func(m host.Progress) {
				msg := "running"
				for _, d := range m.Diagnostics {
					msg += " [plugin, untrusted: " + quoted(d.Code) + ": " + quoted(d.Message) + "]"
					if len(msg) > MaxProgressMessage {
						break
					}
				}
				prog.send(inert(msg, MaxProgressMessage))
			},
			OnPending: func(a host.ApprovalPending) {
				prog.send(fmt.Sprintf("pending approval %s: %d approval(s) by principals other than the caller, until %s",
					a.ApprovalID, a.Required, a.ExpiresAt.UTC().Format(time.RFC3339)))
				mu.Lock()
				defer mu.Unlock()
				pending = &a
				if s.opts.ApprovalHold <= 0 {
					cancel(errHeld)
					return
				}
				hold = time.AfterFunc(s.opts.ApprovalHold, func() {
					mu.Lock()
					defer mu.Unlock()
					if !admitted {
						cancel(errHeld)
					}
				})
			},
			OnAdmitted: func() {
				mu.Lock()
				defer mu.Unlock()
				admitted = true
				if hold != nil {
					hold.Stop()
				}
			}})
		mu.Lock()
		held := pending
		if admitted {
			held = nil
		}
		mu.Unlock()
		if err != nil {
			if held != nil && (errors.Is(err, errHeld) || errors.Is(err, context.DeadlineExceeded)) {
				s.log.Info("MCP call waits for approval", "principal", p.ID, "plugin", plugin, "approval", held.ApprovalID)
				return pendingResult(*held), nil
			}
			r := control.Refusal(err)
			s.log.Info("MCP call refused", "principal", p.ID, "plugin", plugin, "code", r.Error)
			return refused(r), nil
		}
		s.log.Info("MCP call", "principal", p.ID, "plugin", plugin, "invocation_id", out.InvocationID, "status", string(out.Status))
		return outcomeResult(plugin, out), nil
	}
}

// progress sends notifications/progress for a call whose client asked
// for them (a progress token); each one counts up.
type progress struct {
	ctx context.Context
	req *mcp.CallToolRequest
	mu  sync.Mutex
	n   float64
}

func (p *progress) send(msg string) {
	tok := p.req.Params.GetProgressToken()
	if tok == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	_ = p.req.Session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p.n, Message: msg})
}

// outcomeResult is the outcome as a tool result: the host's fields and
// the plugin's result, marked as the plugin's. A call that failed, was
// cancelled or in which the plugin overstepped its authority is an
// error result.
func outcomeResult(plugin string, out *host.Outcome) *mcp.CallToolResult {
	body := map[string]any{"invocation_id": out.InvocationID, "status": string(out.Status),
		"untrusted_source": "plugin " + plugin}
	if len(out.Data) > 0 {
		body["result"] = out.Data
	}
	if len(out.Diagnostics) > 0 {
		body["diagnostics"] = out.Diagnostics
	}
	if len(out.EvidenceIDs) > 0 {
		body["evidence_ids"] = out.EvidenceIDs
	}
	if out.Reason != "" {
		body["reason"] = out.Reason
	}
	if out.Violated {
		body["violated"], body["violations"] = true, out.Violations
	}
	text, _ := json.Marshal(body)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: body,
		IsError: out.Status == host.CallFailed || out.Status == host.CallCancelled || out.Violated,
		Meta:    mcp.Meta{MetaUntrusted: []string{"result", "diagnostics"}, MetaPlugin: plugin}}
}

// refused is a refusal as an error result: the control API's code and
// detail, host-authored, never a value of the request.
func refused(r control.Event) *mcp.CallToolResult {
	body := map[string]any{"error": r.Error, "detail": r.Detail}
	if r.Budget != "" {
		body["budget"], body["dimension"] = r.Budget, r.Dimension
	}
	return &mcp.CallToolResult{IsError: true, StructuredContent: body, Meta: mcp.Meta{MetaRefusal: r.Error},
		Content: []mcp.Content{&mcp.TextContent{Text: "Airlock refused the call: " + r.Error + ": " + r.Detail}}}
}

// pendingResult says the call waits for approval: not an error; the same
// call made again once the approval is given runs.
func pendingResult(a host.ApprovalPending) *mcp.CallToolResult {
	body := map[string]any{"status": "pending_approval", "approval": a.ApprovalID, "required": a.Required,
		"expires_at": a.ExpiresAt.UTC().Format(time.RFC3339)}
	return &mcp.CallToolResult{StructuredContent: body, Meta: mcp.Meta{"dev.airlock/pending_approval": a.ApprovalID},
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("The call waits for approval %s (%d approval(s) needed, until %s). "+
			"Nothing was sent to the plugin. Make the same call again, with the same arguments, once it is approved.",
			a.ApprovalID, a.Required, a.ExpiresAt.UTC().Format(time.RFC3339))}}}
}
