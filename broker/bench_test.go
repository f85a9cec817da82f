package broker

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

func BenchmarkIssueMemory(b *testing.B) {
	f := newMemFixture(b)
	f.b.cfg.MaxHandlesPerInvocation = 1 << 30
	f.store.max = 1 << 30
	ctx := context.Background()
	req := IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "example.read", Destinations: apiDest,
		Deadline: f.clk.Now().Add(time.Minute)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.b.Issue(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveMemory is the proxy's per-request handle check in the
// embedded mode. Goal: <= 300 ns and 0 allocations.
func BenchmarkResolveMemory(b *testing.B) {
	f := newMemFixture(b)
	h := f.issue(b, "p", "inv", "example.read").Handle
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.b.Resolve(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolveMemoryParallel(b *testing.B) {
	f := newMemFixture(b)
	h := f.issue(b, "p", "inv", "example.read").Handle
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.b.Resolve(ctx, h); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkResolveRedis: one round trip (HMGET) per resolve, against a
// real redis-server on loopback.
func BenchmarkResolveRedis(b *testing.B) {
	r := testenv.Redis(b)
	br, _ := newRedisBroker(b, r.Addr, nil)
	ctx := context.Background()
	iss, err := br.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "example.read",
		Destinations: apiDest, Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Resolve(ctx, iss.Handle); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveRedisCached is a resolve on a replica whose grant cache
// holds the grant (the invalidation feed live): no round trip.
func BenchmarkResolveRedisCached(b *testing.B) {
	r := testenv.Redis(b)
	br, store := newRedisBroker(b, r.Addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { store.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for _, live := store.cache.begin(); !live; _, live = store.cache.begin() {
		time.Sleep(time.Millisecond)
	}
	iss, err := br.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "example.read",
		Destinations: apiDest, Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Resolve(ctx, iss.Handle); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIssueRedis(b *testing.B) {
	r := testenv.Redis(b)
	br, _ := newRedisBroker(b, r.Addr, nil)
	br.cfg.MaxHandlesPerInvocation = 1 << 30
	ctx := context.Background()
	req := IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "example.read", Destinations: apiDest,
		Deadline: time.Now().Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Issue(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSecretCacheHit is the secret fetch on the proxy's hot path.
func BenchmarkSecretCacheHit(b *testing.B) {
	f := newMemFixture(b)
	ctx := context.Background()
	if _, err := f.b.SecretFor(ctx, "example.read", false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.b.SecretFor(ctx, "example.read", false); err != nil {
			b.Fatal(err)
		}
	}
}
