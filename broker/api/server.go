package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/broker"
	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"
	"github.com/airlock-dev/airlock/tokens"
)

// Service serves the broker API over gRPC: the broker's BrokerService
// (handles, tokens, operators' inspection) and LedgerService (budgets,
// violations, access grants, approvals), registered on a grpc.Server by
// Register.
type Service struct {
	brokerv1.UnimplementedBrokerServiceServer

	Broker    *broker.Broker
	Tokens    *tokens.Issuer // nil: MintToken answers Unimplemented
	Ring      *tokens.Ring   // for Status; may be nil
	StoreType string
	Version   string
	Log       *slog.Logger
	// Explainer answers Explain (the egress proxy); Unimplemented when nil.
	Explainer broker.Explainer
	// Tracer, when set, makes a span of each unary call, a child of the
	// caller's traceparent (trace.go); ServerOptions reads it.
	Tracer trace.Tracer

	limitOnce sync.Once
	limit     *callLimit // see ServerOptions
}

// Register adds the service to s.
func (s *Service) Register(g *grpc.Server) {
	brokerv1.RegisterBrokerServiceServer(g, s)
	brokerv1.RegisterLedgerServiceServer(g, &ledgerServer{s: s})
}

// IssueHandle implements BrokerService.
func (s *Service) IssueHandle(ctx context.Context, r *brokerv1.IssueHandleRequest) (*brokerv1.IssueHandleResponse, error) {
	req := broker.IssueRequest{PluginID: r.GetPluginId(), InvocationID: r.GetInvocationId(), Intent: r.GetIntent(),
		Deadline: timeOf(r.GetDeadline()), DryRun: r.GetDryRun(), Pass: r.GetPass(), PassIntents: r.GetPassIntents(), Renew: r.GetRenew(),
		RunID: r.GetRunId(), AccessGrantID: r.GetAccessGrantId(), Budget: budgetFromProto(r.GetBudget()), Residency: r.GetResidency(),
		OnViolation: r.GetOnViolation()}
	for _, d := range r.GetDestinations() {
		req.Destinations = append(req.Destinations, broker.Destination{Host: d.GetHost(), Port: int(d.GetPort()),
			PathPrefix: d.GetPathPrefix(), Methods: d.GetMethods()})
	}
	iss, err := s.Broker.Issue(ctx, req)
	if err != nil {
		return nil, s.fail(err)
	}
	return &brokerv1.IssueHandleResponse{Handle: iss.Handle, ExpiresAt: timestamppb.New(iss.ExpiresAt),
		EgressProxy: iss.EgressProxy, Fingerprint: iss.Fingerprint}, nil
}

// RevokeInvocation implements BrokerService.
func (s *Service) RevokeInvocation(ctx context.Context, r *brokerv1.RevokeInvocationRequest) (*brokerv1.RevokeResponse, error) {
	if r.GetInvocationId() == "" {
		return nil, statusOf(broker.ErrBadRequest)
	}
	end, err := s.Broker.EndInvocation(ctx, r.GetInvocationId())
	if err != nil {
		return nil, s.fail(err)
	}
	resp := &brokerv1.RevokeResponse{Revoked: uint32(end.Handles), HandlesOwed: end.HandlesOwed}
	for _, l := range end.Leases {
		resp.Leases = append(resp.Leases, &brokerv1.LeaseEnd{Intent: l.Intent, Fingerprint: l.Fingerprint, Revoked: l.Revoked})
	}
	return resp, nil
}

// RevokePlugin implements BrokerService.
func (s *Service) RevokePlugin(ctx context.Context, r *brokerv1.RevokePluginRequest) (*brokerv1.RevokeResponse, error) {
	if r.GetPluginId() == "" {
		return nil, statusOf(broker.ErrBadRequest)
	}
	n, err := s.Broker.RevokePlugin(ctx, r.GetPluginId())
	if err != nil {
		return nil, s.fail(err)
	}
	return &brokerv1.RevokeResponse{Revoked: uint32(n)}, nil
}

// MintToken implements BrokerService.
func (s *Service) MintToken(_ context.Context, r *brokerv1.MintTokenRequest) (*brokerv1.MintTokenResponse, error) {
	if s.Tokens == nil {
		return nil, status.Error(codes.Unimplemented, "token issuer is not configured")
	}
	req := broker.TokenRequest{
		Binding:  tokens.Binding{UserID: r.GetUserId(), ExecutaToolID: r.GetExecutaToolId(), ToolInvokeID: r.GetToolInvokeId()},
		Deadline: timeOf(r.GetDeadline()), MaxTokensPerCall: int(r.GetMaxTokensPerCall()),
		MaxCallsPerInvoke: int(r.GetMaxCallsPerInvoke()), AppID: r.GetAppId(), AppSlug: r.GetAppSlug(),
	}
	switch r.GetKind() {
	case brokerv1.TokenKind_TOKEN_KIND_SAMPLING:
		req.Audience = tokens.AudienceSampling
	case brokerv1.TokenKind_TOKEN_KIND_STORAGE:
		req.Audience = tokens.AudienceStorage
	default:
		return nil, status.Error(codes.InvalidArgument, "bad_request: kind must be sampling or storage")
	}
	t, err := broker.MintWith(s.Tokens, req)
	if err != nil {
		return nil, s.fail(err)
	}
	s.Broker.Metrics().Minted(req.Audience)
	return &brokerv1.MintTokenResponse{Token: t.Raw, ExpiresAt: timestamppb.New(t.ExpiresAt), Jti: t.ID}, nil
}

// Status implements BrokerService.
func (s *Service) Status(ctx context.Context, _ *brokerv1.StatusRequest) (*brokerv1.StatusResponse, error) {
	resp := &brokerv1.StatusResponse{Version: s.Version, StoreType: s.StoreType,
		StoreOk: s.Broker.Ping(ctx) == nil, Intents: s.Broker.IntentNames()}
	if s.Ring != nil {
		if k := s.Ring.Active(); k != nil {
			resp.SigningKid = k.ID
		}
	}
	return resp, nil
}

// fail logs an internal error (the caller is not told its detail) and
// returns the status for err.
func (s *Service) fail(err error) error {
	if _, code := broker.Reason(err); code == codes.Internal && s.Log != nil {
		s.Log.Error("broker API call failed", "err", err)
	}
	return statusOf(err)
}

// statusOf turns an error into a status whose message starts with the
// reason code. Internal errors are not described to the caller.
func statusOf(err error) error {
	reason, code := broker.Reason(err)
	if code == codes.Internal {
		return status.Error(code, "error: internal broker error")
	}
	return status.Error(code, reason+": "+err.Error())
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
