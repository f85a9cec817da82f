package broker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// 1,200 invocations are revoked through replica A while an operator runs
// SENTINEL FAILOVER, and both replicas (grant caches on) resolve every
// handle all along. A never serves a handle after its revocation returned
// (it drops its own cache entries at once), and B never serves one after
// its feed delivered the revocation: B's cache learns of other replicas'
// revocations through pub/sub, a millisecond or two after they are
// acknowledged (docs/broker.md), and across the failover its feed, which
// sat on the old primary, hears them through that server's replication
// or is not used until it is proven on the new primary. No revocation is
// lost: an acknowledged one is on the new primary (written again there
// when the old one could not get it replicated), one that is owed is
// refused by A, and once the failover settled both replicas and a fresh
// one find every handle revoked.
func TestRedisManualFailoverKeepsRevocations(t *testing.T) {
	t.Parallel() // Redis servers of its own: waits on failovers and outages
	const n = 1200
	ctx := context.Background()
	rf := testenv.RedisSentinel(t)
	rc := RedisConfig{Sentinel: &SentinelConfig{MasterName: rf.MasterName, Addresses: rf.Sentinels}}
	a, sa := newRedisBrokerWith(t, rc, nil)
	b, sb := newRedisBrokerWith(t, rc, nil)
	sa.ackWithin, sb.ackWithin = time.Minute, time.Minute // a loaded machine must not make them owed
	startFeed(t, sa)
	startFeed(t, sb)

	handles := make([]string, n)
	for i := range handles {
		iss, err := b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv-" + strconv.Itoa(i), Intent: "example.read",
			Destinations: apiDest, Deadline: time.Now().Add(10 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = iss.Handle
		for _, r := range []*Broker{a, b} {
			if _, err := r.Resolve(ctx, iss.Handle); err != nil {
				t.Fatal(err)
			}
		}
	}
	replicated(t, sb.rdb)

	// state[i]: 0 live, 1 acknowledged, 2 owed (A refuses it).
	state := make([]atomic.Int32, n)
	ackedAt := make([]atomic.Int64, n)
	fedB := make([]atomic.Bool, n) // B's feed delivered the revocation
	sb.fedInvalidation = func(msg string) {
		if i, err := strconv.Atoi(strings.TrimPrefix(msg, "inv:inv-")); err == nil && i >= 0 && i < n {
			fedB[i].Store(true)
		}
	}
	var violations atomic.Int64
	var resolves atomic.Int64
	stop := make(chan struct{})
	var load sync.WaitGroup
	for w := 0; w < 4; w++ {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := w; ; i = (i + 4) % n {
				select {
				case <-stop:
					return
				default:
				}
				for ri, r := range []*Broker{a, b} {
					st, fed := state[i].Load(), fedB[i].Load()
					_, err := r.Resolve(ctx, handles[i])
					resolves.Add(1)
					if err == nil && (ri == 0 && st != 0 || ri == 1 && st == 1 && fed) {
						if violations.Add(1) <= 5 {
							_, la := sa.cache.begin()
							_, lb := sb.cache.begin()
							t.Logf("violation: replica %d, handle %d, %s after the ack; caches live A %v B %v",
								ri, i, time.Since(time.Unix(0, ackedAt[i].Load())), la, lb)
						}
					}
				}
			}
		}()
	}

	sentinel := redis.NewSentinelClient(&redis.Options{Addr: rf.Sentinels[0]})
	defer sentinel.Close()
	// Sentinel learns of the replica from the primary's INFO: a failover
	// asked for before that finds no replica to promote.
	waitUntil(t, "Sentinel knows a healthy replica", func() bool {
		reps, err := sentinel.Replicas(ctx, rf.MasterName).Result()
		for _, r := range reps {
			if r["flags"] == "slave" && r["master-link-status"] == "ok" {
				return err == nil
			}
		}
		return false
	})
	var next atomic.Int64
	var owed atomic.Int64
	var revokers sync.WaitGroup
	failover := make(chan error, 1)
	for w := 0; w < 8; w++ {
		revokers.Add(1)
		go func() {
			defer revokers.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if i == 100 {
					failover <- sentinel.Failover(ctx, rf.MasterName).Err()
				}
				_, err := a.RevokeInvocation(ctx, "inv-"+strconv.Itoa(i))
				switch {
				case err == nil:
					ackedAt[i].Store(time.Now().UnixNano())
					state[i].Store(1)
				case errors.Is(err, ErrRevocationOwed):
					state[i].Store(2)
					owed.Add(1)
				default:
					t.Errorf("revocation %d: %v", i, err)
				}
			}
		}()
	}
	revokers.Wait()
	if err := <-failover; err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	waitUntil(t, "Sentinel promotes the replica", func() bool {
		addr, err := sentinel.GetMasterAddrByName(ctx, rf.MasterName).Result()
		return err == nil && len(addr) == 2 && addr[0]+":"+addr[1] == rf.Replica.Addr
	})
	waitUntil(t, "both feeds are proven on the new primary", func() bool {
		_, la := sa.cache.begin()
		_, lb := sb.cache.begin()
		return la && lb
	})
	settled := resolves.Load()
	waitUntil(t, "the load runs on after the failover settled", func() bool { return resolves.Load() > settled+2*n })
	close(stop)
	load.Wait()
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d requests resolved a handle after its revocation returned (%d owed)", v, owed.Load())
	}
	waitUntil(t, "A's owed revocations land", func() bool { a.retryOwed(ctx); return a.Owed() == 0 })
	fresh, _ := newRedisBrokerWith(t, rc, nil)
	for name, r := range map[string]*Broker{"A": a, "B": b, "a fresh replica": fresh} {
		for i, h := range handles {
			if _, err := r.Resolve(ctx, h); !errors.Is(err, ErrHandleRevoked) {
				t.Fatalf("%s: handle %d after the failover: %v; want revoked", name, i, err)
			}
		}
	}
	t.Logf("%d revocations during the failover: %d acknowledged, %d owed; %d resolves", n, int64(n)-owed.Load(), owed.Load(), resolves.Load())
}
