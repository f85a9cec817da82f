package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-dev/airlock/broker"
	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"
)

// Client implements Ledger over the broker API's LedgerService: a host
// whose broker is airlock serve keeps its grants, approvals and spend in
// serve's handle store, shared with every replica.
var _ broker.Ledger = (*Client)(nil)

func (c *Client) ledger() brokerv1.LedgerServiceClient {
	return brokerv1.NewLedgerServiceClient(c.conn)
}

// Charge implements Ledger: an exhausted budget comes back as the
// *BudgetExhaustedError the store returned.
func (c *Client) Charge(ctx context.Context, lines []broker.BudgetLine, add broker.Spend) error {
	r := &brokerv1.LedgerChargeRequest{Add: spendToProto(add)}
	for _, l := range lines {
		r.Lines = append(r.Lines, &brokerv1.LedgerBudgetLine{Key: l.Key, Limits: spendToProto(l.Limits)})
	}
	resp, err := c.ledger().Charge(ctx, r)
	if err != nil {
		return errorFromStatus(err)
	}
	if e := resp.GetExhausted(); e != nil {
		return &broker.BudgetExhaustedError{Key: e.GetKey(), Dimension: e.GetDimension(), Limit: e.GetLimit(), Spent: e.GetSpent()}
	}
	return nil
}

// Spent implements Ledger.
func (c *Client) Spent(ctx context.Context, key string) (broker.Spend, error) {
	resp, err := c.ledger().Spent(ctx, &brokerv1.LedgerSpentRequest{Key: key})
	if err != nil {
		return broker.Spend{}, errorFromStatus(err)
	}
	return spendFromProto(resp.GetSpent()), nil
}

// RecordViolation implements Ledger.
func (c *Client) RecordViolation(ctx context.Context, v broker.Violation) error {
	_, err := c.ledger().RecordViolation(ctx, &brokerv1.LedgerRecordViolationRequest{Violation: violationToProto(v)})
	if err != nil {
		return errorFromStatus(err)
	}
	return nil
}

// Violations implements Ledger.
func (c *Client) Violations(ctx context.Context, invocationID string) ([]broker.Violation, error) {
	return c.violations(ctx, &brokerv1.LedgerListViolationsRequest{InvocationId: invocationID})
}

// PluginViolations implements Ledger.
func (c *Client) PluginViolations(ctx context.Context, pluginID string, since time.Time) ([]broker.Violation, error) {
	return c.violations(ctx, &brokerv1.LedgerListViolationsRequest{PluginId: pluginID, Since: timestamppb.New(since)})
}

func (c *Client) violations(ctx context.Context, r *brokerv1.LedgerListViolationsRequest) ([]broker.Violation, error) {
	resp, err := c.ledger().ListViolations(ctx, r)
	if err != nil {
		return nil, errorFromStatus(err)
	}
	var out []broker.Violation
	for _, v := range resp.GetViolations() {
		out = append(out, violationFromProto(v))
	}
	return out, nil
}

// PutAccessGrant implements Ledger.
func (c *Client) PutAccessGrant(ctx context.Context, g *broker.AccessGrant) error {
	b, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("encode access grant: %w", err)
	}
	if _, err := c.ledger().PutAccessGrant(ctx, &brokerv1.LedgerPutAccessGrantRequest{GrantJson: b}); err != nil {
		return errorFromStatus(err)
	}
	return nil
}

// GetAccessGrant implements Ledger.
func (c *Client) GetAccessGrant(ctx context.Context, id string) (*broker.AccessGrant, error) {
	resp, err := c.ledger().GetAccessGrant(ctx, &brokerv1.LedgerGetRequest{Id: id})
	if err != nil {
		return nil, errorFromStatus(err)
	}
	g := &broker.AccessGrant{}
	if err := json.Unmarshal(resp.GetGrantJson(), g); err != nil {
		return nil, fmt.Errorf("broker: access grant record: %w", err)
	}
	return g, nil
}

// ListAccessGrants implements Ledger.
func (c *Client) ListAccessGrants(ctx context.Context) ([]*broker.AccessGrant, error) {
	resp, err := c.ledger().ListAccessGrants(ctx, &brokerv1.LedgerListRequest{})
	if err != nil {
		return nil, errorFromStatus(err)
	}
	out := make([]*broker.AccessGrant, 0, len(resp.GetGrantsJson()))
	for _, b := range resp.GetGrantsJson() {
		g := &broker.AccessGrant{}
		if err := json.Unmarshal(b, g); err != nil {
			return nil, fmt.Errorf("broker: access grant record: %w", err)
		}
		out = append(out, g)
	}
	return out, nil
}

// RevokeAccessGrant implements Ledger.
func (c *Client) RevokeAccessGrant(ctx context.Context, id, by string, at time.Time) (bool, error) {
	resp, err := c.ledger().RevokeAccessGrant(ctx, &brokerv1.LedgerRevokeAccessGrantRequest{Id: id, By: by, At: timestamppb.New(at)})
	if err != nil {
		return false, errorFromStatus(err)
	}
	return resp.GetWasLive(), nil
}

// PutApproval implements Ledger.
func (c *Client) PutApproval(ctx context.Context, a *broker.Approval) error {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode approval: %w", err)
	}
	if _, err := c.ledger().PutApproval(ctx, &brokerv1.LedgerPutApprovalRequest{ApprovalJson: b}); err != nil {
		return errorFromStatus(err)
	}
	return nil
}

// GetApproval implements Ledger.
func (c *Client) GetApproval(ctx context.Context, id string) (*broker.Approval, error) {
	resp, err := c.ledger().GetApproval(ctx, &brokerv1.LedgerGetRequest{Id: id})
	if err != nil {
		return nil, errorFromStatus(err)
	}
	return approvalFromJSON(resp.GetApprovalJson())
}

func approvalFromJSON(b []byte) (*broker.Approval, error) {
	a := &broker.Approval{}
	if err := json.Unmarshal(b, a); err != nil {
		return nil, fmt.Errorf("broker: approval record: %w", err)
	}
	return a, nil
}

// ListApprovals implements Ledger.
func (c *Client) ListApprovals(ctx context.Context) ([]*broker.Approval, error) {
	resp, err := c.ledger().ListApprovals(ctx, &brokerv1.LedgerListRequest{})
	if err != nil {
		return nil, errorFromStatus(err)
	}
	out := make([]*broker.Approval, 0, len(resp.GetApprovalsJson()))
	for _, b := range resp.GetApprovalsJson() {
		a, err := approvalFromJSON(b)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// DecideApproval implements Ledger.
func (c *Client) DecideApproval(ctx context.Context, id, approver string, approve bool, at time.Time) (*broker.Approval, error) {
	resp, err := c.ledger().DecideApproval(ctx, &brokerv1.LedgerDecideApprovalRequest{Id: id, Approver: approver,
		Approve: approve, At: timestamppb.New(at)})
	if err != nil {
		return nil, errorFromStatus(err)
	}
	return approvalFromJSON(resp.GetApprovalJson())
}
