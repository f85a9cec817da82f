package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// Invocation errors.
var (
	ErrMethodNotDispatchable = errors.New("method is not in a port the host serves for this plugin")
	ErrDryRunUnsupported     = errors.New("method does not support dry run")
	ErrDeadlineRequired      = errors.New("invocation needs a deadline in the future")
)

// InvokeRequest is an approved action for a plugin.
type InvokeRequest struct {
	// Method is "numinance.ports.<name>.v<major>.<Service>/<Method>".
	Method   string
	Input    proto.Message // the method's input type
	DryRun   bool
	Deadline time.Time
	Actor    *pluginv1.Actor
	// OnRunning, when set, sees each RUNNING message that passed the
	// stream checks (for streaming progress to the caller).
	OnRunning func(*pluginv1.ActionResult)
}

// Outcome is what the host derived, never what the provider claimed.
type Outcome struct {
	InvocationID string
	Status       pluginv1.Status
	Result       *anypb.Any
	Diagnostics  []*pluginv1.Diagnostic
	EvidenceIDs  []string
	Reason       string // why the host failed or downgraded the call
}

// invocation is an Invoke in flight: what HostService calls are checked
// against.
type invocation struct {
	id       string
	deadline time.Time
	dryRun   bool
	cancel   context.CancelFunc

	mu         sync.Mutex
	calls      map[string]int
	total      int
	overLimit  string
	evidence   map[string]emitted // by emit_key
	evidenceID map[string]string  // id -> record type
	progress   [2]uint64
	// references found in the request by walking its type with the
	// host's descriptors: the only ones ResolveReference serves.
	references []*pluginv1.Reference
}

type emitted struct {
	id     string
	digest string
}

func newInvocationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// method finds the target in the host's compiled ports.
func (p *Plugin) method(full string) (protoreflect.MethodDescriptor, plugin.PortRule, error) {
	svc, name, ok := strings.Cut(full, "/")
	if !ok || !strings.HasPrefix(svc, "numinance.ports.") {
		return nil, nil, ErrMethodNotDispatchable
	}
	i := strings.LastIndex(svc, ".")
	pkg := svc[:i]
	if !containsString(p.inst.Manifest.GetPorts(), pkg) {
		return nil, nil, ErrMethodNotDispatchable
	}
	f, ok := p.opts.Ports[pkg]
	if !ok {
		return nil, nil, ErrMethodNotDispatchable
	}
	sd := f.Services().ByName(protoreflect.Name(svc[i+1:]))
	if sd == nil {
		return nil, nil, ErrMethodNotDispatchable
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, nil, ErrMethodNotDispatchable
	}
	rule, err := plugin.RuleOf(md)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrMethodNotDispatchable, err)
	}
	return md, rule, nil
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Invoke sends one approved action and derives its outcome. Every handle
// issued for it is revoked before Invoke returns.
func (p *Plugin) Invoke(ctx context.Context, req InvokeRequest) (*Outcome, error) {
	md, rule, err := p.method(req.Method)
	if err != nil {
		return nil, err
	}
	if req.DryRun && !rule.GetDryRunSupported() {
		return nil, ErrDryRunUnsupported
	}
	decision := Decision{Rule: "no policy"}
	if p.opts.Policy != nil {
		decision = p.opts.Policy.Decide(p.inst.Name, req.Method, rule.GetRiskClass(), req.DryRun)
	}
	rec, _ := p.record("policy.decision", "", map[string]any{"method": req.Method, "dry_run": req.DryRun,
		"allow": decision.Allow, "rule": decision.Rule, "risk_class": rule.GetRiskClass().String()})
	if !decision.Allow {
		return nil, fmt.Errorf("%w (rule %s)", ErrPolicyDenied, decision.Rule)
	}
	if req.Deadline.IsZero() || !req.Deadline.After(time.Now()) {
		return nil, ErrDeadlineRequired
	}
	if req.Input == nil || req.Input.ProtoReflect().Descriptor().FullName() != md.Input().FullName() {
		return nil, fmt.Errorf("input is not of the method's input type %s", md.Input().FullName())
	}
	input, err := anypb.New(req.Input)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	inv := &invocation{id: newInvocationID(), deadline: req.Deadline, dryRun: req.DryRun, cancel: cancel,
		calls: map[string]int{}, evidence: map[string]emitted{}, evidenceID: map[string]string{},
		references: findReferences(req.Input.ProtoReflect())}
	p.mu.Lock()
	if p.closed || p.notServing {
		p.mu.Unlock()
		return nil, ErrNotServing
	}
	p.inflight[inv.id] = inv
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.inflight, inv.id)
		p.mu.Unlock()
	}()

	out := &Outcome{InvocationID: inv.id}
	p.record("invocation.start", inv.id, map[string]any{"method": req.Method, "dry_run": req.DryRun,
		"deadline": req.Deadline.UTC().Format(time.RFC3339Nano)})
	env := &pluginv1.Envelope{Method: req.Method, Request: input, Context: &pluginv1.ActionContext{
		InvocationId: inv.id, Actor: req.Actor, Deadline: timestamppb.New(req.Deadline), DryRun: req.DryRun,
		IdempotencyKey: inv.id, PolicyDecisionId: rec.ID}}
	p.run(ctx, md, rule, env, inv, out, req.OnRunning)

	// Revoke before anyone is told the call is over.
	if p.opts.Broker != nil {
		if _, err := p.opts.Broker.RevokeInvocation(context.WithoutCancel(ctx), inv.id); err != nil {
			p.log.Error("revoke invocation handles", "invocation", inv.id, "err", err)
		}
	}
	p.record("invocation.outcome", inv.id, map[string]any{"status": out.Status.String(), "reason": out.Reason,
		"evidence_ids": out.EvidenceIDs})
	return out, nil
}

func (p *Plugin) run(ctx context.Context, md protoreflect.MethodDescriptor, rule plugin.PortRule, env *pluginv1.Envelope,
	inv *invocation, out *Outcome, onRunning func(*pluginv1.ActionResult)) {
	failed := func(reason string) {
		out.Status, out.Reason, out.Result = pluginv1.Status_STATUS_FAILED, reason, nil
	}
	check, err := plugin.NewStreamCheck(md, rule)
	if err != nil {
		failed(err.Error())
		return
	}
	stream, err := p.client.Invoke(ctx, &pluginv1.InvokeRequest{Envelope: env})
	if err != nil {
		failed("invoke: " + err.Error())
		return
	}
	var terminal *pluginv1.ActionResult
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			// The provider sees the same deadline (grpc-timeout) and may
			// report DeadlineExceeded a moment before our context fires.
			if ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
				failed("deadline passed; the call was cancelled")
			} else {
				// A provider rejection with no stream message only ends FAILED.
				failed("the provider ended the stream with an error")
			}
			return
		}
		if err := check.Next(m); err != nil {
			failed(err.Error())
			return
		}
		if m.GetStatus() != pluginv1.Status_STATUS_RUNNING {
			terminal = m
		} else if onRunning != nil {
			onRunning(m)
		}
	}
	if err := check.End(); err != nil {
		failed(err.Error())
		return
	}
	inv.mu.Lock()
	over := inv.overLimit
	inv.mu.Unlock()
	if over != "" {
		failed("HostService limit exceeded: " + over)
		return
	}
	out.Status, out.Result, out.Diagnostics = terminal.GetStatus(), terminal.GetResult(), terminal.GetDiagnostics()
	// Evidence ids must be ones this invocation's EmitEvidence returned.
	inv.mu.Lock()
	defer inv.mu.Unlock()
	have := map[string]bool{}
	for _, id := range terminal.GetEvidenceIds() {
		if _, ok := inv.evidenceID[id]; !ok {
			failed("evidence_ids names an id not emitted by this invocation")
			return
		}
		have[inv.evidenceID[id]] = true
		out.EvidenceIDs = append(out.EvidenceIDs, id)
	}
	if out.Status == pluginv1.Status_STATUS_SUCCEEDED {
		for _, want := range rule.GetDeclaredEvidence() {
			if !have[want] {
				out.Status, out.Reason = pluginv1.Status_STATUS_PARTIAL, "declared evidence "+want+" is missing"
				return
			}
		}
	}
}

func jsonMarshal(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}
