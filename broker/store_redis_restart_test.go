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

// A Redis that restarts having lost a revocation it acknowledged (it came
// back from a snapshot older than the revocation, or lost its last
// second of appendfsync everysec to a kill -9) does not make the handle
// resolve again on the replica that revoked it, not even for the moment
// before the feed notices the restart: the revocation is written again
// before the restarted server answers anything.
func TestRedisRestartThatLostARevocationKeepsIt(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	b, s := newRedisBroker(t, r.Addr, nil)
	startFeed(t, s)
	handle := revokedInSnapshotOnly(t, b, b, r.Addr, 0)
	r.Kill()
	if err := r.Start(); err != nil { // back from the snapshot
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		g, err := b.Resolve(ctx, handle)
		if err == nil {
			t.Fatalf("resolve %d after the restart: the revoked handle resolved again (plugin %s)", i, g.PluginID)
		}
		if s.settling(time.Now()) != nil {
			t.Fatalf("resolve %d: a lone replica holds its resolves for peers it does not have: %v", i, err)
		}
	}
}

// With two replicas, a Redis that came back without a revocation one of
// them made does not make the handle resolve on the other either: the
// other, which has seen its peer, holds its resolves after the restart
// (failing closed) until the revoking replica has noticed the restart
// and written its journal again.
func TestRedisRestartLostRevocationNotServedByPeer(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	a, sa := newRedisBroker(t, r.Addr, nil)
	b, sb := newRedisBroker(t, r.Addr, nil)
	sa.feedPing, sb.feedPing = 100*time.Millisecond, 100*time.Millisecond
	startFeed(t, sa)
	startFeed(t, sb)
	waitForPeer(t, sb)
	handle := revokedInSnapshotOnly(t, a, b, r.Addr, 0)
	r.Kill()
	if err := r.Start(); err != nil { // back from the snapshot
		t.Fatal(err)
	}
	// b resolves at once and keeps asking; a is left alone until its own
	// primary check notices the restart. b must never see the handle
	// live, and sees it revoked once a has written its journal again.
	var unavailable int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		g, err := b.Resolve(ctx, handle)
		if err == nil {
			t.Fatalf("b resolved the handle a revoked (plugin %s) after %d refusals", g.PluginID, unavailable)
		}
		if errors.Is(err, ErrHandleRevoked) {
			break
		}
		if !errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("b's resolve after the restart: %v", err)
		}
		unavailable++
		if time.Now().After(deadline) {
			t.Fatalf("b's resolves stayed unavailable: %v", err)
		}
	}
	if unavailable == 0 {
		t.Fatal("b saw the revocation without waiting: a wrote it again before b resolved, so the test proved nothing")
	}
}

// revokedInSnapshotOnly issues a handle on a, saves a Redis snapshot
// holding it live (after fill more keys, to make the snapshot slower to
// load), then revokes it on a, which resolver sees: a restart from that
// snapshot loses the revocation. It returns the handle.
func revokedInSnapshotOnly(t *testing.T, a, resolver *Broker, addr string, fill int) string {
	t.Helper()
	ctx := context.Background()
	iss, err := a.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv-1", Intent: "example.read",
		Destinations: apiDest, Deadline: time.Now().Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: addr})
	_, err = rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range fill {
			p.Set(ctx, fmt.Sprint("filler:", i), "x", 0)
		}
		return nil
	})
	if err == nil {
		err = rc.Save(ctx).Err()
	}
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.RevokeInvocation(ctx, "inv-1"); err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	if _, err := resolver.Resolve(ctx, iss.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("resolve after the revocation: %v", err)
	}
	return iss.Handle
}

// waitForPeer waits until s has seen another replica's presence mark.
func waitForPeer(t *testing.T, s *RedisStore) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !s.hasPeers(time.Now()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replica never saw its peer")
		}
	}
}

// awaitRevoked polls b until it answers that handle is revoked; the
// handle resolving meanwhile, or no answer but unavailable within ten
// seconds, fails the test.
func awaitRevoked(t *testing.T, b *Broker, handle string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		g, err := b.Resolve(context.Background(), handle)
		if err == nil {
			t.Fatalf("the revoked handle resolved (plugin %s)", g.PluginID)
		}
		if errors.Is(err, ErrHandleRevoked) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("resolves stayed unavailable: %v", err)
		}
	}
}
