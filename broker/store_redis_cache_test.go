package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// runStore runs s (its feed and primary checks) until stop, which waits
// for it to end; the test's end stops it too.
func runStore(t *testing.T, s *RedisStore) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// startFeed runs the store's invalidation feed until the test ends and
// waits for it to be live.
func startFeed(t *testing.T, s *RedisStore) {
	t.Helper()
	runStore(t, s)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, live := s.cache.begin(); live {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the invalidation feed never went live")
		}
	}
}

// Two replicas with local grant caches: resolves are served from memory,
// and a revocation on one replica reaches the other's cache over pub/sub.
// The propagation time is measured and logged (p50, p99 over 50 rounds).
func TestRedisGrantCacheRevocationPropagates(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	a, sa := newRedisBroker(t, r.Addr, nil)
	b, sb := newRedisBroker(t, r.Addr, nil)
	startFeed(t, sa)
	startFeed(t, sb)
	var lat []time.Duration
	for i := 0; i < 50; i++ {
		inv := "inv-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		iss, err := a.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: inv, Intent: "example.read",
			Destinations: apiDest, Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Resolve(ctx, iss.Handle); err != nil {
			t.Fatal(err)
		}
		if sa.cache.get(keyOf(iss.Handle).String()) == nil {
			t.Fatal("a resolved grant is not in the replica's cache")
		}
		start := time.Now()
		if _, err := b.RevokeInvocation(ctx, inv); err != nil {
			t.Fatal(err)
		}
		for {
			_, err := a.Resolve(ctx, iss.Handle)
			if errors.Is(err, ErrHandleRevoked) {
				lat = append(lat, time.Since(start))
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("replica A still serves a grant revoked on B: %v", err)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	slices.Sort(lat)
	t.Logf("revocation on B enforced by A's cache after p50 %s, p99 %s, max %s", lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

// The feed dropping (the subscriber's connection killed) makes the cache
// step aside: a revocation published while it was down is still enforced,
// and a resubscribed feed starts from an empty cache.
func TestRedisGrantCacheFeedDrop(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	a, sa := newRedisBroker(t, r.Addr, nil)
	b, _ := newRedisBroker(t, r.Addr, nil)
	startFeed(t, sa)
	iss, err := a.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv-drop", Intent: "example.read",
		Destinations: apiDest, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resolve(ctx, iss.Handle); err != nil {
		t.Fatal(err)
	}
	// Kill every pub/sub connection, then revoke on B at once: A's feed
	// misses the message.
	if err := sa.rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RevokeInvocation(ctx, "inv-drop"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := a.Resolve(ctx, iss.Handle)
		if errors.Is(err, ErrHandleRevoked) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a revocation made while the feed was down is not enforced: %v", err)
		}
	}
	// Whatever happened, the revoked grant is never served again.
	for i := 0; i < 200; i++ {
		if _, err := a.Resolve(ctx, iss.Handle); !errors.Is(err, ErrHandleRevoked) {
			t.Fatalf("resolve %d after the revocation: %v", i, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A pass renewed on one replica is renewed on the other, whose cache
// held the grant with its first expiry.
func TestRedisPassRenewal(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	clk := newClock()
	clk.Advance(time.Since(clk.Now())) // Redis expires keys by the real clock
	a, sa := newRedisBroker(t, r.Addr, clk)
	b, sb := newRedisBroker(t, r.Addr, clk)
	startFeed(t, sa)
	startFeed(t, sb)
	iss, err := a.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "pass-1", Pass: true, Destinations: apiDest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resolve(ctx, iss.Handle); err != nil || sb.cache.get(keyOf(iss.Handle).String()) == nil {
		t.Fatalf("replica B did not cache the pass: %v", err)
	}
	clk.Advance(45 * time.Minute)
	got, err := a.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "pass-renew", Pass: true, Renew: iss.Handle})
	if err != nil || !got.ExpiresAt.After(iss.ExpiresAt) {
		t.Fatalf("renewal on A: %+v %v", got, err)
	}
	clk.Advance(30 * time.Minute) // past the first expiry
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		g, err := b.Resolve(ctx, iss.Handle)
		if err == nil && g.ExpiresAt.Equal(got.ExpiresAt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica B still sees the first expiry: %+v %v", g, err)
		}
	}
	if _, err := b.RevokePlugin(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "pass-renew", Pass: true, Renew: iss.Handle}); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("a pass revoked on B renewed on A: %v", err)
	}
	flipped := []byte(iss.Handle)
	flipped[len(flipped)-1] ^= 1
	if _, err := a.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "pass-renew", Pass: true, Renew: string(flipped)}); !errors.Is(err, ErrHandleUnknown) {
		t.Fatalf("a pass with a bit flipped: %v", err)
	}
}
