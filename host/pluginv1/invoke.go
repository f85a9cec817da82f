package pluginv1

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/strictjson"
	"github.com/airlock-dev/airlock/internal/tracing"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// MaxStreamMessageBytes bounds one message of an Invoke stream (the
// terminal one is the largest plugin/v1 allows: 4 MiB).
const MaxStreamMessageBytes = 4 << 20

// invocation is an Invoke in flight: what HostService calls are checked
// against.
type invocation struct {
	id       string
	deadline time.Time
	dryRun   bool
	// scope is what each handle issued for the invocation carries.
	scope  host.IssueScope
	cancel context.CancelFunc
	// key matches the invocation key sent with Invoke: every HostService
	// call for this invocation presents it.
	key *peerauth.Token
	// span is the invocation's (host.SpanInvocation): the parent of the
	// spans of the plugin's HostService calls for it.
	span trace.Span

	emitMu     sync.Mutex // one EmitEvidence at a time: check-and-append is atomic
	mu         sync.Mutex
	calls      map[string]int
	total      int
	overLimit  string
	evidence   map[string]emitted // by emit_key
	evidenceID map[string]string  // id -> record type
	progress   [2]uint64
	// references found in the request by walking its type with the
	// host's descriptors: the only ones ResolveReference serves.
	references []*pb.Reference
}

type emitted struct {
	id     string
	digest string
}

// method finds the target in the host's ports (compiled or installed),
// looked up at each call.
func (p *Plugin) method(full string) (protoreflect.MethodDescriptor, plugin.PortRule, error) {
	svc, name, ok := strings.Cut(full, "/")
	if !ok || !strings.HasPrefix(svc, "numinance.ports.") {
		return nil, nil, host.ErrMethodNotDispatchable
	}
	i := strings.LastIndex(svc, ".")
	pkg := svc[:i]
	if !containsString(p.inst.Manifest.GetPorts(), pkg) {
		return nil, nil, host.ErrMethodNotDispatchable
	}
	f, ok := p.opts.Ports.Lookup(pkg)
	if !ok {
		return nil, nil, host.ErrMethodNotDispatchable
	}
	sd := f.Services().ByName(protoreflect.Name(svc[i+1:]))
	if sd == nil {
		return nil, nil, host.ErrMethodNotDispatchable
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, nil, host.ErrMethodNotDispatchable
	}
	rule, err := plugin.RuleOf(md)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", host.ErrMethodNotDispatchable, err)
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

// Prepare resolves a plugin/v1 method against the host's compiled ports
// and the input against its type.
func (p *Plugin) Prepare(req host.InvokeRequest) (host.Action, error) {
	p.mu.Lock()
	refuse := p.closed || p.notServing
	p.mu.Unlock()
	if refuse {
		return nil, host.ErrNotServing
	}
	md, rule, err := p.method(req.Method)
	if err != nil {
		return nil, err
	}
	if req.DryRun && !rule.GetDryRunSupported() {
		return nil, host.ErrDryRunUnsupported
	}
	var in proto.Message
	switch v := req.Input.(type) {
	case nil:
	case proto.Message:
		in = v
	default:
		return nil, fmt.Errorf("%w %s: a Go input must be a proto.Message", host.ErrBadInput, md.Input().FullName())
	}
	if in == nil {
		dm := dynamicpb.NewMessage(md.Input())
		if len(req.JSON) > 0 {
			// protojson refuses a repeated field but takes map keys that
			// differ only in case; neither is accepted.
			if err := strictjson.Check(req.JSON); err != nil {
				return nil, fmt.Errorf("%w %s: %w", host.ErrBadInput, md.Input().FullName(), err)
			}
			if err := (protojson.UnmarshalOptions{}).Unmarshal(req.JSON, dm); err != nil {
				return nil, fmt.Errorf("%w %s", host.ErrBadInput, md.Input().FullName())
			}
		}
		in = dm
	}
	if in.ProtoReflect().Descriptor().FullName() != md.Input().FullName() {
		return nil, fmt.Errorf("%w %s", host.ErrBadInput, md.Input().FullName())
	}
	input, err := anypb.New(in)
	if err != nil {
		return nil, fmt.Errorf("%w %s", host.ErrBadInput, md.Input().FullName())
	}
	return &v1Action{p: p, method: req.Method, md: md, rule: rule, input: input, msg: in}, nil
}

// Invoke runs one call on this plugin through the host's invoke path
// (policy decision, evidence, handle revocation, outcome); Host.Invoke is
// the same path with the registry in front.
func (p *Plugin) Invoke(ctx context.Context, req host.InvokeRequest) (*host.Outcome, error) {
	return host.InvokeRuntime(ctx, p.opts, p.inst.Name, p, req)
}

// v1Action is a prepared plugin/v1 call.
type v1Action struct {
	p      *Plugin
	method string
	md     protoreflect.MethodDescriptor
	rule   plugin.PortRule
	input  *anypb.Any
	msg    proto.Message
}

func (a *v1Action) Risk() policy.Risk { return riskOf(a.rule.GetRiskClass()) }

func (a *v1Action) Run(ctx context.Context, call host.Call) *host.Outcome {
	p := a.p
	out := &host.Outcome{InvocationID: call.ID}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The invocation's own key rides with Invoke (gRPC metadata); the
	// provider presents it back on each HostService call it makes for it.
	key := peerauth.NewSecret()
	ctx = metadata.AppendToOutgoingContext(ctx, plugin.InvocationKeyMetadata, key)
	// So does the invocation span's traceparent: a provider's own spans
	// (and the requests it sends through the proxy with it) join the trace.
	if tp := tracing.Traceparent(ctx); tp != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, plugin.TraceparentMetadata, tp)
	}
	inv := &invocation{id: call.ID, deadline: call.Deadline, dryRun: call.DryRun, scope: call.Scope, cancel: cancel, key: peerauth.NewToken(key),
		span:  trace.SpanFromContext(ctx),
		calls: map[string]int{}, evidence: map[string]emitted{}, evidenceID: map[string]string{},
		references: findReferences(a.msg.ProtoReflect())}
	p.mu.Lock()
	if p.closed || p.notServing {
		p.mu.Unlock()
		out.Status, out.Reason = host.CallFailed, host.ErrNotServing.Error()
		return out
	}
	p.inflight[inv.id] = inv
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.inflight, inv.id)
		p.mu.Unlock()
	}()
	env := &pb.Envelope{Method: a.method, Request: a.input, Context: actionContext(call)}
	if result := p.run(ctx, a.md, a.rule, env, inv, out, call); result != nil {
		msg := dynamicpb.NewMessage(a.md.Output())
		if err := proto.Unmarshal(result.GetValue(), msg); err == nil {
			out.Data, _ = protojson.Marshal(msg)
		}
	}
	return out
}

// run sends the call and checks the stream; it returns the terminal
// result when the outcome keeps one.
func (p *Plugin) run(ctx context.Context, md protoreflect.MethodDescriptor, rule plugin.PortRule, env *pb.Envelope,
	inv *invocation, out *host.Outcome, call host.Call) (result *anypb.Any) {
	onRunning := call.OnRunning
	failed := func(reason string) {
		out.Status, out.Reason, result = host.CallFailed, reason, nil
	}
	check, err := plugin.NewStreamCheck(md, rule)
	if err != nil {
		failed(err.Error())
		return
	}
	stream, err := p.client.Invoke(ctx, &pb.InvokeRequest{Envelope: env}, grpc.MaxCallRecvMsgSize(MaxStreamMessageBytes))
	if err != nil {
		failed("invoke: the provider could not be reached")
		return
	}
	var terminal *pb.ActionResult
	for i := 0; ; i++ {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			// The provider sees the same deadline (grpc-timeout) and may
			// report DeadlineExceeded a moment before our context fires.
			if ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
				failed(host.CancelReason(ctx))
			} else if status.Code(err) == codes.ResourceExhausted {
				failed(fmt.Sprintf("messages[%d]: larger than the %d-byte message bound", i, MaxStreamMessageBytes))
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
		if m.GetStatus() != pb.Status_STATUS_RUNNING {
			terminal = m
		} else if onRunning != nil {
			onRunning(host.Progress{Diagnostics: diagnosticsOf(m.GetDiagnostics())})
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
	out.Status, result, out.Diagnostics = callStatus(terminal.GetStatus()), terminal.GetResult(), diagnosticsOf(terminal.GetDiagnostics())
	if c := terminal.GetCost(); c != nil {
		out.CostMicros, out.CostUnit = c.GetMicros(), c.GetUnit()
		if c.GetMicros() < 0 {
			failed("cost: negative micros")
			return
		}
		if max := call.Budget.MaxCostMicros; max > 0 && c.GetMicros() > max {
			failed(fmt.Sprintf("cost: the provider reported %d micros, more than the %d its budget allowed", c.GetMicros(), max))
			return
		}
	}
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
	if out.Status == host.CallSucceeded {
		for _, want := range rule.GetDeclaredEvidence() {
			if !have[want] {
				out.Status, out.Reason = host.CallPartial, "declared evidence "+want+" is missing"
				return result
			}
		}
	}
	return result
}

// actionContext is the ActionContext of call: every field the host has a
// source for.
func actionContext(call host.Call) *pb.ActionContext {
	ac := &pb.ActionContext{InvocationId: call.ID, Actor: actorOf(call.Actor), Deadline: timestamppb.New(call.Deadline),
		DryRun: call.DryRun, IdempotencyKey: call.ID, PolicyDecisionId: call.PolicyDecisionID,
		RunId: call.Run.RunID, ChangeId: call.Run.ChangeID, PlanDigest: call.Run.PlanDigest,
		GrantId: call.GrantID, ProfileDigest: call.ProfileDigest, Residency: strings.Join(call.Residency, ",")}
	if call.Budget != (host.CallBudget{}) {
		ac.Budget = &pb.Budget{MaxCalls: call.Budget.MaxCalls, MaxCostMicros: call.Budget.MaxCostMicros}
	}
	return ac
}

// Facts implements host.Describer: the method's declared side effect and
// the input in protojson.
func (a *v1Action) Facts() host.ActionFacts {
	// The field names of the port (proto names), whatever the caller
	// wrote: a rule on input.plan_digest cannot be dodged as planDigest.
	b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(a.msg)
	return host.ActionFacts{SideEffect: policy.SideEffectName(a.rule.GetDeclaredSideEffect().String()), InputJSON: b}
}
