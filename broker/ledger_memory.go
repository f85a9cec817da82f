package broker

import (
	"context"
	"slices"
	"sort"
	"time"
)

var (
	_ Ledger = (*MemoryStore)(nil)
	_ Ledger = (*RedisStore)(nil)
)

// memLedger is the memory store's ledger, guarded by the store's lock.
type memLedger struct {
	spend      map[string]*memSpend
	violations map[string][]Violation // "inv:"/"plg:" id -> oldest first
	violUntil  map[string]time.Time
	grants     map[string]*AccessGrant
	approvals  map[string]*Approval
}

type memSpend struct {
	s     Spend
	until time.Time
}

// ledgerLocked returns the ledger, made on first use (the caller holds
// s.mu for writing).
func (s *MemoryStore) ledgerLocked() *memLedger {
	if s.led == nil {
		s.led = &memLedger{spend: map[string]*memSpend{}, violations: map[string][]Violation{},
			violUntil: map[string]time.Time{}, grants: map[string]*AccessGrant{}, approvals: map[string]*Approval{}}
	}
	return s.led
}

// Charge implements Ledger: under the store's lock, so all lines are
// checked and counted at once.
func (s *MemoryStore) Charge(_ context.Context, lines []BudgetLine, add Spend) error {
	if err := checkCharge(lines, add); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, now := s.ledgerLocked(), s.now()
	for _, line := range lines {
		var cur Spend
		if e := l.spend[line.Key]; e != nil && now.Before(e.until) {
			cur = e.s
		}
		if err := exceeds(line.Key, cur, add, line.Limits); err != nil {
			return err
		}
	}
	if add.IsZero() {
		return nil
	}
	for _, line := range lines {
		e := l.spend[line.Key]
		if e == nil || !now.Before(e.until) {
			e = &memSpend{}
			l.spend[line.Key] = e
		}
		for _, d := range spendDims {
			*d.get(&e.s) += *d.get(&add)
		}
		e.until = now.Add(spendTTL(line.Key))
	}
	return nil
}

// Spent implements Ledger.
func (s *MemoryStore) Spent(_ context.Context, key string) (Spend, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.led == nil {
		return Spend{}, nil
	}
	if e := s.led.spend[key]; e != nil && s.now().Before(e.until) {
		return e.s, nil
	}
	return Spend{}, nil
}

// RecordViolation implements Ledger.
func (s *MemoryStore) RecordViolation(_ context.Context, v Violation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgerLocked()
	if v.At.IsZero() {
		v.At = s.now()
	}
	until := s.now().Add(ledgerRetention)
	for _, k := range []string{"inv:" + v.InvocationID, "plg:" + v.PluginID} {
		list := append(l.violations[k], v)
		if len(list) > MaxViolationsPerKey {
			list = slices.Clone(list[len(list)-MaxViolationsPerKey:])
		}
		l.violations[k], l.violUntil[k] = list, until
	}
	return nil
}

// Violations implements Ledger.
func (s *MemoryStore) Violations(_ context.Context, invocationID string) ([]Violation, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.led == nil {
		return nil, nil
	}
	return slices.Clone(s.led.violations["inv:"+invocationID]), nil
}

// PluginViolations implements Ledger.
func (s *MemoryStore) PluginViolations(_ context.Context, pluginID string, since time.Time) ([]Violation, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.led == nil {
		return nil, nil
	}
	var out []Violation
	for _, v := range s.led.violations["plg:"+pluginID] {
		if !v.At.Before(since) {
			out = append(out, v)
		}
	}
	return out, nil
}

// PutAccessGrant implements Ledger. Writing a grant again keeps its
// revocation.
func (s *MemoryStore) PutAccessGrant(_ context.Context, g *AccessGrant) error {
	if err := checkAccessGrant(g); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgerLocked()
	if _, ok := l.grants[g.ID]; !ok && len(l.grants)+len(l.approvals) >= s.max {
		s.sweepLedgerLocked(s.now())
		if len(l.grants)+len(l.approvals) >= s.max {
			return ErrStoreFull
		}
	}
	c := cloneGrant(g)
	c.RevokedAt, c.RevokedBy = time.Time{}, ""
	if old := l.grants[g.ID]; old != nil {
		// Writing a grant again never undoes its revocation.
		c.RevokedAt, c.RevokedBy = old.RevokedAt, old.RevokedBy
	}
	l.grants[g.ID] = c
	return nil
}

// GetAccessGrant implements Ledger.
func (s *MemoryStore) GetAccessGrant(_ context.Context, id string) (*AccessGrant, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.led == nil || s.led.grants[id] == nil {
		return nil, ErrGrantUnknown
	}
	return cloneGrant(s.led.grants[id]), nil
}

// ListAccessGrants implements Ledger: every grant the store holds (live,
// expired or revoked within ledgerRetention), by issue time.
func (s *MemoryStore) ListAccessGrants(context.Context) ([]*AccessGrant, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*AccessGrant
	if s.led != nil {
		for _, g := range s.led.grants {
			out = append(out, cloneGrant(g))
		}
	}
	sortGrants(out)
	return out, nil
}

// RevokeAccessGrant implements Ledger.
func (s *MemoryStore) RevokeAccessGrant(_ context.Context, id, by string, at time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgerLocked()
	g := l.grants[id]
	switch {
	case g == nil:
		return false, ErrGrantUnknown
	case !g.RevokedAt.IsZero():
		return false, nil
	}
	g.RevokedAt, g.RevokedBy = at, by
	return true, nil
}

// PutApproval implements Ledger: it stores a (replacing the record with
// its id).
func (s *MemoryStore) PutApproval(_ context.Context, a *Approval) error {
	if err := checkApproval(a); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgerLocked()
	if _, ok := l.approvals[a.ID]; !ok && len(l.grants)+len(l.approvals) >= s.max {
		s.sweepLedgerLocked(s.now())
		if len(l.grants)+len(l.approvals) >= s.max {
			return ErrStoreFull
		}
	}
	l.approvals[a.ID] = cloneApproval(a)
	return nil
}

// GetApproval implements Ledger.
func (s *MemoryStore) GetApproval(_ context.Context, id string) (*Approval, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.led == nil || s.led.approvals[id] == nil {
		return nil, ErrApprovalUnknown
	}
	return cloneApproval(s.led.approvals[id]).settle(s.now()), nil
}

// ListApprovals implements Ledger, by creation time.
func (s *MemoryStore) ListApprovals(context.Context) ([]*Approval, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*Approval
	if s.led != nil {
		for _, a := range s.led.approvals {
			out = append(out, cloneApproval(a).settle(s.now()))
		}
	}
	sortApprovals(out)
	return out, nil
}

// DecideApproval implements Ledger.
func (s *MemoryStore) DecideApproval(_ context.Context, id, approver string, approve bool, at time.Time) (*Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgerLocked()
	cur := l.approvals[id]
	if cur == nil {
		return nil, ErrApprovalUnknown
	}
	a := cloneApproval(cur)
	if err := a.decide(approver, approve, at); err != nil {
		return nil, err
	}
	l.approvals[id] = cloneApproval(a)
	return a, nil
}

// sweepLedgerLocked drops spend past its time, violations past
// retention, and grants and approvals ledgerRetention past their end.
func (s *MemoryStore) sweepLedgerLocked(now time.Time) {
	l := s.led
	if l == nil {
		return
	}
	for k, e := range l.spend {
		if !now.Before(e.until) {
			delete(l.spend, k)
		}
	}
	for k, until := range l.violUntil {
		if !now.Before(until) {
			delete(l.violUntil, k)
			delete(l.violations, k)
		}
	}
	for id, g := range l.grants {
		if now.After(g.NotAfter.Add(ledgerRetention)) {
			delete(l.grants, id)
		}
	}
	for id, a := range l.approvals {
		if now.After(a.ExpiresAt.Add(ledgerRetention)) {
			delete(l.approvals, id)
		}
	}
}

func cloneGrant(g *AccessGrant) *AccessGrant {
	c := *g
	c.Plugins, c.Methods, c.Residency = slices.Clone(g.Plugins), slices.Clone(g.Methods), slices.Clone(g.Residency)
	return &c
}

func cloneApproval(a *Approval) *Approval {
	c := *a
	c.Eligible = slices.Clone(a.Eligible)
	c.Approvers = slices.Clone(a.Approvers)
	return &c
}

func sortGrants(gs []*AccessGrant) {
	sort.Slice(gs, func(i, j int) bool {
		if !gs[i].IssuedAt.Equal(gs[j].IssuedAt) {
			return gs[i].IssuedAt.Before(gs[j].IssuedAt)
		}
		return gs[i].ID < gs[j].ID
	})
}

func sortApprovals(as []*Approval) {
	sort.Slice(as, func(i, j int) bool {
		if !as[i].CreatedAt.Equal(as[j].CreatedAt) {
			return as[i].CreatedAt.Before(as[j].CreatedAt)
		}
		return as[i].ID < as[j].ID
	})
}
