package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// A restarted Redis answers INFO while it loads its snapshot, but no
// data. The hold after the restart must cover the moment it serves data
// again, not run out while it loads: a replica that saw the restart
// during the loading still refuses its first resolves after it, while
// its peer, which made the revocation, has not yet written it again.
func TestRedisRestartHoldOutlastsLoading(t *testing.T) {
	ctx := context.Background()
	// About two seconds of loading for the snapshot below, far more
	// than the hold (3 × 100ms), answering clients meanwhile as a large
	// snapshot's loading does.
	r := testenv.RedisArgs(t, "--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024")
	a, sa := newRedisBroker(t, r.Addr, nil)
	b, sb := newRedisBroker(t, r.Addr, nil)
	sa.feedPing, sb.feedPing = 100*time.Millisecond, 100*time.Millisecond
	stopA := runStore(t, sa)
	startFeed(t, sb)
	waitForPeer(t, sb)
	handle := revokedInSnapshotOnly(t, a, b, r.Addr, 2000)
	// a's primary check stops (a slow peer): a writes its journal again
	// only when it next uses the store, below.
	stopA()
	r.Kill()
	if err := r.Start(); err != nil { // returns once the snapshot is loaded
		t.Fatal(err)
	}
	g, err := b.Resolve(ctx, handle)
	if err == nil {
		t.Fatalf("b resolved the handle a revoked (plugin %s): its hold ran out while Redis loaded", g.PluginID)
	}
	if !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("b's first resolve after the loading: %v", err)
	}
	// a uses the store: it writes its journal again (and, having a
	// peer, holds its own resolves too).
	if g, err := a.Resolve(ctx, handle); err == nil {
		t.Fatalf("a resolved the handle it revoked (plugin %s)", g.PluginID)
	}
	awaitRevoked(t, b, handle)
}

// A lone replica that restarts (an upgrade) is still lone: the replica
// it was marked its presence too, and that mark is not taken for a peer,
// which would hold its resolves after every primary change for the next
// ten minutes.
func TestRedisRestartedLoneReplicaHasNoPeer(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	_, old := newRedisBroker(t, r.Addr, nil)
	old.feedPing = 50 * time.Millisecond
	stop := runStore(t, old)
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	marks := func(s *RedisStore, n int) {
		t.Helper()
		var last float64
		for seen, deadline := 0, time.Now().Add(10*time.Second); seen < n; time.Sleep(5 * time.Millisecond) {
			if v, err := rc.ZScore(ctx, s.key("replicas"), s.replicaID()).Result(); err == nil && v != last {
				last, seen = v, seen+1
			}
			if time.Now().After(deadline) {
				t.Fatal("the replica never marked its presence")
			}
		}
	}
	marks(old, 1)
	stop()
	_, s := newRedisBroker(t, r.Addr, nil)
	s.feedPing = 50 * time.Millisecond
	startFeed(t, s)
	marks(s, 2) // the first mark's count is recorded when the second is made
	if s.hasPeers(time.Now()) {
		t.Fatal("the restarted lone replica took the replica it was for a peer")
	}
}

// Replicas whose clocks disagree (a host without time sync, a virtual
// machine resumed) still see each other as peers: whose mark is recent
// is not judged by each replica's own clock.
func TestRedisReplicasWithSkewedClocksSeeEachOther(t *testing.T) {
	r := testenv.Redis(t)
	_, sa := newRedisBroker(t, r.Addr, nil)
	_, sb := newRedisBroker(t, r.Addr, nil)
	sa.feedPing, sb.feedPing = 50*time.Millisecond, 50*time.Millisecond
	sa.presenceClock = func() time.Time { return time.Now().Add(-time.Minute) } // a minute behind
	startFeed(t, sa)
	startFeed(t, sb)
	for deadline := time.Now().Add(10 * time.Second); !sa.hasPeers(time.Now()) || !sb.hasPeers(time.Now()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replicas did not see each other: a %v, b %v (a's clock a minute behind)", sa.hasPeers(time.Now()), sb.hasPeers(time.Now()))
		}
	}
}

// A peer slower than a few primary checks to notice the change (busy,
// or its checks stalled) is waited for by name: the other replica holds
// its resolves until that peer has marked itself on the new server (so
// has written its journal there), not for a fixed time it may outlast.
func TestRedisRestartHoldAwaitsSlowPeer(t *testing.T) {
	const ping = 200 * time.Millisecond
	r := testenv.Redis(t)
	a, sa := newRedisBroker(t, r.Addr, nil)
	b, sb := newRedisBroker(t, r.Addr, nil)
	sa.feedPing, sb.feedPing = ping, ping
	stopA := runStore(t, sa)
	startFeed(t, sb)
	waitForPeer(t, sb)
	handle := revokedInSnapshotOnly(t, a, b, r.Addr, 0)
	stopA() // a's checks stall
	r.Kill()
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	// Past a fixed hold of settleChecks, well within settleMax.
	heldFor(t, b, handle, (settleChecks+2)*ping)
	// a comes back: it writes its journal on its first connection, then
	// marks itself; b goes on and sees the revocation.
	runStore(t, sa)
	awaitRevoked(t, b, handle)
}

// A peer's mark that the new server holds from before the change (its
// snapshot, or what it replicated from the old primary) was not made
// after the peer wrote its journal there, whatever its score: the old
// server's clock may run ahead of the new one's (another host, a clock
// stepped back at a reboot). The hold does not end on it.
func TestRedisRestartHoldIgnoresRestoredMark(t *testing.T) {
	const ping = 200 * time.Millisecond
	ctx := context.Background()
	r := testenv.Redis(t)
	a, sa := newRedisBroker(t, r.Addr, nil)
	b, sb := newRedisBroker(t, r.Addr, nil)
	sa.feedPing, sb.feedPing = ping, ping
	stopA := runStore(t, sa)
	startFeed(t, sb)
	waitForPeer(t, sb)
	stopA() // a's checks stall
	// a's last mark, dated by an old server whose clock ran a minute
	// ahead; it goes into the snapshot below.
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	now, err := rc.Time(ctx).Result()
	if err == nil {
		err = rc.ZAdd(ctx, sa.key("replicas"), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: sa.replicaID()}).Err()
	}
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	handle := revokedInSnapshotOnly(t, a, b, r.Addr, 0)
	r.Kill()
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	heldFor(t, b, handle, (settleChecks+2)*ping)
}

// Each replica that starts is a new peer id: a long-lived replica among
// many short-lived ones (autoscaling, restarts) forgets the peers it has
// not seen within the window a hold awaits, rather than keep them all.
func TestRedisPeersLongGoneAreForgotten(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	_, s := newRedisBroker(t, r.Addr, nil)
	clock := time.Now()
	s.presenceClock = func() time.Time { return clock }
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	for round := 0; round < 5; round++ {
		peer := fmt.Sprint("short-lived-", round)
		if err := rc.ZAdd(ctx, s.key("replicas"), redis.Z{Score: float64(time.Now().UnixMilli()), Member: peer}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.markPresence(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rc.ZRem(ctx, s.key("replicas"), peer).Err(); err != nil { // it stops
			t.Fatal(err)
		}
		clock = clock.Add(presenceChecks * s.feedPing)
	}
	if err := s.markPresence(ctx); err != nil {
		t.Fatal(err)
	}
	s.peers.mu.Lock()
	n := len(s.peers.seen)
	s.peers.mu.Unlock()
	if n != 0 {
		t.Fatalf("the replica still keeps %d peers it has not seen for a hold's window", n)
	}
}

// A presence check whose answer came from the old primary, while a
// connection to the new one started a hold, does not count its marks
// as made on the new one: the old server's clock may be ahead of the
// new one's, and its marks say nothing of the new server's journal.
func TestRedisHoldIgnoresMarksReadBeforeIt(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	_, s := newRedisBroker(t, r.Addr, nil)
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	now, err := rc.Time(ctx).Result()
	if err == nil {
		err = rc.ZAdd(ctx, s.key("replicas"), redis.Z{Score: float64(now.UnixMilli()), Member: "peer"}).Err()
	}
	if err == nil {
		err = s.markPresence(ctx) // the peer is seen
	}
	if err != nil {
		t.Fatal(err)
	}
	// The change lands between the next check's answer (from the old
	// server) and its reading: the new server's clock is behind.
	changed := false
	s.presenceClock = func() time.Time {
		if !changed {
			changed = true
			s.settle(time.Now(), now.Add(-time.Second).UnixMilli())
		}
		return time.Now()
	}
	if err := s.markPresence(ctx); err != nil {
		t.Fatal(err)
	}
	if !changed {
		t.Fatal("the hook did not run")
	}
	if s.settling(time.Now()) == nil {
		t.Fatal("a mark read from the old server ended the hold")
	}
}

// heldFor asks b to resolve handle for d after a restart with the
// revoking peer not yet back: every answer must be unavailable.
func heldFor(t *testing.T, b *Broker, handle string, d time.Duration) {
	t.Helper()
	for start := time.Now(); time.Since(start) < d; time.Sleep(10 * time.Millisecond) {
		if _, err := b.Resolve(context.Background(), handle); !errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("b's resolve %v after the restart, with a not yet back: %v, want unavailable", time.Since(start), err)
		}
	}
}
