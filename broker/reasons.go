package broker

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/airlock-dev/airlock/tokens"
)

// reasons maps broker and token errors to the reason codes used in
// metrics and the gRPC API, and to gRPC status codes. The Go client maps
// a reason back to its error, so errors.Is works across the socket.
var reasons = []struct {
	err    error
	reason string
	code   codes.Code
}{
	// First: an owed revocation wraps the store's error it was owed for.
	{ErrRevocationOwed, "revocation_owed", codes.Unavailable},
	{ErrBadRequest, "bad_request", codes.InvalidArgument},
	{ErrIntentUnknown, "intent_unknown", codes.NotFound},
	{ErrIntentUnbound, "intent_unbound", codes.FailedPrecondition},
	{ErrDeadlinePassed, "deadline_passed", codes.FailedPrecondition},
	{ErrDryRunWrite, "dry_run_write", codes.PermissionDenied},
	{ErrResidencyViolation, "residency_violation", codes.PermissionDenied},
	{ErrIssueLimit, "limit", codes.ResourceExhausted},
	{ErrInvocationRevoked, "revoked", codes.PermissionDenied},
	{ErrStoreFull, "store_full", codes.ResourceExhausted},
	{ErrStoreUnavailable, "store_unavailable", codes.Unavailable},
	{ErrRevocationUnreplicated, "revocation_unreplicated", codes.Unavailable},
	{ErrHandleUnknown, "handle_unknown", codes.NotFound},
	{ErrHandleRevoked, "handle_revoked", codes.PermissionDenied},
	{ErrHandleExpired, "handle_expired", codes.FailedPrecondition},
	{tokens.ErrDeadlinePassed, "token_deadline_passed", codes.FailedPrecondition},
	{tokens.ErrInvalidBinding, "token_binding", codes.InvalidArgument},
	// The ledger's (ledger.go).
	{ErrBudgetExhausted, "budget_exhausted", codes.ResourceExhausted},
	{ErrGrantUnknown, "grant_unknown", codes.NotFound},
	{ErrGrantRevoked, "grant_revoked", codes.PermissionDenied},
	{ErrApprovalUnknown, "approval_unknown", codes.NotFound},
	{ErrApprovalDecided, "approval_decided", codes.FailedPrecondition},
	{ErrApprovalExpired, "approval_expired", codes.FailedPrecondition},
	{ErrSelfApproval, "self_approval", codes.PermissionDenied},
	{ErrNotEligible, "not_eligible", codes.PermissionDenied},
	{ErrAlreadyApproved, "already_approved", codes.AlreadyExists},
}

// Reason is err's reason code and gRPC status code: "error" and
// codes.Internal for an error the table does not name.
func Reason(err error) (reason string, code codes.Code) {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason, r.code
		}
	}
	return "error", codes.Internal
}

// ReasonError is the error a reason code stands for, so errors.Is works
// on the client side of the API; false for a reason the table lacks.
func ReasonError(reason string) (error, bool) {
	for _, r := range reasons {
		if r.reason == reason {
			return r.err, true
		}
	}
	return nil, false
}
