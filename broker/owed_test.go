package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Revocations made while the handle store is down are not dropped: the
// replica that accepted them says they are owed, refuses what they cover
// at once (although the store, back, still holds those handles live),
// shows them in its readiness check, and writes them when the store is
// back, after which every replica refuses the handles. A plugin's owed
// revocation covers only what was issued before it: the restarted
// plugin's new handle works.
func TestRedisOwedRevocation(t *testing.T) {
	t.Parallel() // Redis servers of its own: waits on failovers and outages
	ctx := context.Background()
	r := testenv.Redis(t)
	link := testenv.NewRelay(t, r.Addr)
	clk := newClock()
	clk.Advance(time.Since(clk.Now())) // Redis expires keys on the wall clock
	a, _ := newRedisBroker(t, link.Addr, clk)
	b, _ := newRedisBroker(t, r.Addr, clk)
	issue := func(plugin, inv string) Issued {
		t.Helper()
		iss, err := a.Issue(ctx, IssueRequest{PluginID: plugin, InvocationID: inv, Intent: "example.read",
			Destinations: apiDest, Deadline: clk.Now().Add(10 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return iss
	}
	ended, ofPlugin, byOperator := issue("p1", "inv-ended"), issue("p2", "inv-p2"), issue("p3", "inv-p3")

	link.Cut() // the store is down for replica A
	end, err := a.EndInvocation(ctx, "inv-ended")
	if err != nil || !end.HandlesOwed {
		t.Fatalf("ending an invocation with the store down: %+v %v; want its handles owed", end, err)
	}
	if _, err := a.RevokePlugin(ctx, "p2"); !errors.Is(err, ErrRevocationOwed) {
		t.Fatalf("revoking a plugin with the store down: %v; want ErrRevocationOwed", err)
	}
	if _, err := a.RevokeHandle(ctx, byOperator.Fingerprint); !errors.Is(err, ErrRevocationOwed) {
		t.Fatalf("revoking a handle with the store down: %v; want ErrRevocationOwed", err)
	}
	if a.Owed() != 3 || a.CheckOwed(ctx) == nil {
		t.Fatalf("owed %d, readiness %v; want 3 owed and not ready", a.Owed(), a.CheckOwed(ctx))
	}

	link.Restore()
	clk.Advance(time.Second)
	restarted := issue("p2", "inv-p2-again")
	for _, h := range []Issued{ended, ofPlugin, byOperator} {
		if _, err := b.Resolve(ctx, h.Handle); err != nil {
			t.Fatalf("the store lost a live handle: %v", err) // the premise: B does not know yet
		}
		if _, err := a.Resolve(ctx, h.Handle); !errors.Is(err, ErrHandleRevoked) {
			t.Fatalf("replica A serves a handle whose revocation it owes: %v", err)
		}
	}
	if _, err := a.Resolve(ctx, restarted.Handle); err != nil {
		t.Fatalf("the restarted plugin's new handle: %v", err)
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.RunOwed(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, "the owed revocations land", func() bool { return a.Owed() == 0 })
	if err := a.CheckOwed(ctx); err != nil {
		t.Fatalf("ready again: %v", err)
	}
	for _, h := range []Issued{ended, ofPlugin, byOperator} {
		if _, err := b.Resolve(ctx, h.Handle); !errors.Is(err, ErrHandleRevoked) {
			t.Fatalf("replica B after the owed revocations landed: %v", err)
		}
	}
	if _, err := b.Resolve(ctx, restarted.Handle); err != nil {
		t.Fatalf("the landed plugin revocation took the restarted plugin's handle: %v", err)
	}
	if _, err := a.Issue(ctx, IssueRequest{PluginID: "p1", InvocationID: "inv-ended", Intent: "example.read",
		Destinations: apiDest, Deadline: clk.Now().Add(time.Minute)}); !errors.Is(err, ErrInvocationRevoked) {
		t.Fatalf("an ended invocation got a new handle: %v", err)
	}
}

// An owed revocation is dropped, not retried forever, once everything it
// covers has expired.
func TestOwedRevocationExpires(t *testing.T) {
	clk := newClock()
	var l owedLedger
	l.add(&owedRevocation{kind: owedInvocation, id: "inv", at: clk.Now(), until: clk.Now().Add(time.Minute)})
	g := &Grant{PluginID: "p", InvocationID: "inv", IssuedAt: clk.Now().Add(-time.Second)}
	if !l.covers(g) {
		t.Fatal("an owed invocation revocation does not cover its grant")
	}
	clk.Advance(time.Minute)
	if due, expired := l.due(clk.Now()); len(due) != 0 || expired != 1 || l.len() != 0 || l.covers(g) {
		t.Fatalf("after its handles expired: due %d, expired %d, owed %d", len(due), expired, l.len())
	}
}
