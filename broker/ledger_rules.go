package broker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/randid"
)

// The rules both stores apply to ledger records, in one place: what a
// charge may count, how long records live, and how an approval moves
// from pending to granted, denied or expired.

// Ledger retention.
const (
	// MaxAccessGrantTTL is the longest an access grant may live.
	MaxAccessGrantTTL = 30 * 24 * time.Hour
	// ledgerRetention keeps revoked and expired access grants, decided
	// and expired approvals, and violations this long past their end, so
	// they can be inspected.
	ledgerRetention = 7 * 24 * time.Hour
	// invocationSpendTTL keeps an invocation's spend this long after its
	// last charge (an invocation lasts at most an hour).
	invocationSpendTTL = 24 * time.Hour
	// spendKeyTTL keeps a run's or an access grant's spend this long after
	// its last charge: longer than any grant lives, so a grant's spend is
	// never forgotten while the grant can still be used.
	spendKeyTTL = MaxAccessGrantTTL + 24*time.Hour
	// maxChargeLines bounds the lines of one charge (an invocation's, a
	// run's and a grant's are three).
	maxChargeLines = 8
	// MaxViolationsPerKey bounds the violations kept per invocation and
	// per plugin: the oldest are dropped past it.
	MaxViolationsPerKey = 1000
)

// spendTTL is how long the spend under key lives after a charge.
func spendTTL(key string) time.Duration {
	if strings.HasPrefix(key, "invocation:") {
		return invocationSpendTTL
	}
	return spendKeyTTL
}

// spendDims are a Spend's dimensions, in the order a charge checks them,
// with the names a BudgetExhaustedError gives.
var spendDims = []struct {
	name string
	get  func(*Spend) *int64
}{
	{"calls", func(s *Spend) *int64 { return &s.Calls }},
	{"cost_micros", func(s *Spend) *int64 { return &s.CostMicros }},
	{"egress_requests", func(s *Spend) *int64 { return &s.EgressRequests }},
	{"egress_bytes", func(s *Spend) *int64 { return &s.EgressBytes }},
	{"tokens", func(s *Spend) *int64 { return &s.Tokens }},
}

// vector is s as spendDims orders it.
func (s Spend) vector() []int64 {
	v := make([]int64, len(spendDims))
	for i, d := range spendDims {
		v[i] = *d.get(&s)
	}
	return v
}

func spendOf(v []int64) Spend {
	var s Spend
	for i, d := range spendDims {
		if i < len(v) {
			*d.get(&s) = v[i]
		}
	}
	return s
}

// IsZero reports whether nothing is spent (or limited).
func (s Spend) IsZero() bool { return s == Spend{} }

// checkCharge validates a charge before either store runs it.
func checkCharge(lines []BudgetLine, add Spend) error {
	for i, d := range spendDims {
		if *d.get(&add) < 0 {
			return fmt.Errorf("%w: charge: %s is negative", ErrBadRequest, spendDims[i].name)
		}
	}
	if len(lines) > maxChargeLines {
		return fmt.Errorf("%w: charge: at most %d lines", ErrBadRequest, maxChargeLines)
	}
	seen := make(map[string]bool, len(lines))
	for i, l := range lines {
		if l.Key == "" {
			return fmt.Errorf("%w: charge: line %d has no key", ErrBadRequest, i)
		}
		if seen[l.Key] {
			return fmt.Errorf("%w: charge: line %d repeats a key", ErrBadRequest, i)
		}
		seen[l.Key] = true
		for _, d := range spendDims {
			if *d.get(&l.Limits) < 0 {
				return fmt.Errorf("%w: charge: line %d: %s limit is negative", ErrBadRequest, i, d.name)
			}
		}
	}
	return nil
}

// exceeds says whether adding add to cur breaks lim, and where. A
// dimension is checked when add counts in it (cur+add > limit); a zero
// add checks every limited dimension for room left (cur >= limit), so a
// budget spent to its limit refuses the next call.
func exceeds(key string, cur, add, lim Spend) *BudgetExhaustedError {
	zero := add.IsZero()
	for _, d := range spendDims {
		l, c, a := *d.get(&lim), *d.get(&cur), *d.get(&add)
		if l <= 0 {
			continue
		}
		if (zero && c >= l) || (a > 0 && c+a > l) {
			return &BudgetExhaustedError{Key: key, Dimension: d.name, Limit: l, Spent: c}
		}
	}
	return nil
}

// checkAccessGrant refuses a grant record a store should not keep.
func checkAccessGrant(g *AccessGrant) error {
	switch {
	case g == nil || g.ID == "":
		return fmt.Errorf("%w: access grant: id is required", ErrBadRequest)
	case g.NotAfter.IsZero():
		return fmt.Errorf("%w: access grant: not_after is required", ErrBadRequest)
	case g.Uses < 0:
		return fmt.Errorf("%w: access grant: uses is negative", ErrBadRequest)
	}
	return nil
}

// checkApproval refuses an approval record a store should not keep.
func checkApproval(a *Approval) error {
	switch {
	case a == nil || a.ID == "":
		return fmt.Errorf("%w: approval: id is required", ErrBadRequest)
	case a.ExpiresAt.IsZero():
		return fmt.Errorf("%w: approval: expires_at is required", ErrBadRequest)
	case a.Requester == "":
		return fmt.Errorf("%w: approval: requester is required", ErrBadRequest)
	case a.Required < 1:
		return fmt.Errorf("%w: approval: required must be at least 1", ErrBadRequest)
	}
	return nil
}

// settle returns a with its state as of now: a pending approval past
// its expiry is expired, whether or not a store wrote that down.
func (a *Approval) settle(now time.Time) *Approval {
	if a.State == ApprovalPending && !now.Before(a.ExpiresAt) {
		a.State = ApprovalExpired
	}
	return a
}

// decide applies approver's decision to a (a pending approval, changed
// in place), or says why it may not: the approval is decided or expired,
// the approver is the requester, is not eligible, or approved already.
func (a *Approval) decide(approver string, approve bool, at time.Time) error {
	a.settle(at)
	switch {
	case approver == "":
		return fmt.Errorf("%w: approval: approver is required", ErrBadRequest)
	case a.State == ApprovalExpired:
		return ErrApprovalExpired
	case a.State != ApprovalPending:
		return ErrApprovalDecided
	case approver == a.Requester:
		return ErrSelfApproval
	case len(a.Eligible) > 0 && !matchesAny(a.Eligible, approver):
		return ErrNotEligible
	}
	if !approve {
		a.Denier, a.State = approver, ApprovalDenied
		return nil
	}
	if slices.Contains(a.Approvers, approver) {
		return ErrAlreadyApproved
	}
	a.Approvers = append(a.Approvers, approver)
	if len(a.Approvers) >= a.Required {
		a.State = ApprovalGranted
	}
	return nil
}

// namePattern reports whether pattern covers name: "*", a trailing "*"
// (a prefix), or the exact name.
func namePattern(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if namePattern(p, name) {
			return true
		}
	}
	return false
}

// NewAccessGrantID is a fresh access grant id: "g_" and 128 random bits,
// hex.
func NewAccessGrantID() string { return "g_" + randid.Hex(16) }

// NewApprovalID is a fresh approval id: "ap_" and 128 random bits, hex.
func NewApprovalID() string { return "ap_" + randid.Hex(16) }
