package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// An access grant's revocation is acknowledged only once a replica holds
// it, so an acknowledged one survives the primary's loss: with the
// replication link cut it fails with ErrRevocationUnreplicated (and is
// enforced on the primary meanwhile); with the link up it is acknowledged,
// and the promoted replica has it.
func TestRedisAccessGrantRevocationSurvivesFailover(t *testing.T) {
	t.Parallel() // Redis servers of its own: waits on failovers and outages
	ctx := context.Background()
	primary := testenv.Redis(t)
	link := testenv.NewRelay(t, primary.Addr)
	replica := testenv.RedisReplica(t, link.Addr)
	a := newLedgerStore(t, primary.Addr)
	a.ackWithin = time.Minute // the healthy case must not race a loaded machine
	now := time.Now().UTC()
	for _, id := range []string{"g_kept", "g_lost"} {
		if err := a.PutAccessGrant(ctx, &AccessGrant{ID: id, Principal: "alice", IssuedBy: "root", IssuedAt: now,
			NotAfter: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	replicated(t, a.rdb)

	if ok, err := a.RevokeAccessGrant(ctx, "g_kept", "root", now); err != nil || !ok {
		t.Fatalf("revocation with a healthy replica: %v %v", ok, err)
	}
	link.Hold()
	a.waitTimeout, a.ackWithin = 300*time.Millisecond, 0
	if _, err := a.RevokeAccessGrant(ctx, "g_lost", "root", now); !errors.Is(err, ErrRevocationUnreplicated) {
		t.Fatalf("a revocation no replica holds was acknowledged: %v", err)
	}
	if g, err := a.GetAccessGrant(ctx, "g_lost"); err != nil || g.RevokedAt.IsZero() {
		t.Fatalf("the unconfirmed revocation is not enforced on the primary: %+v %v", g, err)
	}

	primary.Kill()
	promote := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer promote.Close()
	if err := promote.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	c := newLedgerStore(t, replica.Addr)
	g, err := c.GetAccessGrant(ctx, "g_kept")
	if err != nil || g.RevokedAt.IsZero() || g.RevokedBy != "root" {
		t.Fatalf("an acknowledged revocation was lost in the failover: %+v %v", g, err)
	}
	// The journal writes the unconfirmed one again after the primary
	// change (what watchPrimary does on noticing it).
	if _, err := a.reassertTo(ctx, c); err != nil {
		t.Fatal(err)
	}
	if g, err := c.GetAccessGrant(ctx, "g_lost"); err != nil || g.RevokedAt.IsZero() {
		t.Fatalf("the journaled revocation was not written again: %+v %v", g, err)
	}
}

// reassertTo writes s's journal to the primary of other (in production s
// follows the primary itself; here the old one is gone).
func (s *RedisStore) reassertTo(ctx context.Context, other *RedisStore) (int, error) {
	entries := s.journal.live(time.Now())
	for _, e := range entries {
		if err := e.script.Run(ctx, other.rdb, e.keys, e.args...).Err(); err != nil {
			return 0, err
		}
	}
	return len(entries), nil
}

func newLedgerStore(t *testing.T, addr string) *RedisStore {
	t.Helper()
	s, err := NewRedisStore(RedisConfig{Address: addr, KeyPrefix: "airlock-test:"}, time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
