package host

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// redisBroker is a broker on the real Redis at addr.
func redisBroker(t *testing.T, addr string) *broker.Broker {
	t.Helper()
	secrets := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("example/api: {token: s3cr3t-value}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := broker.Config{EgressProxy: "127.0.0.1:1", Secrets: broker.SecretsConfig{File: secrets},
		Intents: map[string]broker.Intent{"example.read": {Class: broker.ClassRead,
			Secret: broker.SecretRef{Source: broker.SourceFile, Path: "example/api", Field: "token"},
			Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}}},
		Store: broker.StoreConfig{Type: broker.StoreRedis, Redis: broker.RedisConfig{Address: addr, KeyPrefix: "host-test:"}},
	}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	store, err := broker.NewRedisStore(cfg.Store.Redis, cfg.ExpiredRetention, cfg.MaxHandleLifetime)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return broker.New(cfg, store, nil, broker.Options{})
}

// An invocation that ends while the handle store is down: its outcome
// says the handles' revocation is owed, and the host asks again until it
// lands, after which every replica refuses the handle (here the broker's
// own retries are not running: the host's alone land it).
func TestInvocationEndOwedIsRetried(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	link := testenv.NewRelay(t, r.Addr)
	hostSide, other := redisBroker(t, link.Addr), redisBroker(t, r.Addr)
	iss, err := hostSide.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv-1", Intent: "example.read",
		Destinations: []broker.Destination{{Host: "api.example.com"}}, Deadline: time.Now().Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	link.Cut()
	opts := Options{Broker: hostSide, Log: slog.New(slog.DiscardHandler)}
	got := EndInvocation(ctx, opts.Broker, opts.Log, "p", "inv-1", iss.ExpiresAt)
	if got["handles_owed"] != true || got["leases_revoked"] == nil {
		t.Fatalf("the outcome of an end with the store down: %v; want handles_owed and leases_revoked", got)
	}
	if _, err := hostSide.Resolve(ctx, iss.Handle); err == nil {
		t.Fatal("the replica that owes the revocation serves the handle")
	}
	link.Restore()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := other.Resolve(ctx, iss.Handle); errors.Is(err, broker.ErrHandleRevoked) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the owed revocation never landed")
		}
	}
	if got := EndInvocation(ctx, opts.Broker, opts.Log, "p", "inv-1", iss.ExpiresAt); got["handles_owed"] != false {
		t.Fatalf("an end the store acknowledged: %v", got)
	}
}
