package broker

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Through Redis Sentinel: the primary is killed while handles are issued
// and resolved; after the failover both work again on the promoted
// replica, and a handle issued before the crash (replicated) still
// resolves. The time until service resumes is logged as the measurement.
func TestRedisSentinelFailover(t *testing.T) {
	t.Parallel() // Redis servers of its own: waits on failovers and outages
	ctx := context.Background()
	rf := testenv.RedisSentinel(t)
	cfg := testConfig(writeSecrets(t, "example/api: {token: s3cr3t-value, user: bot}\n"))
	cfg.Store = StoreConfig{Type: StoreRedis, Redis: RedisConfig{KeyPrefix: "airlock-test:",
		Sentinel: &SentinelConfig{MasterName: rf.MasterName, Addresses: rf.Sentinels}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	store, err := NewRedisStore(cfg.Store.Redis, cfg.ExpiredRetention, cfg.MaxHandleLifetime)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b := New(cfg, store, nil, Options{})
	issue := func() (Issued, error) {
		return b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "example.read",
			Destinations: apiDest, Deadline: time.Now().Add(time.Minute)})
	}
	before, err := issue()
	if err != nil {
		t.Fatalf("issue through Sentinel: %v", err)
	}
	// Let the replica catch up (asynchronous replication), then crash
	// the primary.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n, _ := store.rdb.Do(ctx, "WAIT", 1, 100).Int(); n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica never acknowledged the writes")
		}
	}
	rf.Primary.Kill()
	crashed := time.Now()
	var after Issued
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if after, err = issue(); err == nil {
			if _, err = b.Resolve(ctx, after.Handle); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no issue/resolve within 60 s of the primary's crash: %v", err)
		}
	}
	t.Logf("issue and resolve work again %.1f s after the primary crashed", time.Since(crashed).Seconds())
	if _, err := b.Resolve(ctx, before.Handle); err != nil {
		t.Fatalf("a handle issued before the failover: %v", err)
	}
}
