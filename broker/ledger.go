package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The ledger is the decision point's shared state: access grants,
// approvals, budget spend and violations. It lives in the handle store
// (MemoryStore, RedisStore), so every replica sharing the store sees the
// same grants, approvals and spend.

// AccessGrant is authority an operator (or an approval) gave: who may
// call what, until when, within which budget and residency. A grant only
// narrows what the policy allows; it never widens it. (Grant, in this
// package, is what one handle stands for.)
type AccessGrant struct {
	ID string `json:"id"`
	// Principal and Actor the grant is for ("" matches any; at least one
	// is set). Actor is "kind:id" ("user:alice").
	Principal string `json:"principal,omitempty"`
	Actor     string `json:"actor,omitempty"`
	// Plugins and Methods it covers (exact names, "*", or a trailing "*"
	// prefix); RiskCeiling the highest risk class it covers
	// ("read", "low", "write", "privileged"; "" = any the methods name).
	Plugins     []string `json:"plugins,omitempty"`
	Methods     []string `json:"methods,omitempty"`
	RiskCeiling string   `json:"risk_ceiling,omitempty"`
	// Budget bounds what all calls under the grant may spend together.
	Budget Limits `json:"budget,omitzero"`
	// Residency lists the regions the grant's calls may reach ("" none:
	// no limit).
	Residency []string `json:"residency,omitempty"`
	// PlanDigest and RunID, when set, bind the grant to one plan or run.
	PlanDigest string `json:"plan_digest,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	// RequestDigest, when set (a grant made from an approval), binds it to
	// calls whose request digest is this one; Uses, when > 0, is how many
	// calls it covers in all.
	RequestDigest string `json:"request_digest,omitempty"`
	Uses          int    `json:"uses,omitempty"`
	// FromApproval names the approval the grant was made from.
	FromApproval string    `json:"from_approval,omitempty"`
	IssuedBy     string    `json:"issued_by"`
	IssuedAt     time.Time `json:"issued_at"`
	NotAfter     time.Time `json:"not_after"`
	RevokedAt    time.Time `json:"revoked_at,omitzero"`
	RevokedBy    string    `json:"revoked_by,omitempty"`
}

// Spend is what was spent, and Limits what may be (a zero field: no
// limit). Cost is in micro-units of the plugin's cost unit
// (plugin/v1 Cost.micros); Tokens are Executa sampling tokens.
type Spend struct {
	Calls          int64 `json:"calls,omitempty"`
	CostMicros     int64 `json:"cost_micros,omitempty"`
	EgressRequests int64 `json:"egress_requests,omitempty"`
	EgressBytes    int64 `json:"egress_bytes,omitempty"`
	Tokens         int64 `json:"tokens,omitempty"`
}

// Limits bound a Spend; a zero field is no limit.
type Limits = Spend

// Budget keys: what a charge is counted under.
func BudgetKeyInvocation(id string) string { return "invocation:" + id }

// BudgetKeyRun is the key of a run's budget.
func BudgetKeyRun(id string) string { return "run:" + id }

// BudgetKeyGrant is the key of an access grant's budget.
func BudgetKeyGrant(id string) string { return "grant:" + id }

// BudgetLine is one budget a charge counts against: its key and limits.
type BudgetLine struct {
	Key    string `json:"key"`
	Limits Limits `json:"limits,omitzero"`
}

// BudgetExhaustedError says which budget (key) and which dimension
// ("calls", "cost_micros", "egress_requests", "egress_bytes", "tokens")
// a charge would have exceeded. Nothing of the charge was counted.
type BudgetExhaustedError struct {
	Key       string
	Dimension string
	Limit     int64
	Spent     int64
}

func (e *BudgetExhaustedError) Error() string {
	return fmt.Sprintf("budget exhausted: %s %s (limit %d, spent %d)", e.Key, e.Dimension, e.Limit, e.Spent)
}

// Is makes errors.Is(err, ErrBudgetExhausted) hold.
func (e *BudgetExhaustedError) Is(target error) bool { return target == ErrBudgetExhausted }

// Ledger errors.
var (
	ErrBudgetExhausted    = errors.New("budget exhausted")
	ErrResidencyViolation = errors.New("residency violation")
	ErrGrantUnknown       = errors.New("no access grant has this id")
	ErrGrantRevoked       = errors.New("access grant revoked")
	ErrApprovalUnknown    = errors.New("no approval has this id")
	// ErrApprovalDecided: the approval is granted or denied already.
	ErrApprovalDecided = errors.New("approval already decided")
	// ErrApprovalExpired: the approval was not decided before ExpiresAt.
	ErrApprovalExpired = errors.New("approval expired")
	// ErrSelfApproval: the requester may not decide their own approval.
	ErrSelfApproval = errors.New("the requester may not decide their own approval")
	// ErrNotEligible: the approval's Eligible list does not name the
	// approver.
	ErrNotEligible = errors.New("not eligible to decide this approval")
	// ErrAlreadyApproved: this approver's approval is counted already.
	ErrAlreadyApproved = errors.New("approver already approved")
)

// Violation is a plugin's attempt to use authority it was not given, as
// the proxy, broker or host saw it.
type Violation struct {
	InvocationID string `json:"invocation_id"`
	PluginID     string `json:"plugin_id"`
	// Kind: destination_not_declared, handle_other_plugin,
	// handle_in_request, approval_input_changed, residency_violation,
	// budget_exhausted.
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
}

// Approval is a call waiting for, or decided by, people other than the
// one who asked.
type Approval struct {
	ID string `json:"id"`
	// RequestDigest is the digest of the exact request (plugin, method,
	// input, actor, dry run, plan digest): only that request is approved.
	RequestDigest string `json:"request_digest"`
	Plugin        string `json:"plugin"`
	Method        string `json:"method"`
	Requester     string `json:"requester"` // the principal who asked
	Actor         string `json:"actor,omitempty"`
	RunID         string `json:"run_id,omitempty"`
	// Rule is the policy rule that required the approval; Required how
	// many distinct approvers it needs.
	Rule     string `json:"rule"`
	Required int    `json:"required"`
	// Eligible, when set, are the principals (exact, or a trailing "*"
	// prefix) who may decide; the requester never may.
	Eligible []string `json:"eligible,omitempty"`
	// Approvers and Denier are principals who decided.
	Approvers []string  `json:"approvers,omitempty"`
	Denier    string    `json:"denier,omitempty"`
	State     string    `json:"state"` // pending | granted | denied | expired
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Uses > 1 asks that the approval become an access grant covering that
	// many calls with the same request digest (GrantID names it).
	Uses    int    `json:"uses,omitempty"`
	GrantID string `json:"grant_id,omitempty"`
}

// Approval states.
const (
	ApprovalPending = "pending"
	ApprovalGranted = "granted"
	ApprovalDenied  = "denied"
	ApprovalExpired = "expired"
)

// Ledger is the decision point's shared state, implemented by the handle
// stores.
type Ledger interface {
	// Charge adds add to every line's key at once, or to none: when any
	// line's limits would be exceeded it returns a *BudgetExhaustedError
	// naming the first such line and dimension, and counts nothing. A
	// zero add with limits checks without counting.
	Charge(ctx context.Context, lines []BudgetLine, add Spend) error
	// Spent returns what was charged under key.
	Spent(ctx context.Context, key string) (Spend, error)
	// RecordViolation remembers v under its invocation and its plugin (at
	// the store's time when v.At is zero);
	// Violations lists an invocation's violations in the order recorded,
	// PluginViolations a plugin's recorded at or after since.
	RecordViolation(ctx context.Context, v Violation) error
	Violations(ctx context.Context, invocationID string) ([]Violation, error)
	PluginViolations(ctx context.Context, pluginID string, since time.Time) ([]Violation, error)

	PutAccessGrant(ctx context.Context, g *AccessGrant) error
	// GetAccessGrant returns ErrGrantUnknown when there is none.
	GetAccessGrant(ctx context.Context, id string) (*AccessGrant, error)
	ListAccessGrants(ctx context.Context) ([]*AccessGrant, error)
	// RevokeAccessGrant marks the grant revoked (by, at); it reports
	// whether it was live.
	RevokeAccessGrant(ctx context.Context, id, by string, at time.Time) (bool, error)

	PutApproval(ctx context.Context, a *Approval) error
	GetApproval(ctx context.Context, id string) (*Approval, error)
	ListApprovals(ctx context.Context) ([]*Approval, error)
	// DecideApproval records approver's decision (approve or deny) on a
	// pending approval atomically, and returns the approval after it:
	// granted once Required distinct approvers approved, denied at the
	// first deny, expired once past ExpiresAt. The requester never counts.
	DecideApproval(ctx context.Context, id, approver string, approve bool, at time.Time) (*Approval, error)
}
