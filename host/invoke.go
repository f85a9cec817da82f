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

	"github.com/airlock-dev/airlock/host/policy"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/internal/strictjson"
	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// MaxStreamMessageBytes bounds one message of an Invoke stream (the
// terminal one is the largest plugin/v1 allows: 4 MiB).
const MaxStreamMessageBytes = 4 << 20

// Invocation errors.
var (
	ErrMethodNotDispatchable = errors.New("method is not in a port the host serves for this plugin")
	ErrDryRunUnsupported     = errors.New("method does not support dry run")
	ErrDeadlineRequired      = errors.New("invocation needs a deadline in the future")
)

// InvokeRequest is an approved action for a plugin.
type InvokeRequest struct {
	// Method is "numinance.ports.<name>.v<major>.<Service>/<Method>".
	Method string
	// Input is the method's input for Go callers (plugin/v1); JSON is the
	// input as the control API received it (protojson for plugin/v1, the
	// arguments object for Executa). Input wins when both are set.
	Input    proto.Message
	JSON     json.RawMessage
	DryRun   bool
	Deadline time.Time
	Actor    *pluginv1.Actor
	// AppID and AppSlug are the App context an Executa call runs in, as
	// the caller attests it; empty for none.
	AppID, AppSlug string
	// OnRunning, when set, sees each RUNNING message that passed the
	// stream checks (for streaming progress to the caller).
	OnRunning func(*pluginv1.ActionResult)
}

// Outcome is what the host derived, never what the provider claimed.
type Outcome struct {
	InvocationID string
	Status       pluginv1.Status
	Result       *anypb.Any      // plugin/v1: the terminal result
	Data         json.RawMessage // the result as JSON, for either kind
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

// Invoke runs one call on this plugin through the host's invoke path
// (policy decision, evidence, handle revocation, outcome); Host.Invoke is
// the same path with the registry in front.
func (p *Plugin) Invoke(ctx context.Context, req InvokeRequest) (*Outcome, error) {
	return invokePath{opts: p.opts}.invoke(ctx, p.inst.Name, p, req)
}

// Prepare resolves a plugin/v1 method against the host's compiled ports
// and the input against its type.
func (p *Plugin) Prepare(req InvokeRequest) (Action, error) {
	p.mu.Lock()
	refuse := p.closed || p.notServing
	p.mu.Unlock()
	if refuse {
		return nil, ErrNotServing
	}
	md, rule, err := p.method(req.Method)
	if err != nil {
		return nil, err
	}
	if req.DryRun && !rule.GetDryRunSupported() {
		return nil, ErrDryRunUnsupported
	}
	in := req.Input
	if in == nil {
		dm := dynamicpb.NewMessage(md.Input())
		if len(req.JSON) > 0 {
			// protojson refuses a repeated field but takes map keys that
			// differ only in case; neither is accepted.
			if err := strictjson.Check(req.JSON); err != nil {
				return nil, fmt.Errorf("%w %s: %w", ErrBadInput, md.Input().FullName(), err)
			}
			if err := (protojson.UnmarshalOptions{}).Unmarshal(req.JSON, dm); err != nil {
				return nil, fmt.Errorf("%w %s", ErrBadInput, md.Input().FullName())
			}
		}
		in = dm
	}
	if in.ProtoReflect().Descriptor().FullName() != md.Input().FullName() {
		return nil, fmt.Errorf("%w %s", ErrBadInput, md.Input().FullName())
	}
	input, err := anypb.New(in)
	if err != nil {
		return nil, fmt.Errorf("%w %s", ErrBadInput, md.Input().FullName())
	}
	return &v1Action{p: p, method: req.Method, md: md, rule: rule, input: input, msg: in}, nil
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

// riskOf maps a port rule's risk class to the policy's; a class this host
// does not know is unspecified, which only a rule naming "unspecified"
// matches (the host compiles the port files, so a provider cannot send
// one).
func riskOf(c pluginv1.RiskClass) policy.Risk {
	switch c {
	case pluginv1.RiskClass_RISK_CLASS_READ:
		return policy.RiskRead
	case pluginv1.RiskClass_RISK_CLASS_LOW:
		return policy.RiskLow
	case pluginv1.RiskClass_RISK_CLASS_WRITE:
		return policy.RiskWrite
	case pluginv1.RiskClass_RISK_CLASS_PRIVILEGED:
		return policy.RiskPrivileged
	default:
		return policy.RiskUnspecified
	}
}

func (a *v1Action) Run(ctx context.Context, call Call) *Outcome {
	p := a.p
	out := &Outcome{InvocationID: call.ID}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inv := &invocation{id: call.ID, deadline: call.Deadline, dryRun: call.DryRun, cancel: cancel,
		calls: map[string]int{}, evidence: map[string]emitted{}, evidenceID: map[string]string{},
		references: findReferences(a.msg.ProtoReflect())}
	p.mu.Lock()
	if p.closed || p.notServing {
		p.mu.Unlock()
		out.Status, out.Reason = pluginv1.Status_STATUS_FAILED, ErrNotServing.Error()
		return out
	}
	p.inflight[inv.id] = inv
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.inflight, inv.id)
		p.mu.Unlock()
	}()
	env := &pluginv1.Envelope{Method: a.method, Request: a.input, Context: &pluginv1.ActionContext{
		InvocationId: inv.id, Actor: call.Actor, Deadline: timestamppb.New(call.Deadline), DryRun: call.DryRun,
		IdempotencyKey: inv.id, PolicyDecisionId: call.PolicyDecisionID}}
	p.run(ctx, a.md, a.rule, env, inv, out, call.OnRunning)
	if out.Result != nil {
		msg := dynamicpb.NewMessage(a.md.Output())
		if err := proto.Unmarshal(out.Result.GetValue(), msg); err == nil {
			out.Data, _ = protojson.Marshal(msg)
		}
	}
	return out
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
	stream, err := p.client.Invoke(ctx, &pluginv1.InvokeRequest{Envelope: env}, grpc.MaxCallRecvMsgSize(MaxStreamMessageBytes))
	if err != nil {
		failed("invoke: the provider could not be reached")
		return
	}
	var terminal *pluginv1.ActionResult
	for i := 0; ; i++ {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			// The provider sees the same deadline (grpc-timeout) and may
			// report DeadlineExceeded a moment before our context fires.
			if ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
				failed(cancelReason(ctx))
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
