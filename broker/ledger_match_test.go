package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestAccessGrantCovers(t *testing.T) {
	now := time.Now()
	base := AccessGrant{ID: "g_1", Principal: "alice", Actor: "user:bob", Plugins: []string{"tickets", "crm-*"},
		Methods: []string{"tickets.v1.Tickets/Create", "*/Get"}, RiskCeiling: "write", IssuedAt: now.Add(-time.Minute),
		NotAfter: now.Add(time.Hour)}
	q := GrantQuery{Principal: "alice", Actor: "user:bob", Plugin: "tickets", Method: "tickets.v1.Tickets/Create",
		Risk: "write", Now: now}
	tests := []struct {
		name  string
		grant func(*AccessGrant)
		query func(*GrantQuery)
		why   string
	}{
		{name: "covers"},
		{name: "plugin by prefix", query: func(q *GrantQuery) { q.Plugin = "crm-eu" }},
		{name: "any principal", grant: func(g *AccessGrant) { g.Principal = "" }, query: func(q *GrantQuery) { q.Principal = "eve" }},
		{name: "revoked", grant: func(g *AccessGrant) { g.RevokedAt = now }, why: "revoked"},
		{name: "expired", query: func(q *GrantQuery) { q.Now = now.Add(time.Hour) }, why: "expired"},
		{name: "not yet", query: func(q *GrantQuery) { q.Now = now.Add(-time.Hour) }, why: "not yet valid"},
		{name: "other principal", query: func(q *GrantQuery) { q.Principal = "eve" }, why: "principal"},
		{name: "no actor", query: func(q *GrantQuery) { q.Actor = "" }, why: "actor"},
		{name: "other plugin", query: func(q *GrantQuery) { q.Plugin = "billing" }, why: "plugin"},
		{name: "other method", query: func(q *GrantQuery) { q.Method = "tickets.v1.Tickets/Delete" }, why: "method"},
		{name: "above ceiling", query: func(q *GrantQuery) { q.Risk = "privileged" }, why: "risk_ceiling"},
		{name: "below ceiling", query: func(q *GrantQuery) { q.Risk = "read" }},
		{name: "unspecified risk under a ceiling", query: func(q *GrantQuery) { q.Risk = "unspecified" }, why: "risk_ceiling"},
		{name: "unspecified risk, no ceiling", grant: func(g *AccessGrant) { g.RiskCeiling = "" },
			query: func(q *GrantQuery) { q.Risk = "unspecified" }},
		{name: "other run", grant: func(g *AccessGrant) { g.RunID = "run-1" }, query: func(q *GrantQuery) { q.RunID = "run-2" }, why: "run_id"},
		{name: "same run", grant: func(g *AccessGrant) { g.RunID = "run-1" }, query: func(q *GrantQuery) { q.RunID = "run-1" }},
		{name: "other plan", grant: func(g *AccessGrant) { g.PlanDigest = "sha256:a" }, why: "plan_digest"},
		{name: "changed request", grant: func(g *AccessGrant) { g.RequestDigest = "sha256:r" },
			query: func(q *GrantQuery) { q.RequestDigest = "sha256:other" }, why: "request_digest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, qq := base, q
			if tc.grant != nil {
				tc.grant(&g)
			}
			if tc.query != nil {
				tc.query(&qq)
			}
			ok, why := g.Covers(qq)
			if ok != (tc.why == "") || why != tc.why {
				t.Fatalf("Covers = %v %q, want reason %q", ok, why, tc.why)
			}
		})
	}
}

// The narrowest covering grant is chosen, then the most recent; grants
// that do not cover the call are never chosen.
func TestSelectGrant(t *testing.T) {
	now := time.Now()
	mk := func(id string, issued time.Duration, f func(*AccessGrant)) *AccessGrant {
		g := &AccessGrant{ID: id, IssuedAt: now.Add(issued), NotAfter: now.Add(time.Hour)}
		if f != nil {
			f(g)
		}
		return g
	}
	q := GrantQuery{Principal: "alice", Plugin: "tickets", Method: "M", Risk: "read", RunID: "r", RequestDigest: "d", Now: now}
	wide := mk("g_wide", -time.Minute, nil)
	newerWide := mk("g_newer", -time.Second, nil)
	byPrincipal := mk("g_alice", -time.Hour, func(g *AccessGrant) { g.Principal = "alice" })
	byRun := mk("g_run", -time.Hour, func(g *AccessGrant) { g.RunID = "r" })
	byRequest := mk("g_req", -time.Hour, func(g *AccessGrant) { g.RequestDigest = "d"; g.Uses = 3 })
	revoked := mk("g_revoked", -time.Hour, func(g *AccessGrant) { g.RequestDigest = "d"; g.RevokedAt = now })
	other := mk("g_bob", 0, func(g *AccessGrant) { g.Principal = "bob"; g.RequestDigest = "d" })

	tests := []struct {
		grants []*AccessGrant
		want   string
	}{
		{[]*AccessGrant{wide, newerWide}, "g_newer"},
		{[]*AccessGrant{newerWide, byPrincipal}, "g_alice"},
		{[]*AccessGrant{byPrincipal, byRun}, "g_run"},
		{[]*AccessGrant{byRun, byRequest, revoked, other}, "g_req"},
		{[]*AccessGrant{revoked, other}, ""},
	}
	for _, tc := range tests {
		got := SelectGrant(tc.grants, q)
		if (got == nil && tc.want != "") || (got != nil && got.ID != tc.want) {
			t.Fatalf("SelectGrant = %v, want %q", got, tc.want)
		}
	}
	if all := SelectGrants([]*AccessGrant{wide, byRequest, byPrincipal}, q); len(all) != 3 || all[2].ID != "g_wide" {
		t.Fatalf("SelectGrants order: %v", all)
	}
}

// A grant's uses are counted as calls on its budget line: the call after
// the last use is refused, naming the grant and "calls".
func TestAccessGrantUses(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(10, time.Minute, time.Hour, nil)
	g := &AccessGrant{ID: "g_u", Uses: 2, Budget: Limits{Calls: 10, CostMicros: 5}}
	line := g.BudgetLine()
	if line.Key != "grant:g_u" || line.Limits != (Limits{Calls: 2, CostMicros: 5}) {
		t.Fatalf("line: %+v", line)
	}
	for i := 0; i < 2; i++ {
		if err := s.Charge(ctx, []BudgetLine{line}, Spend{Calls: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var be *BudgetExhaustedError
	if err := s.Charge(ctx, []BudgetLine{line}, Spend{Calls: 1}); !errors.As(err, &be) || be.Key != "grant:g_u" || be.Dimension != "calls" {
		t.Fatalf("third use: %v", err)
	}
	if l := (&AccessGrant{ID: "x", Budget: Limits{Calls: 1}, Uses: 5}).BudgetLine(); l.Limits.Calls != 1 {
		t.Fatalf("uses above the calls budget: %+v", l)
	}
}
