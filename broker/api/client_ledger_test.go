package api

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/internal/ledgertest"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/tokens"
)

// grpcPair is two broker replicas on one real redis-server, each behind
// its own broker API, reached through Clients: the ledger tests run over
// gRPC against it as against the stores.
func grpcPair(t *testing.T) (broker.Ledger, broker.Ledger) {
	r := testenv.Redis(t)
	ring, err := tokens.NewRing(context.Background(), &tokens.MemorySource{}, tokens.RingOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a := newRedisBroker(t, r.Addr)
	b := newRedisBroker(t, r.Addr)
	return serveAPI(t, a, ring, nil), serveAPI(t, b, ring, nil)
}

// The ledger's contract (package ledgertest) over gRPC: two brokers on one
// redis-server, each behind its own API, reached through Clients.
func TestLedgerOverGRPC(t *testing.T) { ledgertest.Run(t, grpcPair) }

// Over gRPC an exhausted budget keeps its type and fields, and the
// ledger's sentinels match with errors.Is.
func TestClientLedgerErrors(t *testing.T) {
	ctx := context.Background()
	c, _ := grpcPair(t)
	if _, ok := c.(*Client); !ok {
		t.Fatalf("%T", c)
	}
	line := []broker.BudgetLine{{Key: broker.BudgetKeyRun("r"), Limits: broker.Limits{Tokens: 10}}}
	if err := c.Charge(ctx, line, broker.Spend{Tokens: 10}); err != nil {
		t.Fatal(err)
	}
	err := c.Charge(ctx, line, broker.Spend{Tokens: 1})
	var be *broker.BudgetExhaustedError
	if !errors.Is(err, broker.ErrBudgetExhausted) || !errors.As(err, &be) ||
		*be != (broker.BudgetExhaustedError{Key: "run:r", Dimension: "tokens", Limit: 10, Spent: 10}) {
		t.Fatalf("over gRPC: %v", err)
	}
	if err := c.Charge(ctx, line, broker.Spend{Tokens: -1}); !errors.Is(err, broker.ErrBadRequest) {
		t.Fatalf("bad charge: %v", err)
	}
	for _, tc := range []struct {
		call func() error
		want error
	}{
		{func() error { _, err := c.GetAccessGrant(ctx, "g_x"); return err }, broker.ErrGrantUnknown},
		{func() error { _, err := c.RevokeAccessGrant(ctx, "g_x", "root", time.Now()); return err }, broker.ErrGrantUnknown},
		{func() error { _, err := c.GetApproval(ctx, "ap_x"); return err }, broker.ErrApprovalUnknown},
		{func() error { return c.PutAccessGrant(ctx, &broker.AccessGrant{ID: "g_y"}) }, broker.ErrBadRequest},
	} {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Fatalf("%v, want %v", err, tc.want)
		}
	}
	if err := c.PutApproval(ctx, ledgertest.PendingApproval("ap_1", 1, time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who  string
		want error
	}{{"alice", broker.ErrSelfApproval}, {"bob", nil}, {"carol", broker.ErrApprovalDecided}} {
		if _, err := c.DecideApproval(ctx, "ap_1", tc.who, true, time.Now()); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.who, err, tc.want)
		}
	}
}

// The ledger service refuses a caller without the broker token, as the
// broker service does.
func TestLedgerServiceNeedsToken(t *testing.T) {
	ctx := context.Background()
	f := startAPI(t, nil)
	if err := f.client.Charge(ctx, []broker.BudgetLine{{Key: "run:r"}}, broker.Spend{Calls: 1}); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	other := filepath.Join(t.TempDir(), "other.token")
	if _, err := peerauth.EnsureToken("t", other, peerauth.NoGroup); err != nil {
		t.Fatal(err)
	}
	target := f.client.conn.Target()
	c, err := Dial(target, DialOptions{TokenFile: other})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListAccessGrants(ctx); !errors.Is(err, broker.ErrUnauthenticated) {
		t.Fatalf("another token: %v, want ErrUnauthenticated", err)
	}
	if sp, _ := f.mem.store.Spent(ctx, "run:r"); sp.Calls != 1 {
		t.Fatalf("spent %+v", sp)
	}
}
