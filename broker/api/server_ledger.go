package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/broker"
	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"
)

// ledgerServer serves LedgerService from the broker's store, beside
// BrokerService on the same listeners and with the same authentication.
type ledgerServer struct {
	brokerv1.UnimplementedLedgerServiceServer
	s *Service
}

func (l *ledgerServer) ledger() (broker.Ledger, error) {
	if led := l.s.Broker.Ledger(); led != nil {
		return led, nil
	}
	return nil, status.Error(codes.Unimplemented, "this broker's handle store keeps no ledger")
}

func spendToProto(s broker.Spend) *brokerv1.LedgerSpend {
	return &brokerv1.LedgerSpend{Calls: s.Calls, CostMicros: s.CostMicros, EgressRequests: s.EgressRequests,
		EgressBytes: s.EgressBytes, Tokens: s.Tokens}
}

func spendFromProto(p *brokerv1.LedgerSpend) broker.Spend {
	return broker.Spend{Calls: p.GetCalls(), CostMicros: p.GetCostMicros(), EgressRequests: p.GetEgressRequests(),
		EgressBytes: p.GetEgressBytes(), Tokens: p.GetTokens()}
}

func violationToProto(v broker.Violation) *brokerv1.LedgerViolation {
	return &brokerv1.LedgerViolation{InvocationId: v.InvocationID, PluginId: v.PluginID, Kind: v.Kind, At: timestamppb.New(v.At)}
}

func violationFromProto(p *brokerv1.LedgerViolation) broker.Violation {
	return broker.Violation{InvocationID: p.GetInvocationId(), PluginID: p.GetPluginId(), Kind: p.GetKind(), At: timeOf(p.GetAt())}
}

// decodeRecord decodes a record's JSON strictly.
func decodeRecord(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: the record is not valid JSON for its type", broker.ErrBadRequest)
	}
	return nil
}

// Charge implements LedgerService.
func (l *ledgerServer) Charge(ctx context.Context, r *brokerv1.LedgerChargeRequest) (*brokerv1.LedgerChargeResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	lines := make([]broker.BudgetLine, len(r.GetLines()))
	for i, p := range r.GetLines() {
		lines[i] = broker.BudgetLine{Key: p.GetKey(), Limits: spendFromProto(p.GetLimits())}
	}
	err = led.Charge(ctx, lines, spendFromProto(r.GetAdd()))
	var be *broker.BudgetExhaustedError
	if errors.As(err, &be) {
		return &brokerv1.LedgerChargeResponse{Exhausted: &brokerv1.LedgerBudgetExhausted{Key: be.Key, Dimension: be.Dimension,
			Limit: be.Limit, Spent: be.Spent}}, nil
	}
	if err != nil {
		return nil, l.s.fail(err)
	}
	return &brokerv1.LedgerChargeResponse{}, nil
}

// Spent implements LedgerService.
func (l *ledgerServer) Spent(ctx context.Context, r *brokerv1.LedgerSpentRequest) (*brokerv1.LedgerSpentResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	sp, err := led.Spent(ctx, r.GetKey())
	if err != nil {
		return nil, l.s.fail(err)
	}
	return &brokerv1.LedgerSpentResponse{Spent: spendToProto(sp)}, nil
}

// RecordViolation implements LedgerService.
func (l *ledgerServer) RecordViolation(ctx context.Context, r *brokerv1.LedgerRecordViolationRequest) (*brokerv1.LedgerRecordViolationResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	if err := led.RecordViolation(ctx, violationFromProto(r.GetViolation())); err != nil {
		return nil, l.s.fail(err)
	}
	return &brokerv1.LedgerRecordViolationResponse{}, nil
}

// ListViolations implements LedgerService.
func (l *ledgerServer) ListViolations(ctx context.Context, r *brokerv1.LedgerListViolationsRequest) (*brokerv1.LedgerListViolationsResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	var vs []broker.Violation
	switch {
	case r.GetInvocationId() != "" && r.GetPluginId() == "":
		vs, err = led.Violations(ctx, r.GetInvocationId())
	case r.GetPluginId() != "" && r.GetInvocationId() == "":
		vs, err = led.PluginViolations(ctx, r.GetPluginId(), timeOf(r.GetSince()))
	default:
		return nil, statusOf(fmt.Errorf("%w: exactly one of invocation_id and plugin_id", broker.ErrBadRequest))
	}
	if err != nil {
		return nil, l.s.fail(err)
	}
	resp := &brokerv1.LedgerListViolationsResponse{}
	for _, v := range vs {
		resp.Violations = append(resp.Violations, violationToProto(v))
	}
	return resp, nil
}

// PutAccessGrant implements LedgerService.
func (l *ledgerServer) PutAccessGrant(ctx context.Context, r *brokerv1.LedgerPutAccessGrantRequest) (*brokerv1.LedgerPutResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	var g broker.AccessGrant
	if err := decodeRecord(r.GetGrantJson(), &g); err != nil {
		return nil, statusOf(err)
	}
	if err := led.PutAccessGrant(ctx, &g); err != nil {
		return nil, l.s.fail(err)
	}
	return &brokerv1.LedgerPutResponse{}, nil
}

// GetAccessGrant implements LedgerService.
func (l *ledgerServer) GetAccessGrant(ctx context.Context, r *brokerv1.LedgerGetRequest) (*brokerv1.LedgerAccessGrantResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	g, err := led.GetAccessGrant(ctx, r.GetId())
	if err != nil {
		return nil, l.s.fail(err)
	}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, l.s.fail(err)
	}
	return &brokerv1.LedgerAccessGrantResponse{GrantJson: b}, nil
}

// ListAccessGrants implements LedgerService.
func (l *ledgerServer) ListAccessGrants(ctx context.Context, _ *brokerv1.LedgerListRequest) (*brokerv1.LedgerListAccessGrantsResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	gs, err := led.ListAccessGrants(ctx)
	if err != nil {
		return nil, l.s.fail(err)
	}
	resp := &brokerv1.LedgerListAccessGrantsResponse{}
	for _, g := range gs {
		b, err := json.Marshal(g)
		if err != nil {
			return nil, l.s.fail(err)
		}
		resp.GrantsJson = append(resp.GrantsJson, b)
	}
	return resp, nil
}

// RevokeAccessGrant implements LedgerService.
func (l *ledgerServer) RevokeAccessGrant(ctx context.Context, r *brokerv1.LedgerRevokeAccessGrantRequest) (*brokerv1.LedgerRevokeAccessGrantResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	if r.GetId() == "" || r.GetBy() == "" || r.GetAt() == nil {
		return nil, statusOf(fmt.Errorf("%w: id, by and at are required", broker.ErrBadRequest))
	}
	live, err := led.RevokeAccessGrant(ctx, r.GetId(), r.GetBy(), r.GetAt().AsTime())
	if err != nil {
		return nil, l.s.fail(err)
	}
	return &brokerv1.LedgerRevokeAccessGrantResponse{WasLive: live}, nil
}

// PutApproval implements LedgerService.
func (l *ledgerServer) PutApproval(ctx context.Context, r *brokerv1.LedgerPutApprovalRequest) (*brokerv1.LedgerPutResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	var a broker.Approval
	if err := decodeRecord(r.GetApprovalJson(), &a); err != nil {
		return nil, statusOf(err)
	}
	if err := led.PutApproval(ctx, &a); err != nil {
		return nil, l.s.fail(err)
	}
	return &brokerv1.LedgerPutResponse{}, nil
}

// GetApproval implements LedgerService.
func (l *ledgerServer) GetApproval(ctx context.Context, r *brokerv1.LedgerGetRequest) (*brokerv1.LedgerApprovalResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	a, err := led.GetApproval(ctx, r.GetId())
	if err != nil {
		return nil, l.s.fail(err)
	}
	return l.approvalResponse(a)
}

func (l *ledgerServer) approvalResponse(a *broker.Approval) (*brokerv1.LedgerApprovalResponse, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, l.s.fail(err)
	}
	return &brokerv1.LedgerApprovalResponse{ApprovalJson: b}, nil
}

// ListApprovals implements LedgerService.
func (l *ledgerServer) ListApprovals(ctx context.Context, _ *brokerv1.LedgerListRequest) (*brokerv1.LedgerListApprovalsResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	as, err := led.ListApprovals(ctx)
	if err != nil {
		return nil, l.s.fail(err)
	}
	resp := &brokerv1.LedgerListApprovalsResponse{}
	for _, a := range as {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, l.s.fail(err)
		}
		resp.ApprovalsJson = append(resp.ApprovalsJson, b)
	}
	return resp, nil
}

// DecideApproval implements LedgerService.
func (l *ledgerServer) DecideApproval(ctx context.Context, r *brokerv1.LedgerDecideApprovalRequest) (*brokerv1.LedgerApprovalResponse, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	if r.GetAt() == nil {
		return nil, statusOf(fmt.Errorf("%w: at is required", broker.ErrBadRequest))
	}
	a, err := led.DecideApproval(ctx, r.GetId(), r.GetApprover(), r.GetApprove(), r.GetAt().AsTime())
	if err != nil {
		return nil, l.s.fail(err)
	}
	return l.approvalResponse(a)
}
