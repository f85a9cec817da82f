package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/broker"
	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"
)

// InspectHandle implements BrokerService.
func (s *Service) InspectHandle(ctx context.Context, r *brokerv1.InspectHandleRequest) (*brokerv1.InspectHandleResponse, error) {
	in, err := s.Broker.Inspect(ctx, r.GetFingerprint())
	if err != nil {
		return nil, s.fail(err)
	}
	g := in.Grant
	resp := &brokerv1.InspectHandleResponse{Fingerprint: g.Fingerprint, PluginId: g.PluginID, InvocationId: g.InvocationID,
		Intent: g.Intent, Class: string(g.Class), IssuedAt: timestamppb.New(g.IssuedAt), ExpiresAt: timestamppb.New(g.ExpiresAt),
		Revoked: in.Revoked, Expired: in.Expired, DryRun: g.DryRun,
		RunId: g.RunID, AccessGrantId: g.AccessGrantID, Budget: budgetToProto(g.Budget), Residency: g.Residency, OnViolation: g.OnViolation}
	for _, d := range g.Destinations {
		resp.Destinations = append(resp.Destinations, &brokerv1.Destination{Host: d.Host, Port: uint32(d.Port),
			PathPrefix: d.PathPrefix, Methods: d.Methods})
	}
	if l := in.Lease; l != nil {
		resp.Lease = &brokerv1.LeaseState{Fingerprint: l.Fingerprint, State: l.State, Renewable: l.Renewable}
		if !l.ObtainedAt.IsZero() {
			resp.Lease.ObtainedAt, resp.Lease.ExpiresAt = timestamppb.New(l.ObtainedAt), timestamppb.New(l.ExpiresAt)
		}
	}
	return resp, nil
}

// RevokeHandle implements BrokerService.
func (s *Service) RevokeHandle(ctx context.Context, r *brokerv1.RevokeHandleRequest) (*brokerv1.RevokeResponse, error) {
	n, err := s.Broker.RevokeHandle(ctx, r.GetFingerprint())
	if err != nil {
		return nil, s.fail(err)
	}
	return &brokerv1.RevokeResponse{Revoked: uint32(n)}, nil
}

// Explain implements BrokerService: the handle (by fingerprint) or an
// intent (as a handle issued with its own destinations would be), then
// the proxy's checks for the request.
func (s *Service) Explain(ctx context.Context, r *brokerv1.ExplainRequest) (*brokerv1.ExplainResponse, error) {
	if s.Explainer == nil {
		return nil, status.Error(codes.Unimplemented, "explain: no egress proxy in this process")
	}
	resp := &brokerv1.ExplainResponse{}
	var g *broker.Grant
	switch {
	case r.GetFingerprint() != "":
		in, err := s.Broker.Inspect(ctx, r.GetFingerprint())
		if err != nil {
			return nil, s.fail(err)
		}
		g = &in.Grant
		step := &brokerv1.ExplainStep{Check: "handle", Ok: !in.Revoked && !in.Expired,
			Detail: "plugin " + g.PluginID + ", invocation " + g.InvocationID + ", intent " + g.Intent}
		switch {
		case in.Revoked:
			step.Detail = "revoked: every request with it is refused (handle_invalid)"
		case in.Expired:
			step.Detail = "expired at " + g.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z") + " (handle_invalid)"
		}
		resp.Steps = append(resp.Steps, step)
		if !step.Ok {
			resp.Code = "handle_invalid"
			return resp, nil
		}
	case r.GetIntent() != "":
		in, ok := s.Broker.Intent(r.GetIntent())
		if !ok {
			return nil, s.fail(broker.ErrIntentUnknown)
		}
		g = &broker.Grant{PluginID: "(explain)", InvocationID: "(explain)", Intent: r.GetIntent(), Class: in.Class, Destinations: in.Destinations}
		resp.Steps = append(resp.Steps, &brokerv1.ExplainStep{Check: "intent", Ok: true,
			Detail: "as a handle issued for " + r.GetIntent() + " with the intent's destinations would be"})
	default:
		return nil, s.fail(broker.ErrBadRequest)
	}
	ex := s.Explainer.Explain(ctx, g, r.GetMethod(), r.GetUrl())
	resp.Allowed, resp.Code = ex.Allowed, ex.Code
	for _, st := range ex.Steps {
		resp.Steps = append(resp.Steps, &brokerv1.ExplainStep{Check: st.Check, Ok: st.OK, Detail: st.Detail})
	}
	return resp, nil
}
