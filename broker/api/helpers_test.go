package api

import (
	"maps"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/internal/brokertest"
)

var apiDest = []broker.Destination{{Host: "api.example.com"}}

// testConfig has one read and one write intent on the file source, one
// unbound, and one bound to its own destination.
func testConfig(secretsFile string) broker.Config {
	return broker.Config{
		EgressProxy: "127.0.0.1:18899",
		Secrets:     broker.SecretsConfig{File: secretsFile},
		Intents: map[string]broker.Intent{
			"example.read": {Class: broker.ClassRead, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "example/api", Field: "token"},
				Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}},
			"example.write": {Class: broker.ClassWrite, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "example/api", Field: "token"},
				Inject: broker.Inject{Kind: &broker.BasicInject{UsernameField: "user"}}},
			"example.unbound": {Class: broker.ClassRead},
			"example.bound": {Class: broker.ClassRead, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "example/api", Field: "token"},
				Inject:       broker.Inject{Kind: &broker.HeaderInject{Name: "X-Key", Template: "{{secret}}"}},
				Destinations: []broker.Destination{{Host: "api.example.com"}}},
		},
	}.WithDefaults()
}

// memFixture is a broker on a memory store, on real time (the API tests
// cross a socket).
type memFixture struct {
	store *broker.MemoryStore
	b     *broker.Broker
	cfg   broker.Config
}

func newMemFixture(tb testing.TB) *memFixture {
	tb.Helper()
	cfg := testConfig(brokertest.WriteSecrets(tb, "example/api:\n  token: s3cr3t-value\n  user: bot\n"))
	if err := cfg.Validate(); err != nil {
		tb.Fatalf("test config invalid: %v", err)
	}
	store := broker.NewMemoryStore(cfg.Store.MaxHandles, cfg.ExpiredRetention, cfg.MaxHandleLifetime, time.Now)
	cache := broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: cfg.Secrets.File}},
		cfg.Secrets.CacheTTL, 0, nil, nil)
	return &memFixture{store: store, cfg: cfg, b: broker.New(cfg, store, cache, broker.Options{Now: time.Now})}
}

// newRedisBroker is a broker on a Redis store at addr, closed at cleanup.
func newRedisBroker(tb testing.TB, addr string) *broker.Broker {
	tb.Helper()
	cfg := testConfig(brokertest.WriteSecrets(tb, "example/api: {token: s3cr3t-value, user: bot}\n"))
	cfg.Store = broker.StoreConfig{Type: broker.StoreRedis, Redis: broker.RedisConfig{Address: addr, KeyPrefix: "airlock-test:"}}
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	store, err := broker.NewRedisStore(cfg.Store.Redis, cfg.ExpiredRetention, cfg.MaxHandleLifetime)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return broker.New(cfg, store, nil, broker.Options{})
}

// withRegions adds intents with regions: eu.api (eu-west-1, one
// destination in us-east-1) and noregion.api.
func withRegions(f *memFixture) {
	ref := broker.SecretRef{Source: broker.SourceFile, Path: "example/api", Field: "token"}
	hdr := broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}
	intents := maps.Clone(f.cfg.Intents)
	intents["eu.api"] = broker.Intent{Class: broker.ClassRead, Secret: ref, Inject: hdr, Region: "eu-west-1",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: 443, PathPrefix: "/us/", Region: "us-east-1"}, {Host: "api.example.com", Port: 443, PathPrefix: "/"}}}
	intents["noregion.api"] = broker.Intent{Class: broker.ClassRead, Secret: ref, Inject: hdr}
	f.b.SetIntents(intents)
}
