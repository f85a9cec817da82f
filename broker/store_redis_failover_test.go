package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// waitUntil polls cond until it holds, failing the test after a generous
// deadline (a state is awaited, nothing is timed).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// replicated waits until a replica acknowledged every write so far.
func replicated(t *testing.T, rdb *redis.Client) {
	t.Helper()
	waitUntil(t, "the replica acknowledged the writes", func() bool {
		n, _ := rdb.Wait(context.Background(), 1, 100*time.Millisecond).Result()
		return n >= 1
	})
}

// cachedFor reports whether s would serve hk from its local cache now.
func cachedFor(s *RedisStore, hk string) bool {
	_, live := s.cache.begin()
	return live && s.cache.get(hk) != nil
}

// A stalled primary (SIGSTOP) is failed over by Sentinel, a revocation is
// made on the new primary, and then the old primary comes back, answering
// its old subscribers until Sentinel demotes it. Replica A, whose grant
// cache held the handle and whose subscription sat on the old primary,
// must not forward the revoked handle once: its feed proves itself only
// with probes published through the write path (the new primary), so the
// returning old primary cannot make the stale cache live again.
func TestRedisSentinelFailoverKeepsCacheRevocations(t *testing.T) {
	t.Parallel() // Redis servers of its own: waits on failovers and outages
	ctx := context.Background()
	rf := testenv.RedisSentinel(t)
	rc := RedisConfig{Sentinel: &SentinelConfig{MasterName: rf.MasterName, Addresses: rf.Sentinels}}
	a, sa := newRedisBrokerWith(t, rc, nil)
	b, sb := newRedisBrokerWith(t, rc, nil)
	startFeed(t, sa)
	startFeed(t, sb)

	iss, err := b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv-failover", Intent: "example.read",
		Destinations: apiDest, Deadline: time.Now().Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	hk := keyOf(iss.Handle).String()
	waitUntil(t, "replica A caches the grant", func() bool {
		_, err := a.Resolve(ctx, iss.Handle)
		return err == nil && cachedFor(sa, hk)
	})
	replicated(t, sb.rdb)

	sentinel := redis.NewSentinelClient(&redis.Options{Addr: rf.Sentinels[0]})
	defer sentinel.Close()
	rf.Primary.Pause()
	waitUntil(t, "Sentinel promotes the replica", func() bool {
		addr, err := sentinel.GetMasterAddrByName(ctx, rf.MasterName).Result()
		return err == nil && len(addr) == 2 && addr[0]+":"+addr[1] == rf.Replica.Addr
	})
	// With the primary stalled, A's cache steps aside (its feed went
	// quiet) or was emptied (its feed moved to the new primary).
	waitUntil(t, "A stops serving the grant from its cache", func() bool { return !cachedFor(sa, hk) })

	waitUntil(t, "B revokes on the new primary", func() bool {
		_, err := b.RevokeInvocation(ctx, "inv-failover")
		return err == nil || errors.Is(err, ErrRevocationUnreplicated)
	})
	onNew := redis.NewClient(&redis.Options{Addr: rf.Replica.Addr})
	defer onNew.Close()
	if r, err := onNew.HGet(ctx, sb.key("h:", hk), "r").Result(); err != nil || r != "1" {
		t.Fatalf("the revocation is not on the new primary: %q %v", r, err)
	}

	// From the acknowledgement on, A is under load; the old primary comes
	// back meanwhile.
	var forwarded, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch _, err := a.Resolve(ctx, iss.Handle); {
				case err == nil:
					forwarded.Add(1)
				case errors.Is(err, ErrHandleRevoked):
					refused.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	rf.Primary.Resume()
	old := redis.NewClient(&redis.Options{Addr: rf.Primary.Addr})
	defer old.Close()
	waitUntil(t, "Sentinel demotes the old primary", func() bool {
		role, err := old.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "slave"
	})
	waitUntil(t, "A's feed is proven on the new primary", func() bool { _, live := sa.cache.begin(); return live })
	settled := refused.Load()
	waitUntil(t, "A refuses under load after the feed settled", func() bool { return refused.Load() > settled+200 })
	close(stop)
	wg.Wait()
	if n := forwarded.Load(); n != 0 {
		t.Fatalf("replica A resolved the revoked handle %d times after the revocation was acknowledged (%d refusals)", n, refused.Load())
	}
}

// A revocation is acknowledged only once a replica holds it: with the
// replication link cut (the primary still counts its replica connected),
// the revocation fails with ErrRevocationUnreplicated, and once the link
// is back it is acknowledged; a failover then keeps it. On the old code
// the first revocation was acknowledged and then lost with the primary.
func TestRedisRevocationWaitsForReplica(t *testing.T) {
	t.Parallel() // Redis servers of its own: waits on failovers and outages
	ctx := context.Background()
	primary := testenv.Redis(t)
	link := testenv.NewRelay(t, primary.Addr)
	replica := testenv.RedisReplica(t, link.Addr)
	a, sa := newRedisBroker(t, primary.Addr, nil)
	// The healthy case must not race a timeout on a loaded machine: a
	// revocation keeps waiting for the replica for a minute.
	sa.ackWithin = time.Minute
	issue := func(inv string) Issued {
		iss, err := a.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: inv, Intent: "example.read",
			Destinations: apiDest, Deadline: time.Now().Add(10 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return iss
	}
	lost, kept := issue("inv-lost"), issue("inv-kept")
	replicated(t, sa.rdb)

	if _, err := a.RevokeInvocation(ctx, "inv-kept"); err != nil {
		t.Fatalf("a revocation with a healthy replica: %v", err)
	}
	link.Hold()
	// Only makes the failing case return sooner.
	sa.waitTimeout, sa.ackWithin = 300*time.Millisecond, 0
	_, err := a.RevokeInvocation(ctx, "inv-lost")
	if !errors.Is(err, ErrRevocationUnreplicated) {
		t.Fatalf("a revocation no replica holds was acknowledged: %v", err)
	}
	if _, rerr := a.Resolve(ctx, lost.Handle); !errors.Is(rerr, ErrHandleRevoked) {
		t.Fatalf("the unconfirmed revocation is not enforced on the primary: %v", rerr)
	}

	// The primary dies with the revocation unsent; the replica is promoted.
	primary.Kill()
	promote := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer promote.Close()
	if err := promote.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	c, _ := newRedisBroker(t, replica.Addr, nil)
	if _, err := c.Resolve(ctx, kept.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("an acknowledged revocation was lost in the failover: %v", err)
	}
	// What ErrRevocationUnreplicated warned of: the unconfirmed one is gone.
	if _, err := c.Resolve(ctx, lost.Handle); err != nil {
		t.Logf("the unconfirmed revocation survived anyway: %v", err)
	}
	// Revoking again (what a caller does on ErrRevocationUnreplicated) on
	// the promoted primary, which has no replica: acknowledged at once.
	if _, err := c.RevokeInvocation(ctx, "inv-lost"); err != nil {
		t.Fatalf("revoking again on a lone primary: %v", err)
	}
	if _, err := c.Resolve(ctx, lost.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("after revoking again: %v", err)
	}
}
