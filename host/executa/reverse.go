package executa

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/airlock-dev/airlock/tokens"
)

// Reverse-RPC error codes (error.data.errorCode carries the name).
const (
	CodeSamplingProviderError = -32003
	CodeNotNegotiated         = -32008
	CodeStorageNotGranted     = -32021
	CodeStorageUpstream       = -32029
)

func rpcError(code int, msg, errorCode string) *RPCError {
	data, _ := json.Marshal(map[string]string{"errorCode": errorCode})
	return &RPCError{Code: code, Message: msg, Data: data}
}

// grant checks the token a reverse call carries, or the one minted for the
// invoke when it carries none, against the invoke's binding: the token
// first, so nothing happens for a request that is not this invoke's. It
// returns the token's claims, or the message for the plugin when the call
// is not granted.
func (p *Process) grant(ctx context.Context, inv *liveInvoke, sent, minted, what string,
	verify func(*tokens.Verifier, context.Context, string) (*tokens.Claims, error)) (*tokens.Claims, string) {
	tok := sent
	if tok == "" {
		tok = minted
	}
	if p.opts.Verifier == nil || tok == "" {
		return nil, "no " + what + " token for this invoke"
	}
	claims, err := verify(p.opts.Verifier, ctx, tok)
	if err != nil || claims.CheckBinding(inv.binding) != nil {
		return nil, "the " + what + " token is not valid for this invoke"
	}
	return claims, ""
}

// reverse answers a request from the plugin (sampling/*, storage/*,
// files/*): correlation by invoke_id, then the capability gates.
func (p *Process) reverse(m *Message) {
	reply := func(e *RPCError) { _ = p.send(&Message{ID: m.ID, Error: e}) }
	if p.Protocol != ProtocolV2 {
		reply(&RPCError{Code: CodeMethodNotFound, Message: "reverse RPC is not available to protocol 1.1 sessions"})
		return
	}
	if m.duplicateKey {
		reply(rpcError(CodeInvalidRequest, ErrDuplicateKey.Error(), "DUPLICATE_KEY"))
		return
	}
	inv, e := p.correlate(m.Params)
	if e != nil {
		reply(e)
		return
	}
	// Every answer from here on ends the call's span (a refusal by a
	// capability gate included).
	ctx, endSpan := reverseSpan(inv, m.Method, p.cfg.Name)
	answer := func(res any, e *RPCError) {
		endSpan(e)
		if e != nil {
			reply(e)
			return
		}
		b, _ := json.Marshal(res)
		_ = p.send(&Message{ID: m.ID, Result: b})
	}
	switch {
	case m.Method == "sampling/createMessage":
		if _, ok := p.Capabilities["sampling"]; !ok || !p.Manifest.Has(CapSample) {
			answer(nil, rpcError(CodeNotNegotiated, "sampling needs the sampling capability negotiated and llm.sample declared", "NOT_NEGOTIATED"))
			return
		}
		answer(p.sample(ctx, inv, m.Params))
	case strings.HasPrefix(m.Method, "storage/"):
		if !p.Manifest.wantsStorageToken() { // the mint gate's predicate
			answer(nil, rpcError(CodeStorageNotGranted, "storage needs aps.kv, aps.files or an aps.scope.* capability declared", "STORAGE_NOT_GRANTED"))
			return
		}
		answer(p.storage(ctx, inv, m.Method, m.Params))
	case strings.HasPrefix(m.Method, "files/"):
		if !p.Manifest.Has(CapFiles) {
			answer(nil, rpcError(CodeStorageNotGranted, "files need aps.files declared", "STORAGE_NOT_GRANTED"))
			return
		}
		answer(p.storage(ctx, inv, m.Method, m.Params))
	default:
		answer(nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found"})
	}
}

// correlate finds the invoke a reverse request serves: the one it names
// (invokeIDOf); without one, the only invoke in flight.
func (p *Process) correlate(params json.RawMessage) (*liveInvoke, *RPCError) {
	id := invokeIDOf(params)
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != "" {
		if inv, ok := p.invokes[id]; ok {
			return inv, nil
		}
		return nil, rpcError(CodeInvalidParams, "invoke_id names no invoke in flight", "UNKNOWN_INVOKE_CONTEXT")
	}
	if len(p.invokes) == 1 {
		for _, inv := range p.invokes {
			return inv, nil
		}
	}
	return nil, rpcError(CodeInvalidParams, "invoke_id is required while several invokes are in flight", "MISSING_INVOKE_CONTEXT")
}

// invokeIDOf is the invoke a message from the plugin names, where the
// SDKs put it: params.invoke_id, params.context.invoke_id (what their
// bind_invoke stamps on progress events) or
// params.metadata.executa_invoke_id; "" for none.
func invokeIDOf(params json.RawMessage) string {
	var ids struct {
		InvokeID string `json:"invoke_id"`
		Context  struct {
			InvokeID string `json:"invoke_id"`
		} `json:"context"`
		Metadata struct {
			InvokeID string `json:"executa_invoke_id"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(params, &ids)
	switch {
	case ids.InvokeID != "":
		return ids.InvokeID
	case ids.Context.InvokeID != "":
		return ids.Context.InvokeID
	}
	return ids.Metadata.InvokeID
}
