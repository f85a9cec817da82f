package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/testenv"
)

func newRedisBroker(tb testing.TB, addr string, clk *clock) (*Broker, *RedisStore) {
	tb.Helper()
	return newRedisBrokerWith(tb, RedisConfig{Address: addr}, clk)
}

// newRedisBrokerWith is a broker on the Redis store rc (key prefix set
// here), closed at cleanup.
func newRedisBrokerWith(tb testing.TB, rc RedisConfig, clk *clock) (*Broker, *RedisStore) {
	tb.Helper()
	cfg := testConfig(writeSecrets(tb, "example/api: {token: s3cr3t-value, user: bot}\n"))
	rc.KeyPrefix = "airlock-test:"
	cfg.Store = StoreConfig{Type: StoreRedis, Redis: rc}
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	store, err := NewRedisStore(cfg.Store.Redis, cfg.ExpiredRetention, cfg.MaxHandleLifetime)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	now := time.Now
	if clk != nil {
		now = clk.Now
	}
	return New(cfg, store, nil, Options{Now: now}), store
}

// Two broker replicas on one real redis-server see each other's handles
// and revocations at once.
func TestRedisTwoReplicas(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	clk := newClock()
	clk.Advance(time.Since(clk.Now())) // Redis expires keys on the wall clock
	a, _ := newRedisBroker(t, r.Addr, clk)
	b, _ := newRedisBroker(t, r.Addr, clk)
	issue := func(br *Broker, plugin, inv, intent string) Issued {
		t.Helper()
		iss, err := br.Issue(ctx, IssueRequest{PluginID: plugin, InvocationID: inv, Intent: intent,
			Destinations: apiDest, Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		return iss
	}
	h1 := issue(a, "p1", "inv-1", "example.read")
	h2 := issue(a, "p1", "inv-2", "example.write")
	h3 := issue(b, "p2", "inv-3", "example.read")

	g, err := b.Resolve(ctx, h1.Handle)
	if err != nil || g.InvocationID != "inv-1" || g.Class != ClassRead || g.Destinations[0].Host != "api.example.com" {
		t.Fatalf("replica B resolving A's handle: %+v %v", g, err)
	}
	if _, err := a.Resolve(ctx, h3.Handle); err != nil {
		t.Fatalf("replica A resolving B's handle: %v", err)
	}

	if n, err := b.RevokeInvocation(ctx, "inv-1"); err != nil || n != 1 {
		t.Fatalf("RevokeInvocation on B = %d, %v", n, err)
	}
	if _, err := a.Resolve(ctx, h1.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("A after B revoked the invocation: %v", err)
	}
	if _, err := a.Issue(ctx, IssueRequest{PluginID: "p1", InvocationID: "inv-1", Intent: "example.read",
		Destinations: apiDest, Deadline: time.Now().Add(time.Minute)}); !errors.Is(err, ErrInvocationRevoked) {
		t.Fatalf("A issuing for an invocation B revoked: %v", err)
	}
	if n, err := a.RevokePlugin(ctx, "p1"); err != nil || n != 1 {
		t.Fatalf("RevokePlugin = %d, %v", n, err)
	}
	if _, err := b.Resolve(ctx, h2.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("B after A revoked the plugin: %v", err)
	}
	if _, err := b.Resolve(ctx, h3.Handle); err != nil {
		t.Fatalf("other plugin's handle after revocation: %v", err)
	}
	clk.Advance(2 * time.Millisecond) // the plugin watermark has millisecond resolution
	fresh := issue(b, "p1", "inv-4", "example.read")
	if _, err := a.Resolve(ctx, fresh.Handle); err != nil {
		t.Fatalf("restarted plugin's new handle: %v", err)
	}
}

// Handle keys expire in Redis at expires_at plus retention; the broker
// answers "expired" in between.
func TestRedisExpiry(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	clk := newClock()
	clk.Advance(time.Since(clk.Now())) // Redis expires keys on the wall clock
	b, store := newRedisBroker(t, r.Addr, clk)
	b.cfg.ExpiredRetention = 0
	store.retention = 0
	iss, err := b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read",
		Destinations: apiDest, Deadline: clk.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ParseHandle(iss.Handle)
	pexp, err := store.rdb.PExpireTime(ctx, "airlock-test:h:"+k.String()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := time.UnixMilli(0).Add(pexp); got.Sub(iss.ExpiresAt).Abs() > time.Millisecond {
		t.Fatalf("PEXPIREAT = %v, want %v", got, iss.ExpiresAt)
	}
	clk.Advance(400 * time.Millisecond)
	if _, err := b.Resolve(ctx, iss.Handle); !errors.Is(err, ErrHandleUnknown) && !errors.Is(err, ErrHandleExpired) {
		t.Fatalf("after expiry: %v", err)
	}
}

// A dump of Redis yields no usable handle.
func TestRedisStoreHoldsNoHandle(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	b, _ := newRedisBroker(t, r.Addr, nil)
	var handles []string
	for i := range 3 {
		iss, err := b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv" + string(rune('a'+i)), Intent: "example.read",
			Destinations: apiDest, Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, iss.Handle)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	var dump strings.Builder
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		dump.WriteString(k)
		switch rdb.Type(ctx, k).Val() {
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				dump.WriteString(f + v)
			}
		case "set":
			dump.WriteString(strings.Join(rdb.SMembers(ctx, k).Val(), ","))
		case "string":
			dump.WriteString(rdb.Get(ctx, k).Val())
		}
	}
	if len(keys) == 0 {
		t.Fatal("nothing stored")
	}
	for _, h := range handles {
		if strings.Contains(dump.String(), h) || strings.Contains(dump.String(), h[4:24]) {
			t.Fatal("Redis dump contains a handle")
		}
	}
}

// Redis down: Issue fails with a clear error and stores nothing; Resolve
// fails closed; both recover when Redis is back, without a restart.
func TestRedisDown(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	b, _ := newRedisBroker(t, r.Addr, nil)
	req := IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read", Destinations: apiDest, Deadline: time.Now().Add(time.Minute)}
	live, err := b.Issue(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	if _, err := b.Issue(ctx, req); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Issue with Redis down: %v", err)
	}
	if g, err := b.Resolve(ctx, live.Handle); !errors.Is(err, ErrStoreUnavailable) || g != nil {
		t.Fatalf("Resolve with Redis down: %v (grant %v): must fail closed", err, g)
	}
	if err := b.Ping(ctx); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Ping with Redis down: %v", err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	// The restarted server is empty (no persistence): the old handle is gone,
	// new ones work.
	if _, err := b.Resolve(ctx, live.Handle); !errors.Is(err, ErrHandleUnknown) {
		t.Fatalf("old handle after Redis restart: %v", err)
	}
	iss, err := b.Issue(ctx, req)
	if err != nil {
		t.Fatalf("Issue after Redis is back: %v", err)
	}
	if _, err := b.Resolve(ctx, iss.Handle); err != nil {
		t.Fatalf("Resolve after Redis is back: %v", err)
	}
}

func TestRedisIssueLimit(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	b, _ := newRedisBroker(t, r.Addr, nil)
	b.cfg.MaxHandlesPerInvocation = 2
	req := IssueRequest{PluginID: "p", InvocationID: "i", Intent: "example.read", Destinations: apiDest, Deadline: time.Now().Add(time.Minute)}
	for range 2 {
		if _, err := b.Issue(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Issue(ctx, req); !errors.Is(err, ErrIssueLimit) {
		t.Fatalf("3rd: %v", err)
	}
}

// The startup warning says what a Redis without AOF loses.
func TestRedisPersistenceWarning(t *testing.T) {
	t.Parallel()          // Redis servers of its own: waits on failovers and outages
	r := testenv.Redis(t) // started with --appendonly no --save ""
	_, store := newRedisBroker(t, r.Addr, nil)
	ctx := context.Background()
	if w := store.Persistence(ctx); !strings.Contains(w, "loses every live handle") || !strings.Contains(w, "appendonly yes") {
		t.Fatalf("warning without persistence: %q", w)
	}
	if err := store.rdb.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	if w := store.Persistence(ctx); w != "" {
		t.Fatalf("warning with AOF on: %q", w)
	}
}

// A Redis user that may not run INFO gets a startup warning: without
// INFO no restart or failover is noticed, so nothing lost is written
// again.
func TestRedisPersistenceWarningWithoutInfo(t *testing.T) {
	r := testenv.Redis(t)
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	const pw = "noinfo-test-password"
	if err := rc.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">"+pw, "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, store := newRedisBrokerWith(t, RedisConfig{Address: r.Addr, Username: "noinfo", PasswordFile: pwFile}, nil)
	if w := store.Persistence(ctx); !strings.Contains(w, "refuses INFO") || strings.Contains(w, pw) {
		t.Fatalf("warning for a user without INFO: %q", w)
	}
}
