package executa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/host/executa/sampling"
	"github.com/airlock-dev/airlock/tokens"
)

// Sampling error codes of the notes.
const (
	CodeSamplingNotGranted    = -32001
	CodeSamplingQuota         = -32002
	CodeSamplingInvalid       = -32004
	CodeSamplingTimeout       = -32005
	CodeSamplingMaxCalls      = -32006
	CodeSamplingMaxTokens     = -32007
	CodeSamplingUnsupportedRF = -32010
)

// Sampling limits.
const (
	MaxSamplingMessages   = 64
	MaxSamplingTokens     = 8192
	MaxCallsPerInvoke     = 8
	MaxTokensPerInvoke    = 32000
	MaxSchemaBytes        = 32 << 10
	MaxSchemaDepth        = 8
	MaxSchemaNodes        = 512
	DefaultSamplingWindow = sampling.DefaultTimeout
)

var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// samplingBudget is one invoke's use of sampling.
type samplingBudget struct {
	mu      sync.Mutex
	calls   int
	tokens  int // settled, plus reserved for the calls in flight
	storage int // storage RPCs
	// inflight counts the sampling calls admitted and not yet settled.
	inflight int
	// parallel says the backend has been seen to count no more than a
	// call reserves: calls are then admitted side by side. Until then
	// (an invoke's first call), and again after a call settles above its
	// reservation, a call is admitted only when none is in flight, so
	// the budget is passed by at most one call's overshoot.
	parallel bool
	// idle, when set, is closed once no call is in flight.
	idle chan struct{}
}

// admit reserves tokens for one call: refused past the call or token
// cap; while calls are serialised it waits until none is in flight (or
// ctx ends).
func (b *samplingBudget) admit(ctx context.Context, maxCalls, reserved int) *RPCError {
	for {
		b.mu.Lock()
		switch {
		case b.calls >= maxCalls:
			b.mu.Unlock()
			return rpcError(CodeSamplingMaxCalls, "sampling call limit for this invoke reached", "MAX_CALLS_EXCEEDED")
		case b.tokens+reserved > MaxTokensPerInvoke:
			b.mu.Unlock()
			return rpcError(CodeSamplingMaxTokens, "sampling token budget for this invoke spent", "MAX_TOKENS_EXCEEDED")
		case b.parallel || b.inflight == 0:
			b.calls++
			b.tokens += reserved
			b.inflight++
			b.mu.Unlock()
			return nil
		}
		if b.idle == nil {
			b.idle = make(chan struct{})
		}
		idle := b.idle
		b.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return rpcError(CodeSamplingTimeout, "the invoke ended before the sampling call could be sent", "TIMEOUT")
		}
	}
}

// settle replaces a call's reservation with what it used. counted says
// the call reached the backend and used is its count: a count above the
// reservation serialises the calls that follow, one within it lets them
// run side by side.
func (b *samplingBudget) settle(reserved, used int, counted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens += used - reserved
	b.inflight--
	if counted {
		b.parallel = used <= reserved
	}
	if b.inflight == 0 && b.idle != nil {
		close(b.idle)
		b.idle = nil
	}
}

// sample handles sampling/createMessage after the gates passed.
func (p *Process) sample(ctx context.Context, inv *liveInvoke, params json.RawMessage) (any, *RPCError) {
	bad := func(msg string) *RPCError { return rpcError(CodeSamplingInvalid, msg, "INVALID_REQUEST") }
	var req sampling.Request
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, bad("params are not a sampling request")
	}
	claims, msg := p.grant(ctx, inv, req.SamplingToken, inv.samplingToken, "sampling", (*tokens.Verifier).VerifySampling)
	if claims == nil {
		return nil, rpcError(CodeSamplingNotGranted, msg, "NOT_GRANTED")
	}
	if n := len(req.Messages); n == 0 || n > MaxSamplingMessages {
		return nil, bad(fmt.Sprintf("messages: between 1 and %d", MaxSamplingMessages))
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			return nil, bad(fmt.Sprintf("messages[%d].role: user, assistant or system", i))
		}
		if m.Content.Type != "text" {
			return nil, bad(fmt.Sprintf("messages[%d].content.type: only text", i))
		}
	}
	if req.MaxTokens < 1 || req.MaxTokens > MaxSamplingTokens || req.MaxTokens > claims.MaxTokensPerCall {
		return nil, bad(fmt.Sprintf("maxTokens: between 1 and %d (the negotiated maxTokensPerCall)", min(claims.MaxTokensPerCall, MaxSamplingTokens)))
	}
	if req.IncludeContext != "" && req.IncludeContext != "none" {
		return nil, bad(`includeContext: only "none"`)
	}
	switch req.OnUnsupported {
	case "", "error", "json_object", "text":
	default:
		return nil, bad("onUnsupported: error, json_object or text")
	}
	requested := ""
	if rf := req.ResponseFormat; rf != nil {
		requested = rf.Type
		switch rf.Type {
		case "json_object":
		case "json_schema":
			if rf.JSONSchema == nil || !schemaName.MatchString(rf.JSONSchema.Name) {
				return nil, bad("responseFormat.json_schema.name: ^[a-zA-Z0-9_-]{1,64}$")
			}
			if err := checkSchema(rf.JSONSchema.Schema); err != nil {
				return nil, bad("responseFormat.json_schema.schema: " + err.Error())
			}
		default:
			return nil, bad("responseFormat.type: json_object or json_schema")
		}
	}
	// Per-invoke caps: hitting either ends sampling for the invoke. The
	// call's prompt (estimated from its bytes) and its maxTokens are
	// reserved before it is sent, so concurrent calls cannot together
	// pass the cap; what was used is settled after.
	reserved := promptTokens(&req) + req.MaxTokens
	if inv.spend != nil {
		// The host's budgets (invocation, run, grant) bound tokens too:
		// one spent to its limit refuses the call, as the invoke's cap does.
		if err := inv.spend(ctx, 0); err != nil {
			return nil, rpcError(CodeSamplingQuota, "a token budget of this call is spent: "+err.Error(), "BUDGET_EXHAUSTED")
		}
	}
	if e := inv.budget.admit(ctx, min(claims.MaxCallsPerInvoke, MaxCallsPerInvoke), reserved); e != nil {
		return nil, e
	}
	settled := false
	settle := func(used int) {
		inv.budget.settle(reserved, used, true)
		settled = true
		if inv.spend != nil && used > 0 {
			if err := inv.spend(context.WithoutCancel(ctx), int64(used)); err != nil {
				p.log.Error("charging sampling tokens to the call's budgets failed", "err", err)
			}
		}
	}
	defer func() {
		if !settled {
			inv.budget.settle(reserved, 0, false) // nothing was spent: release the reservation
		}
	}()

	applied, downgraded := requested, false
	if requested != "" && (p.opts.Sampling == nil || !p.opts.Sampling.SupportsFormat(requested)) {
		switch req.OnUnsupported {
		case "", "error":
			data, _ := json.Marshal(map[string]string{"errorCode": "UNSUPPORTED_RESPONSE_FORMAT", "requested": requested, "modelName": "configured backend"})
			return nil, &RPCError{Code: CodeSamplingUnsupportedRF, Message: "the backend does not support this response format", Data: data}
		case "text":
			applied, downgraded = "text", true
		case "json_object":
			applied, downgraded = "json_object", requested != "json_object"
		}
	}
	if p.opts.Sampling == nil {
		return nil, rpcError(CodeSamplingProviderError, "no sampling backend is configured on this host", "PROVIDER_ERROR")
	}
	start := time.Now()
	// ctx is the invoke's: the backend call ends with it at the latest.
	cctx, cancel := context.WithTimeout(ctx, p.opts.samplingTimeout())
	defer cancel()
	req.Caller = sampling.Caller{Plugin: p.cfg.Name, Invocation: inv.id}
	c, err := p.opts.Sampling.Complete(cctx, &req)
	if err != nil {
		return nil, p.samplingFailure(ctx, cctx, err)
	}
	estimated := !c.UsageReported
	if estimated {
		// A backend that says nothing of usage is taken to have spent all
		// that was reserved.
		c.InputTokens, c.OutputTokens = reserved-req.MaxTokens, req.MaxTokens
	}
	settle(c.InputTokens + c.OutputTokens)
	structuredValid := false
	switch applied {
	case "json_object":
		structuredValid = isJSONObject(c.Text)
	case "json_schema":
		structuredValid = req.ResponseFormat.JSONSchema != nil && validateSchema(req.ResponseFormat.JSONSchema.Schema, c.Text)
	}
	return map[string]any{
		"role": "assistant", "content": map[string]string{"type": "text", "text": c.Text}, "model": c.Model,
		"stopReason": c.StopReason,
		"usage":      map[string]int{"inputTokens": c.InputTokens, "outputTokens": c.OutputTokens, "totalTokens": c.InputTokens + c.OutputTokens},
		"_meta": map[string]any{"provider": c.Provider, "latencyMs": time.Since(start).Milliseconds(), "usageEstimated": estimated,
			"responseFormat": map[string]any{"requested": requested, "applied": applied, "structuredValid": structuredValid, "downgraded": downgraded}},
	}, nil
}

// promptTokens bounds what a request's prompt can cost, from its bytes:
// no tokenizer spends less than a byte on a token, so one token per byte
// of text, plus per-message framing, is never below what a backend
// counts. A schema sent as response_format counts too.
func promptTokens(req *sampling.Request) int {
	const perMessage, perRequest = 8, 16
	n := perRequest + len(req.SystemPrompt)
	for _, m := range req.Messages {
		n += perMessage + len(m.Role) + len(m.Content.Text)
	}
	for _, s := range req.StopSequences {
		n += len(s)
	}
	if rf := req.ResponseFormat; rf != nil && rf.JSONSchema != nil {
		n += len(rf.JSONSchema.Schema)
	}
	return n
}

// samplingFailure maps a backend failure to the plugin's error and logs
// one line for the operator (never the key, never the backend's body).
func (p *Process) samplingFailure(invokeCtx, callCtx context.Context, err error) *RPCError {
	switch {
	case invokeCtx.Err() != nil:
		p.log.Info("sampling call cancelled: its invoke ended")
		return rpcError(CodeSamplingTimeout, "the invoke ended before the sampling backend answered", "TIMEOUT")
	case errors.Is(err, context.DeadlineExceeded) || callCtx.Err() != nil:
		p.log.Warn("sampling backend timed out", "timeout", p.opts.samplingTimeout())
		return rpcError(CodeSamplingTimeout, "the sampling backend timed out", "TIMEOUT")
	}
	var be *sampling.Error
	if !errors.As(err, &be) {
		be = &sampling.Error{Kind: sampling.KindUpstream, Err: err}
	}
	p.log.Warn("sampling backend failed", "reason", be.Kind, "status", be.Status, "retry_after", be.RetryAfter, "err", be.Err)
	data := map[string]any{"errorCode": be.Kind}
	if be.Status != 0 {
		data["status"] = be.Status
	}
	if be.RetryAfter > 0 {
		data["retryAfter"] = int(be.RetryAfter.Seconds())
	}
	raw, _ := json.Marshal(data)
	msg := map[string]string{
		sampling.KindUnauthorized: "the sampling backend refused the host's credential",
		sampling.KindRateLimited:  "the sampling backend is rate limiting; retry after retryAfter seconds",
		sampling.KindUpstream:     "the sampling backend failed",
		sampling.KindBadResponse:  "the sampling backend's answer was not understood",
		sampling.KindUnavailable:  "the sampling backend's credential or route is unavailable",
	}[be.Kind]
	return &RPCError{Code: CodeSamplingProviderError, Message: msg, Data: raw}
}
