package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// The replica that ended an invocation while Vault was down owes the
// lease's revocation and is gone before Vault returns: the owed
// revocation is in the shared store, and another replica finishes it.
func TestLeaseOwedRevocationFinishedByOtherReplica(t *testing.T) {
	ctx := context.Background()
	v := testenv.NewVault(t)
	mount := newMount(t, v)
	rs := testenv.Redis(t)
	lc := broker.LeasesConfig{SealKeyFile: sealKeyFile(t), CheckInterval: 20 * time.Millisecond,
		RevokeBackoff: 10 * time.Millisecond, RevokeTimeout: 2 * time.Second}
	store := func() broker.Store {
		st, err := broker.NewRedisStore(broker.RedisConfig{Address: rs.Addr, KeyPrefix: "lease-owed:", LocalCache: -1}, time.Minute, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	// The owing replica: its loop never runs (it dies after the end).
	cfg := leaseConfig(mount, lc)
	cfg.Store = broker.StoreConfig{Type: broker.StoreRedis, Redis: broker.RedisConfig{Address: rs.Addr}}
	cfg = cfg.WithDefaults()
	st := store()
	dying, err := New(cfg, v.Client(t), st.(broker.LeaseStore), Options{})
	if err != nil {
		t.Fatal(err)
	}
	db := broker.New(cfg, st, nil, broker.Options{Leases: dying})
	g := &broker.Grant{PluginID: "p", InvocationID: "inv-owed", Intent: "cert", ExpiresAt: time.Now().Add(time.Hour)}
	if _, err := db.Secret(ctx, g, false); err != nil {
		t.Fatal(err)
	}
	v.Seal(t)
	end, err := db.EndInvocation(ctx, "inv-owed")
	if err != nil || len(end.Leases) != 1 || end.Leases[0].Revoked {
		t.Fatalf("end with Vault sealed: %+v, %v; want one lease owed", end, err)
	}
	v.Unseal(t)
	if n := len(v.Leases(t, mount+"/issue/leaf/")); n != 1 {
		t.Fatalf("Vault holds %d leases before another replica runs; want the owed one", n)
	}
	other := newLeaseFixture(t, v.Client(t), mount, store(), lc)
	waitFor(t, "another replica to finish the owed revocation", func() bool {
		return len(v.Leases(t, mount+"/issue/leaf/")) == 0
	})
	if st, err := other.leases.State(ctx, "inv-owed", "cert"); err != nil || st.State != broker.LeaseStateEnded {
		t.Fatalf("lease state: %+v %v", st, err)
	}
	if _, err := other.b.Secret(ctx, g, false); !errors.Is(err, broker.ErrLeaseEnded) {
		t.Fatalf("a use after the end: %v; want ErrLeaseEnded", err)
	}
}

// An invocation ended while the handle store is down: its leases' end
// is owed with its handles, and written when the store is back (the
// lease record becomes a tombstone, so no replica obtains a lease for
// the ended invocation).
func TestRedisOwedEndEndsLeases(t *testing.T) {
	ctx := context.Background()
	rs := testenv.Redis(t)
	link := testenv.NewRelay(t, rs.Addr)
	st, err := broker.NewRedisStore(broker.RedisConfig{Address: link.Addr, KeyPrefix: "lease-owed-end:", LocalCache: -1}, time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newLeaseFixture(t, nil, "pki-none", st, broker.LeasesConfig{SealKeyFile: sealKeyFile(t)})
	f.issue(t, "inv-end", "cert", time.Now().Add(time.Hour))
	link.Cut()
	end, err := f.b.EndInvocation(ctx, "inv-end")
	if err != nil || !end.HandlesOwed {
		t.Fatalf("the end with the store down: %+v %v; want owed", end, err)
	}
	link.Restore()
	rctx, cancel := context.WithCancel(ctx)
	retried := make(chan struct{})
	go func() { f.b.RunOwed(rctx); close(retried) }()
	defer func() { cancel(); <-retried }()
	waitFor(t, "the owed end lands", func() bool { return f.b.Owed() == 0 })
	if s, err := f.leases.State(ctx, "inv-end", "cert"); err != nil || s.State != broker.LeaseStateEnded {
		t.Fatalf("the invocation's lease record after the owed end landed: %+v %v; want ended", s, err)
	}
}
