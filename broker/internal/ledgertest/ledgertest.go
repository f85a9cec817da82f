// Package ledgertest is the contract of broker.Ledger as tests: Run runs
// it on two ledgers sharing one state (the memory store, two Redis
// stores, two brokers behind their APIs).
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// Pair returns two ledgers on one shared state: two replicas (the memory
// store twice; two RedisStores on one redis-server; two brokers on one
// redis-server, each behind its own broker API, through Clients).
type Pair func(t *testing.T) (broker.Ledger, broker.Ledger)

// Run runs every ledger test on the ledgers pair makes.
func Run(t *testing.T, pair Pair) {
	each := func(t *testing.T, fn func(t *testing.T, a, b broker.Ledger)) {
		a, b := pair(t)
		fn(t, a, b)
	}
	for _, c := range []struct {
		name string
		fn   func(*testing.T, func(*testing.T, func(t *testing.T, a, b broker.Ledger)))
	}{
		{"Charge", charge}, {"Violations", violations}, {"AccessGrants", accessGrants}, {"Approvals", approvals},
		{"ConcurrentCharges", concurrentCharges}, {"ConcurrentApprovals", concurrentApprovals},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, each) })
	}
}

// A charge counts on every line or on none, and names the first line and
// dimension it would exceed; a zero add only checks.
func charge(t *testing.T, eachLedger func(*testing.T, func(t *testing.T, a, b broker.Ledger))) {
	ctx := context.Background()
	eachLedger(t, func(t *testing.T, a, b broker.Ledger) {
		run := broker.BudgetLine{Key: broker.BudgetKeyRun("r1"), Limits: broker.Limits{Calls: 2}}
		grant := broker.BudgetLine{Key: broker.BudgetKeyGrant("g1"), Limits: broker.Limits{Calls: 5, CostMicros: 500}}
		lines := []broker.BudgetLine{grant, run}
		for i := 0; i < 2; i++ {
			if err := a.Charge(ctx, lines, broker.Spend{Calls: 1}); err != nil {
				t.Fatalf("charge %d: %v", i, err)
			}
		}
		err := b.Charge(ctx, lines, broker.Spend{Calls: 1})
		var be *broker.BudgetExhaustedError
		if !errors.As(err, &be) || !errors.Is(err, broker.ErrBudgetExhausted) {
			t.Fatalf("third call: %v", err)
		}
		if *be != (broker.BudgetExhaustedError{Key: "run:r1", Dimension: "calls", Limit: 2, Spent: 2}) {
			t.Fatalf("exhausted: %+v", be)
		}
		if sp, _ := b.Spent(ctx, grant.Key); sp != (broker.Spend{Calls: 2}) {
			t.Fatalf("the refused charge counted on the other line: %+v", sp)
		}
		// A zero add checks: the run is spent to its limit.
		if err := a.Charge(ctx, []broker.BudgetLine{run}, broker.Spend{}); !errors.As(err, &be) || be.Dimension != "calls" {
			t.Fatalf("zero add on a spent budget: %v", err)
		}
		if err := a.Charge(ctx, []broker.BudgetLine{grant}, broker.Spend{}); err != nil {
			t.Fatalf("zero add with room left: %v", err)
		}
		// Cost, charged after the call, on the grant alone.
		if err := b.Charge(ctx, []broker.BudgetLine{grant}, broker.Spend{CostMicros: 300}); err != nil {
			t.Fatal(err)
		}
		err = a.Charge(ctx, []broker.BudgetLine{grant}, broker.Spend{CostMicros: 300})
		if !errors.As(err, &be) || *be != (broker.BudgetExhaustedError{Key: "grant:g1", Dimension: "cost_micros", Limit: 500, Spent: 300}) {
			t.Fatalf("cost over the limit: %v", err)
		}
		if sp, _ := a.Spent(ctx, grant.Key); sp != (broker.Spend{Calls: 2, CostMicros: 300}) {
			t.Fatalf("spent: %+v", sp)
		}
		// No limits: counted, never refused.
		if err := a.Charge(ctx, []broker.BudgetLine{{Key: broker.BudgetKeyInvocation("i1")}}, broker.Spend{EgressBytes: 1 << 40, Tokens: 7}); err != nil {
			t.Fatal(err)
		}
		if sp, _ := b.Spent(ctx, broker.BudgetKeyInvocation("i1")); sp != (broker.Spend{EgressBytes: 1 << 40, Tokens: 7}) {
			t.Fatalf("spent: %+v", sp)
		}
		for _, bad := range []struct {
			lines []broker.BudgetLine
			add   broker.Spend
		}{
			{[]broker.BudgetLine{run}, broker.Spend{Calls: -1}},
			{[]broker.BudgetLine{{Key: ""}}, broker.Spend{Calls: 1}},
			{[]broker.BudgetLine{run, run}, broker.Spend{Calls: 1}},
		} {
			if err := a.Charge(ctx, bad.lines, bad.add); !errors.Is(err, broker.ErrBadRequest) {
				t.Fatalf("bad charge %+v: %v", bad, err)
			}
		}
	})
}

// Violations are listed per invocation in order, and per plugin since a
// time; each list keeps the last MaxViolationsPerKey.
func violations(t *testing.T, eachLedger func(*testing.T, func(t *testing.T, a, b broker.Ledger))) {
	ctx := context.Background()
	eachLedger(t, func(t *testing.T, a, b broker.Ledger) {
		t0 := time.Now().Truncate(time.Millisecond)
		for i, k := range []string{"handle_in_request", "destination_not_declared", "residency_violation"} {
			v := broker.Violation{InvocationID: "inv-1", PluginID: "p", Kind: k, At: t0.Add(time.Duration(i) * time.Second)}
			if err := a.RecordViolation(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		got, err := b.Violations(ctx, "inv-1")
		if err != nil || len(got) != 3 || got[0].Kind != "handle_in_request" || got[2].Kind != "residency_violation" {
			t.Fatalf("violations: %+v %v", got, err)
		}
		since, err := b.PluginViolations(ctx, "p", t0.Add(time.Second))
		if err != nil || len(since) != 2 || since[0].Kind != "destination_not_declared" {
			t.Fatalf("plugin violations since: %+v %v", since, err)
		}
		if other, _ := b.Violations(ctx, "inv-2"); len(other) != 0 {
			t.Fatalf("another invocation: %+v", other)
		}
		// A violation recorded without a time gets the store's.
		before := time.Now().Add(-time.Second)
		if err := a.RecordViolation(ctx, broker.Violation{InvocationID: "inv-3", PluginID: "p3", Kind: "handle_other_plugin"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.PluginViolations(ctx, "p3", before); len(got) != 1 || got[0].At.Before(before) {
			t.Fatalf("a violation without a time: %+v", got)
		}
		for i := 0; i < broker.MaxViolationsPerKey+5; i++ {
			v := broker.Violation{InvocationID: "inv-many", PluginID: "q", Kind: strconv.Itoa(i), At: t0}
			if err := a.RecordViolation(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		many, _ := b.Violations(ctx, "inv-many")
		plg, _ := b.PluginViolations(ctx, "q", time.Time{})
		if len(many) != broker.MaxViolationsPerKey || many[0].Kind != "5" || len(plg) != broker.MaxViolationsPerKey {
			t.Fatalf("bounded lists: %d (first %q), plugin %d", len(many), many[0].Kind, len(plg))
		}
	})
}

// Access grants are shared, listed and revoked once; a revoked grant is
// kept with who revoked it and when, and writing it again keeps that.
func accessGrants(t *testing.T, eachLedger func(*testing.T, func(t *testing.T, a, b broker.Ledger))) {
	ctx := context.Background()
	eachLedger(t, func(t *testing.T, a, b broker.Ledger) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		g := &broker.AccessGrant{ID: "g_1", Principal: "alice", Plugins: []string{"tickets"}, Budget: broker.Limits{Calls: 20},
			IssuedBy: "root", IssuedAt: now, NotAfter: now.Add(time.Hour)}
		if err := a.PutAccessGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
		g2 := &broker.AccessGrant{ID: "g_2", Actor: "user:bob", RiskCeiling: "read", IssuedBy: "root",
			IssuedAt: now.Add(time.Second), NotAfter: now.Add(2 * time.Hour)}
		if err := b.PutAccessGrant(ctx, g2); err != nil {
			t.Fatal(err)
		}
		got, err := b.GetAccessGrant(ctx, "g_1")
		if err != nil || got.Principal != "alice" || got.Budget.Calls != 20 || !got.NotAfter.Equal(g.NotAfter) {
			t.Fatalf("get: %+v %v", got, err)
		}
		list, err := a.ListAccessGrants(ctx)
		if err != nil || len(list) != 2 || list[0].ID != "g_1" || list[1].ID != "g_2" {
			t.Fatalf("list: %+v %v", list, err)
		}
		if ok, err := b.RevokeAccessGrant(ctx, "g_1", "carol", now); err != nil || !ok {
			t.Fatalf("revoke: %v %v", ok, err)
		}
		if ok, err := a.RevokeAccessGrant(ctx, "g_1", "dave", now.Add(time.Minute)); err != nil || ok {
			t.Fatalf("revoking again: %v %v", ok, err)
		}
		if err := a.PutAccessGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
		got, _ = a.GetAccessGrant(ctx, "g_1")
		if got.RevokedBy != "carol" || !got.RevokedAt.Equal(now) {
			t.Fatalf("revocation after writing the grant again: %+v", got)
		}
		if _, err := a.GetAccessGrant(ctx, "g_none"); !errors.Is(err, broker.ErrGrantUnknown) {
			t.Fatalf("unknown: %v", err)
		}
		if _, err := a.RevokeAccessGrant(ctx, "g_none", "x", now); !errors.Is(err, broker.ErrGrantUnknown) {
			t.Fatalf("revoke unknown: %v", err)
		}
		if err := a.PutAccessGrant(ctx, &broker.AccessGrant{ID: "g_3"}); !errors.Is(err, broker.ErrBadRequest) {
			t.Fatalf("a grant without not_after: %v", err)
		}
	})
}

// PendingApproval is an approval of tickets.Create by alice, pending.
func PendingApproval(id string, required int, expires time.Time, eligible ...string) *broker.Approval {
	return &broker.Approval{ID: id, RequestDigest: "sha256:abc", Plugin: "tickets", Method: "Create", Requester: "alice",
		Rule: "second-person", Required: required, Eligible: eligible, State: broker.ApprovalPending,
		CreatedAt: time.Now(), ExpiresAt: expires}
}

// An approval is granted by Required distinct approvers other than the
// requester, from those eligible; denied at the first deny; expired past
// its time; and a decided one refuses more decisions.
func approvals(t *testing.T, eachLedger func(*testing.T, func(t *testing.T, a, b broker.Ledger))) {
	ctx := context.Background()
	eachLedger(t, func(t *testing.T, a, b broker.Ledger) {
		now := time.Now()
		if err := a.PutApproval(ctx, PendingApproval("ap_1", 2, now.Add(time.Hour), "ops:*", "bob")); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			who     string
			approve bool
			wantErr error
			state   string
		}{
			{"alice", true, broker.ErrSelfApproval, ""},
			{"mallory", true, broker.ErrNotEligible, ""},
			{"ops:carol", true, nil, broker.ApprovalPending},
			{"ops:carol", true, broker.ErrAlreadyApproved, ""},
			{"bob", true, nil, broker.ApprovalGranted},
			{"ops:dave", false, broker.ErrApprovalDecided, ""},
		}
		for i, st := range steps {
			l := a
			if i%2 == 1 {
				l = b
			}
			got, err := l.DecideApproval(ctx, "ap_1", st.who, st.approve, time.Now())
			if !errors.Is(err, st.wantErr) {
				t.Fatalf("step %d (%s): %v, want %v", i, st.who, err, st.wantErr)
			}
			if err == nil && got.State != st.state {
				t.Fatalf("step %d (%s): state %s, want %s", i, st.who, got.State, st.state)
			}
		}
		got, err := b.GetApproval(ctx, "ap_1")
		if err != nil || got.State != broker.ApprovalGranted || len(got.Approvers) != 2 || got.Approvers[0] != "ops:carol" {
			t.Fatalf("granted approval: %+v %v", got, err)
		}

		if err := b.PutApproval(ctx, PendingApproval("ap_2", 2, now.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		if got, err := a.DecideApproval(ctx, "ap_2", "bob", false, time.Now()); err != nil || got.State != broker.ApprovalDenied || got.Denier != "bob" {
			t.Fatalf("deny: %+v %v", got, err)
		}
		if _, err := a.DecideApproval(ctx, "ap_2", "carol", true, time.Now()); !errors.Is(err, broker.ErrApprovalDecided) {
			t.Fatalf("approve after deny: %v", err)
		}

		if err := a.PutApproval(ctx, PendingApproval("ap_3", 1, now.Add(-time.Second))); err != nil {
			t.Fatal(err)
		}
		if got, err := b.GetApproval(ctx, "ap_3"); err != nil || got.State != broker.ApprovalExpired {
			t.Fatalf("expired on read: %+v %v", got, err)
		}
		if _, err := b.DecideApproval(ctx, "ap_3", "bob", true, time.Now()); !errors.Is(err, broker.ErrApprovalExpired) {
			t.Fatalf("deciding an expired approval: %v", err)
		}
		list, err := b.ListApprovals(ctx)
		if err != nil || len(list) != 3 {
			t.Fatalf("list: %+v %v", list, err)
		}
		if _, err := a.DecideApproval(ctx, "ap_none", "bob", true, time.Now()); !errors.Is(err, broker.ErrApprovalUnknown) {
			t.Fatalf("unknown: %v", err)
		}
		if _, err := a.GetApproval(ctx, "ap_none"); !errors.Is(err, broker.ErrApprovalUnknown) {
			t.Fatalf("unknown: %v", err)
		}
	})
}

// Many goroutines on two replicas charging one budget at once never count
// past its limit, and every success is counted.
func concurrentCharges(t *testing.T, eachLedger func(*testing.T, func(t *testing.T, a, b broker.Ledger))) {
	ctx := context.Background()
	eachLedger(t, func(t *testing.T, a, b broker.Ledger) {
		const workers, each, limit = 8, 25, 60
		lines := []broker.BudgetLine{{Key: broker.BudgetKeyRun("shared"), Limits: broker.Limits{Calls: limit}},
			{Key: broker.BudgetKeyGrant("wide"), Limits: broker.Limits{Calls: 10 * limit}}}
		type result struct{ ok, exhausted int }
		results := make(chan result)
		for w := 0; w < 2*workers; w++ {
			l := a
			if w%2 == 1 {
				l = b
			}
			go func() {
				var r result
				for i := 0; i < each; i++ {
					switch err := l.Charge(ctx, lines, broker.Spend{Calls: 1}); {
					case err == nil:
						r.ok++
					case errors.Is(err, broker.ErrBudgetExhausted):
						r.exhausted++
					default:
						t.Error(err)
					}
				}
				results <- r
			}()
		}
		var total result
		for w := 0; w < 2*workers; w++ {
			r := <-results
			total.ok += r.ok
			total.exhausted += r.exhausted
		}
		if total.ok != limit || total.exhausted != 2*workers*each-limit {
			t.Fatalf("%d charges succeeded, %d refused; want %d succeeded", total.ok, total.exhausted, limit)
		}
		for _, l := range lines {
			if sp, _ := a.Spent(ctx, l.Key); sp.Calls != limit {
				t.Fatalf("%s spent %d, want %d", l.Key, sp.Calls, limit)
			}
		}
	})
}

// Concurrent approvers on two replicas: each counts once, and the state
// becomes granted exactly when Required distinct approvers approved.
func concurrentApprovals(t *testing.T, eachLedger func(*testing.T, func(t *testing.T, a, b broker.Ledger))) {
	ctx := context.Background()
	eachLedger(t, func(t *testing.T, a, b broker.Ledger) {
		const n = 6
		if err := a.PutApproval(ctx, PendingApproval("ap_c", n, time.Now().Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error)
		for i := 0; i < 2*n; i++ {
			l := a
			if i%2 == 1 {
				l = b
			}
			who := fmt.Sprintf("approver-%d", i%n) // each approver twice
			go func() {
				_, err := l.DecideApproval(ctx, "ap_c", who, true, time.Now())
				errs <- err
			}()
		}
		counted, again := 0, 0
		for i := 0; i < 2*n; i++ {
			switch err := <-errs; {
			case err == nil:
				counted++
			case errors.Is(err, broker.ErrAlreadyApproved), errors.Is(err, broker.ErrApprovalDecided):
				again++
			default:
				t.Fatal(err)
			}
		}
		got, _ := b.GetApproval(ctx, "ap_c")
		if counted != n || got.State != broker.ApprovalGranted || len(got.Approvers) != n {
			t.Fatalf("%d votes counted, approval %+v", counted, got)
		}
	})
}
