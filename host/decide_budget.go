package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-dev/airlock/broker"
)

// budgetLines are the budgets a call counts against: its invocation's,
// its run's (when it names one) and its grant's (a grant made for N
// uses counts them as calls; one made from an approval counts them
// with the approval's own use).
func (ip invokePath) budgetLines(id string, run RunContext, g *broker.AccessGrant) []broker.BudgetLine {
	lines := []broker.BudgetLine{{Key: broker.BudgetKeyInvocation(id), Limits: ip.opts.Decision.InvocationBudget}}
	if run.RunID != "" {
		lines = append(lines, broker.BudgetLine{Key: broker.BudgetKeyRun(run.RunID), Limits: ip.opts.Decision.RunBudget})
	}
	if g != nil {
		lines = append(lines, g.BudgetLine())
		if g.FromApproval != "" && g.Uses > 0 {
			// The approval's own line bounds every call it let through,
			// the one that waited for it included, by the grant's uses.
			lines = append(lines, broker.BudgetLine{Key: approvalKeyOf(g.FromApproval), Limits: broker.Limits{Calls: int64(g.Uses)}})
		}
	}
	return lines
}

// chargeCall counts the call against its budgets, all or none; an
// exhausted budget refuses it, naming which. What remains becomes the
// ActionContext's budget.
func (ip invokePath) chargeCall(ctx context.Context, id, name string, req InvokeRequest, d *decision) error {
	d.lines = ip.budgetLines(id, req.Run, d.grant)
	l := ip.opts.Ledger
	if l == nil {
		d.budget = CallBudget{MaxCalls: ip.opts.Decision.InvocationBudget.Calls,
			MaxCostMicros: ip.opts.Decision.InvocationBudget.CostMicros}
		return nil
	}
	// Spend that only grows after a call (cost, egress, tokens) can
	// pass its limit; a budget spent to its limit refuses the next call.
	spent := make([]broker.Spend, len(d.lines))
	for i, line := range d.lines {
		if line.Limits == (broker.Limits{}) {
			continue
		}
		s, err := l.Spent(ctx, line.Key)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
		}
		spent[i] = s
		if dim, lim, got := exhausted(line.Limits, s); dim != "" {
			return ip.refuseBudget(name, id, &broker.BudgetExhaustedError{Key: line.Key, Dimension: dim, Limit: lim, Spent: got})
		}
	}
	err := l.Charge(ctx, d.lines, broker.Spend{Calls: 1})
	var be *broker.BudgetExhaustedError
	if errors.As(err, &be) {
		return ip.refuseBudget(name, id, be)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	// What remains, the least over the lines that limit it; the call
	// itself is counted, and may be the last.
	for i, line := range d.lines {
		d.budget.MaxCalls = least(d.budget.MaxCalls, line.Limits.Calls, line.Limits.Calls-spent[i].Calls)
		d.budget.MaxCostMicros = least(d.budget.MaxCostMicros, line.Limits.CostMicros, line.Limits.CostMicros-spent[i].CostMicros)
	}
	return nil
}

// exhausted names the first dimension of s that reached its limit
// (calls are checked by Charge, which counts them).
func exhausted(lim broker.Limits, s broker.Spend) (dim string, limit, spent int64) {
	for _, c := range []struct {
		name        string
		limit, have int64
	}{{"cost_micros", lim.CostMicros, s.CostMicros}, {"egress_requests", lim.EgressRequests, s.EgressRequests},
		{"egress_bytes", lim.EgressBytes, s.EgressBytes}, {"tokens", lim.Tokens, s.Tokens}} {
		if c.limit > 0 && c.have >= c.limit {
			return c.name, c.limit, c.have
		}
	}
	return "", 0, 0
}

func (ip invokePath) refuseBudget(name, id string, be *broker.BudgetExhaustedError) error {
	if _, err := ip.opts.Record(name, "gate.budget", id, map[string]any{"allowed": false, "budget": be.Key,
		"dimension": be.Dimension, "limit": be.Limit, "spent": be.Spent}); err != nil {
		return err
	}
	return be
}

// least folds one line's remaining amount into cur (zero: no limit yet);
// a line with no limit (limit 0) leaves cur alone. Checks before it
// made sure something remains.
func least(cur, limit, remaining int64) int64 {
	if limit == 0 {
		return cur
	}
	remaining = max(remaining, 1)
	if cur == 0 || remaining < cur {
		return remaining
	}
	return cur
}

// chargeSpent counts what the call spent (its reported cost) against its
// budgets with no limit check: it was spent; the next call sees it.
func (ip invokePath) chargeSpent(ctx context.Context, d *decision, out *Outcome) error {
	if ip.opts.Ledger == nil || out.CostMicros <= 0 {
		return nil
	}
	return ip.opts.Ledger.Charge(context.WithoutCancel(ctx), unlimited(d.lines), broker.Spend{CostMicros: out.CostMicros})
}

// tokenSpend is Call.SpendTokens for d: with tokens 0 it refuses once a
// line's tokens reached their limit; otherwise it charges them.
func (ip invokePath) tokenSpend(d *decision) func(ctx context.Context, tokens int64) error {
	l := ip.opts.Ledger
	if l == nil {
		return nil
	}
	return func(ctx context.Context, tokens int64) error {
		if tokens > 0 {
			return l.Charge(ctx, unlimited(d.lines), broker.Spend{Tokens: tokens})
		}
		for _, line := range d.lines {
			if line.Limits.Tokens == 0 {
				continue
			}
			s, err := l.Spent(ctx, line.Key)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
			}
			if s.Tokens >= line.Limits.Tokens {
				return &broker.BudgetExhaustedError{Key: line.Key, Dimension: "tokens", Limit: line.Limits.Tokens, Spent: s.Tokens}
			}
		}
		return nil
	}
}

// unlimited are the lines' keys with no limits: a charge of what was
// already spent is counted whatever it passes.
func unlimited(lines []broker.BudgetLine) []broker.BudgetLine {
	out := make([]broker.BudgetLine, len(lines))
	for i, line := range lines {
		out[i] = broker.BudgetLine{Key: line.Key}
	}
	return out
}
