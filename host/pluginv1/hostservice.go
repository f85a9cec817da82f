package pluginv1

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/internal/strictjson"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// Per-invocation HostService limits of plugin/v1.
var callLimits = map[string]int{
	"Log": 1024, "EmitEvidence": 256, "RequestCredential": 16, "ResolveReference": 64, "ReportProgress": 1024,
}

// MaxHostCalls is the per-invocation total.
const MaxHostCalls = 2048

// MaxEvidencePayload bounds one EmitEvidence payload.
const MaxEvidencePayload = 16 << 10

// hostAuthored record types are written by the host only.
var hostAuthored = []string{"lifecycle.", "policy.", "gate.", "approval.", "grant.", "credential.", "invocation."}

// hostPluginRecords are the types the host writes in the namespace a
// provider's records go to ("plugin." + type): a plugin's quarantine and
// its release (host.Host.Quarantine, Release).
var hostPluginRecords = []string{"quarantined", "released"}

// hostAuthoredType reports whether typ is a record type only the host
// writes: a manifest may not declare it, a provider may not emit it. A
// provider's type T is recorded as "plugin.T", so the host's own
// plugin.* types (and their dotted children) are refused as T too.
func hostAuthoredType(typ string) bool {
	for _, prefix := range hostAuthored {
		if strings.HasPrefix(typ, prefix) {
			return true
		}
	}
	for _, t := range hostPluginRecords {
		if typ == t || strings.HasPrefix(typ, t+".") {
			return true
		}
	}
	return false
}

// hostService serves one plugin's callbacks. The plugin is known by the
// key it presents and, where it has a uid of its own, its peer uid
// (admit, before any handler), never by what it sends.
type hostService struct {
	pb.UnimplementedHostServiceServer
	p *Plugin
}

// enter checks the invocation is in flight for this plugin and that the
// call presents that invocation's key, and counts the call; over a limit
// the call is refused and the invocation will end FAILED. A call refused
// for its id or key counts against no invocation.
func (h *hostService) enter(ctx context.Context, invocationID, rpc string) (*invocation, error) {
	h.p.mu.Lock()
	inv := h.p.inflight[invocationID]
	h.p.mu.Unlock()
	if inv == nil {
		return nil, h.p.refuse(ctx, rpc, reasonInvocationUnknown, status.Error(codes.PermissionDenied, "invocation_id: not in flight for this plugin"))
	}
	if err := h.p.checkInvocationKey(ctx, inv, rpc); err != nil {
		return nil, err
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.calls[rpc]++
	inv.total++
	if inv.total > MaxHostCalls {
		if inv.overLimit == "" {
			inv.overLimit = fmt.Sprintf("total HostService calls (%d)", MaxHostCalls)
		}
		return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf("HostService: more than %d calls in one invocation", MaxHostCalls))
	}
	if inv.calls[rpc] > callLimits[rpc] {
		if inv.overLimit == "" {
			inv.overLimit = fmt.Sprintf("%s (%d)", rpc, callLimits[rpc])
		}
		return nil, status.Error(codes.ResourceExhausted, rpc+": per-invocation limit exceeded")
	}
	return inv, nil
}

func (h *hostService) Log(ctx context.Context, r *pb.LogRequest) (*pb.LogResponse, error) {
	if r.GetInvocationId() == "" && isReport(ctx) {
		return h.p.reported(r)
	}
	if _, err := h.enter(ctx, r.GetInvocationId(), "Log"); err != nil {
		return nil, err
	}
	if len(r.GetFields()) > 32 {
		return nil, status.Error(codes.InvalidArgument, "fields: more than 32")
	}
	// Values are the plugin's: redacted (whole under a secret-like key;
	// otherwise handles, tokens, URL userinfo, secret-shaped pairs and
	// the operator's patterns) before they reach the log.
	red := h.p.opts.Redactor
	attrs := []any{"invocation", r.GetInvocationId(), "reason_code", red.String(redact.Clip(r.GetReasonCode(), 64))}
	for k, v := range r.GetFields() {
		attrs = append(attrs, "f_"+red.String(redact.Clip(k, 64)), red.Field(k, redact.Clip(v, 1024)))
	}
	h.p.log.Info("provider log", attrs...)
	return &pb.LogResponse{}, nil
}

func (h *hostService) RequestCredential(ctx context.Context, r *pb.RequestCredentialRequest) (*pb.RequestCredentialResponse, error) {
	inv, err := h.enter(ctx, r.GetInvocationId(), "RequestCredential")
	if err != nil {
		return nil, err
	}
	var intent *pb.CredentialIntent
	for _, ci := range h.p.inst.Manifest.GetCredentialIntents() {
		if ci.GetName() == r.GetIntent() {
			intent = ci
		}
	}
	if intent == nil {
		h.p.record("credential.refused", inv.id, map[string]any{"reason": "intent not declared in the manifest"})
		return nil, status.Error(codes.PermissionDenied, "intent: not declared in the plugin's credential_intents")
	}
	if h.p.opts.Broker == nil {
		return nil, status.Error(codes.Unavailable, "no broker")
	}
	req := broker.IssueRequest{PluginID: h.p.inst.Name, InvocationID: inv.id, Intent: intent.GetName(),
		Deadline: inv.deadline, DryRun: inv.dryRun}
	inv.scope.Apply(&req)
	for _, d := range intent.GetDestinations() {
		req.Destinations = append(req.Destinations, destinationOf(d))
	}
	ctx, endSpan := host.StartCredentialSpan(ctx, inv.span, h.p.inst.Name, inv.id, intent.GetName())
	iss, err := h.p.opts.Broker.Issue(ctx, req)
	endSpan(iss.Fingerprint, err)
	if err != nil {
		h.p.record("credential.refused", inv.id, map[string]any{"intent": intent.GetName(), "reason": err.Error()})
		if errors.Is(err, broker.ErrResidencyViolation) {
			return nil, status.Error(codes.PermissionDenied, "intent: residency_violation: the intent's region is outside the call's residency")
		}
		return nil, status.Error(codes.PermissionDenied, "intent: the broker refused a handle")
	}
	if _, err := h.p.record("credential.issued", inv.id, map[string]any{"intent": intent.GetName(), "handle_fp": iss.Fingerprint,
		"expires_at": iss.ExpiresAt}); err != nil {
		// No handle leaves without its record; the invocation's end
		// revokes the one minted.
		return nil, status.Error(codes.Unavailable, "evidence could not be recorded; no credential issued")
	}
	return &pb.RequestCredentialResponse{Handle: iss.Handle, ExpiresAt: timestamppb.New(iss.ExpiresAt),
		EgressProxy: iss.EgressProxy}, nil
}

func (h *hostService) EmitEvidence(ctx context.Context, r *pb.EmitEvidenceRequest) (*pb.EmitEvidenceResponse, error) {
	inv, err := h.enter(ctx, r.GetInvocationId(), "EmitEvidence")
	if err != nil {
		return nil, err
	}
	typ := r.GetRecordType()
	if hostAuthoredType(typ) { // refused at install too: a check for old lockfiles
		return nil, status.Error(codes.PermissionDenied, "record_type: host-authored types cannot be emitted")
	}
	if !containsString(h.p.inst.Manifest.GetEvidenceRecordTypes(), typ) {
		return nil, status.Error(codes.PermissionDenied, "record_type: not declared in the manifest")
	}
	if r.GetEmitKey() == "" || len(r.GetEmitKey()) > 128 {
		return nil, status.Error(codes.InvalidArgument, "emit_key: required, at most 128 bytes")
	}
	if len(r.GetPayload()) > MaxEvidencePayload {
		return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("payload: larger than %d bytes", MaxEvidencePayload))
	}
	// A JSON payload is recorded as JSON: one whose objects repeat a key
	// (or a case variant of one) would read differently to different
	// readers of the evidence, so it is refused.
	if err := strictjson.Check(r.GetPayload()); errors.Is(err, strictjson.ErrDuplicateKey) {
		return nil, status.Error(codes.InvalidArgument, "payload: "+err.Error())
	}
	sum := sha256.Sum256(append([]byte(typ+"\x00"), r.GetPayload()...))
	digest := hex.EncodeToString(sum[:])
	// The lookup and the append are one step per invocation: concurrent
	// calls with one emit_key yield one record.
	inv.emitMu.Lock()
	defer inv.emitMu.Unlock()
	inv.mu.Lock()
	prev, seen := inv.evidence[r.GetEmitKey()]
	inv.mu.Unlock()
	if seen {
		if prev.digest != digest {
			return nil, status.Error(codes.AlreadyExists, "emit_key: reused with different content")
		}
		return &pb.EmitEvidenceResponse{EvidenceId: prev.id}, nil
	}
	// The payload is kept redacted (handle-, token- and secret-shaped
	// values); payload_sha256 is over what the plugin sent.
	data := map[string]any{"emit_key": h.p.opts.Redactor.String(r.GetEmitKey()), "payload_sha256": digest}
	if red := h.p.opts.Redactor.String(string(r.GetPayload())); json.Valid([]byte(red)) {
		data["payload"] = json.RawMessage(red)
	} else {
		data["payload_bytes"] = []byte(red)
	}
	rec, err := h.p.record("plugin."+typ, inv.id, data)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "evidence could not be recorded")
	}
	inv.mu.Lock()
	inv.evidence[r.GetEmitKey()] = emitted{id: rec.ID, digest: digest}
	inv.evidenceID[rec.ID] = typ
	inv.mu.Unlock()
	return &pb.EmitEvidenceResponse{EvidenceId: rec.ID}, nil
}

func (h *hostService) ReportProgress(ctx context.Context, r *pb.ReportProgressRequest) (*pb.ReportProgressResponse, error) {
	inv, err := h.enter(ctx, r.GetInvocationId(), "ReportProgress")
	if err != nil {
		return nil, err
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if r.GetCompleted() < inv.progress[0] || r.GetTotal() < inv.progress[1] || (r.GetTotal() > 0 && r.GetCompleted() > r.GetTotal()) {
		return nil, status.Error(codes.InvalidArgument, "completed/total: progress never decreases and completed never exceeds total")
	}
	inv.progress = [2]uint64{r.GetCompleted(), r.GetTotal()}
	return &pb.ReportProgressResponse{}, nil
}

func (h *hostService) ResolveReference(r *pb.ResolveReferenceRequest, stream pb.HostService_ResolveReferenceServer) error {
	inv, err := h.enter(stream.Context(), r.GetInvocationId(), "ResolveReference")
	if err != nil {
		return err
	}
	if r.GetReference().GetHostOnly() {
		return status.Error(codes.PermissionDenied, "reference: host_only references are never served")
	}
	ref, err := allowedReference(inv.references, r.GetReference())
	if err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	if h.p.opts.Artifacts == nil {
		return status.Error(codes.Unavailable, "reference: no artifact store is configured")
	}
	rc, err := verifiedArtifact(h.p.opts.Artifacts, ref)
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	defer rc.Close()
	buf := make([]byte, MaxReferenceChunk)
	for {
		n, err := io.ReadFull(rc, buf)
		if n > 0 {
			if serr := stream.Send(&pb.ReferenceChunk{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return status.Error(codes.Unavailable, "reference: read failed")
		}
	}
}
