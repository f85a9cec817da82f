package executa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/randid"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/tokens"
)

// InvokeRequest is one tool call.
type InvokeRequest struct {
	// InvokeID is the host's invocation id (sent as invoke_id); a random
	// one when empty.
	InvokeID string
	// Deadline, when set, bounds the call besides the tool's timeout.
	Deadline  time.Time
	Tool      string
	Arguments json.RawMessage
	UserID    string
	// AppID and AppSlug are set only when the invoke comes from an App
	// context the host attests.
	AppID, AppSlug string
	// Scope, when set, completes each handle request of the invoke with
	// the decision's context (run, access grant, budgets, residency).
	Scope func(*broker.IssueRequest)
	// SpendTokens, when set, checks (tokens 0) or charges the host's
	// budgets of the call with the sampling tokens it used.
	SpendTokens func(ctx context.Context, tokens int64) error
	// OnProgress, when set, sees each progress event of this invoke the
	// limits kept (see Process.Progress), in order, on a goroutine of
	// its own; those the plugin sent before its answer are seen before
	// Invoke returns. An event belongs to the invoke it names, or, naming
	// none, to the only invoke in flight.
	OnProgress func(ProgressEvent)
}

// InvokeResult is the plugin's answer.
type InvokeResult struct {
	InvokeID   string
	Success    bool            `json:"success"`
	Data       json.RawMessage `json:"data,omitempty"`
	Error      json.RawMessage `json:"error,omitempty"`
	DurationMS float64         `json:"duration_ms,omitempty"`
}

// Invoke calls a tool with a freshly built context: credentials (handles),
// invoke_id, and for v2 sessions the tokens the manifest declares. Handles
// are revoked when the invoke ends.
func (p *Process) Invoke(ctx context.Context, req InvokeRequest) (*InvokeResult, error) {
	tool, ok := p.Manifest.Tool(req.Tool)
	if !ok {
		return nil, ErrUnknownTool
	}
	if err := p.Unbound(); err != nil {
		return nil, err
	}
	timeout := p.opts.Timeouts.Invoke
	if tool.Timeout > 0 {
		timeout = time.Duration(tool.Timeout) * time.Second
	}
	deadline := time.Now().Add(timeout)
	if !req.Deadline.IsZero() && req.Deadline.Before(deadline) {
		deadline = req.Deadline
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	invokeID := req.InvokeID
	if invokeID == "" {
		invokeID = randid.Hex(16)
	}
	binding := tokens.Binding{UserID: req.UserID, ExecutaToolID: p.cfg.Name + "/" + req.Tool, ToolInvokeID: invokeID}
	if binding.UserID == "" {
		binding.UserID = "local"
	}
	c := map[string]any{"invoke_id": invokeID}
	// The invocation span's traceparent, when the host traces: the
	// plugin's own spans, and its requests through the proxy with a
	// traceparent header, join the trace. SDKs ignore a key they do not
	// read.
	if tp := tracing.Traceparent(ctx); tp != "" {
		c["traceparent"] = tp
	}
	live := &liveInvoke{ctx: ctx, id: invokeID, binding: binding, spend: req.SpendTokens}
	// The invocation's handles are revoked when it ends, by the invoke
	// path that opened it (host.EndInvocation).
	creds, err := p.credentials(ctx, invokeID, deadline, req.Scope)
	if err != nil {
		return nil, err
	}
	c["credentials"] = creds
	if p.Protocol == ProtocolV2 && p.opts.Tokens != nil {
		if _, negotiated := p.Capabilities["sampling"]; negotiated && p.Manifest.Has(CapSample) {
			tok, err := p.opts.Tokens.MintToken(ctx, broker.TokenRequest{Audience: tokens.AudienceSampling, Binding: binding,
				Deadline: deadline, MaxTokensPerCall: p.opts.MaxTokensPerCall, MaxCallsPerInvoke: p.opts.MaxCallsPerInvoke})
			if err != nil {
				return nil, fmt.Errorf("sampling token: %w", err)
			}
			c["sampling_token"] = tok.Raw
			live.samplingToken = tok.Raw
		}
		if p.Manifest.wantsStorageToken() {
			tok, err := p.opts.Tokens.MintToken(ctx, broker.TokenRequest{Audience: tokens.AudienceStorage, Binding: binding,
				Deadline: deadline, AppID: req.AppID, AppSlug: req.AppSlug})
			if err != nil {
				return nil, fmt.Errorf("storage token: %w", err)
			}
			c["storage_token"] = tok.Raw
			live.storageToken = tok.Raw
		}
	}
	args := req.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if req.OnProgress != nil {
		live.progress = newProgressSink(req.OnProgress)
	}
	p.mu.Lock()
	p.invokes[invokeID] = live
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.invokes, invokeID)
		p.mu.Unlock()
		if live.progress != nil {
			live.progress.close()
		}
	}()
	// invoke_id in params too: SDKs read it there (and some only there).
	m, err := p.call(ctx, "invoke", map[string]any{"tool": req.Tool, "arguments": args, "context": c, "invoke_id": invokeID},
		time.Until(deadline))
	if errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		// The tool ran past its deadline (ours or the caller's): the host
		// sends SIGTERM; the supervisor restarts the plugin.
		p.proc.Signal(syscall.SIGTERM)
		return nil, ErrTimeout
	}
	if err != nil {
		return nil, err
	}
	if m.Error == fileTransportRefused {
		return nil, ErrFileTransportRefused
	}
	if m.Error == duplicateKeyRefused {
		return nil, ErrDuplicateKey
	}
	if m.Error == frameTooLargeRefused {
		return nil, ErrResponseTooLarge
	}
	if m.Error != nil {
		obj, _ := json.Marshal(m.Error)
		return nil, &ToolError{Code: m.Error.Code, Object: obj}
	}
	res := &InvokeResult{InvokeID: invokeID}
	if err := json.Unmarshal(m.Result, res); err != nil {
		return nil, errors.New("invoke result is not an object")
	}
	return res, nil
}

// credentials delivers declared credentials: a handle per brokered one,
// the value for the explicit raw opt-in (logged).
func (p *Process) credentials(ctx context.Context, invokeID string, deadline time.Time,
	scope func(*broker.IssueRequest)) (map[string]string, error) {
	out := map[string]string{}
	for i, c := range p.Manifest.Credentials {
		if intent, ok := p.cfg.Credentials[c.Name]; ok && p.opts.Broker != nil {
			// No destinations: the broker uses the intent binding's.
			req := broker.IssueRequest{PluginID: p.cfg.Name, InvocationID: invokeID, Intent: intent, Deadline: deadline}
			if scope != nil {
				scope(&req)
			}
			ictx, endSpan := host.StartCredentialSpan(ctx, trace.SpanFromContext(ctx), p.cfg.Name, invokeID, intent)
			iss, err := p.opts.Broker.Issue(ictx, req)
			endSpan(iss.Fingerprint, err)
			if err != nil {
				return nil, fmt.Errorf("credentials[%d]: %w", i, err)
			}
			if p.opts.Record != nil {
				if err := p.opts.Record("credential.issued", invokeID, map[string]any{"credential": c.Name, "intent": intent,
					"handle_fp": iss.Fingerprint, "expires_at": iss.ExpiresAt}); err != nil {
					return nil, fmt.Errorf("credentials[%d]: %w", i, err)
				}
			}
			out[c.Name] = iss.Handle
			continue
		}
		if intent, ok := p.cfg.RawCredentials[c.Name]; ok && p.opts.Secrets != nil {
			s, err := p.opts.Secrets.SecretFor(ctx, intent, false)
			if err != nil {
				return nil, fmt.Errorf("credentials[%d]: %w", i, err)
			}
			p.log.Warn("raw secret delivered to plugin (explicit opt-in)", "credential", c.Name, "intent", intent)
			out[c.Name] = s.Value
			continue
		}
		if v, ok := p.setting(c); ok {
			out[c.Name] = v
		}
	}
	return out, nil
}

// setting is the plain value of a non-sensitive credential: the
// operator's, else the manifest's default.
func (p *Process) setting(c Credential) (string, bool) {
	if c.IsSensitive() {
		return "", false
	}
	if v, ok := p.cfg.Settings[c.Name]; ok {
		return v, true
	}
	if len(c.Default) > 0 {
		return c.DefaultString(), true
	}
	return "", false
}

// Unbound reports the required credentials that nothing delivers — no
// intent, no raw opt-in, no setting or default — as an *UnboundError;
// calls are refused while there is one (the operator is told at start).
func (p *Process) Unbound() error {
	var out []int
	for i, c := range p.Manifest.Credentials {
		_, brokered := p.cfg.Credentials[c.Name]
		_, raw := p.cfg.RawCredentials[c.Name]
		_, set := p.setting(c)
		if c.Required && !brokered && !raw && !set {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &UnboundError{Index: out}
}
