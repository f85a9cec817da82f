package broker

import (
	"github.com/airlock-dev/airlock/broker/internal/brokertest"
	"github.com/airlock-dev/airlock/internal/testenv"

	"context"
	"sync/atomic"
	"testing"
	"time"
)

type clock = testenv.Clock

func newClock() *clock { return testenv.NewClock() }

var apiDest = []Destination{{Host: "api.example.com"}}

// testConfig has one read and one write intent on the file source.
func testConfig(secretsFile string) Config {
	return Config{
		EgressProxy: "127.0.0.1:8899",
		Secrets:     SecretsConfig{File: secretsFile},
		Intents: map[string]Intent{
			"example.read": {Class: ClassRead, Secret: SecretRef{Source: SourceFile, Path: "example/api", Field: "token"},
				Inject: Inject{Kind: &HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}},
			"example.write": {Class: ClassWrite, Secret: SecretRef{Source: SourceFile, Path: "example/api", Field: "token"},
				Inject: Inject{Kind: &BasicInject{UsernameField: "user"}}},
			"example.unbound": {Class: ClassRead},
			"example.bound": {Class: ClassRead, Secret: SecretRef{Source: SourceFile, Path: "example/api", Field: "token"},
				Inject:       Inject{Kind: &HeaderInject{Name: "X-Key", Template: "{{secret}}"}},
				Destinations: []Destination{{Host: "api.example.com"}}},
		},
	}.WithDefaults()
}

var writeSecrets = brokertest.WriteSecrets

type memFixture struct {
	clk   *clock
	store *MemoryStore
	b     *Broker
	cfg   Config
}

func newMemFixture(tb testing.TB) *memFixture {
	tb.Helper()
	clk := newClock()
	cfg := testConfig(writeSecrets(tb, "example/api:\n  token: s3cr3t-value\n  user: bot\n"))
	if err := cfg.Validate(); err != nil {
		tb.Fatalf("test config invalid: %v", err)
	}
	store := NewMemoryStore(cfg.Store.MaxHandles, cfg.ExpiredRetention, cfg.MaxHandleLifetime, clk.Now)
	cache := NewSecretCache(map[string]SecretSource{SourceFile: &FileSource{Path: cfg.Secrets.File}}, cfg.Secrets.CacheTTL, 0, nil, nil)
	return &memFixture{clk: clk, store: store, cfg: cfg, b: New(cfg, store, cache, Options{Now: clk.Now})}
}

func (f *memFixture) issue(tb testing.TB, plugin, inv, intent string) Issued {
	tb.Helper()
	iss, err := f.b.Issue(context.Background(), IssueRequest{PluginID: plugin, InvocationID: inv, Intent: intent,
		Destinations: apiDest, Deadline: f.clk.Now().Add(time.Minute)})
	if err != nil {
		tb.Fatalf("Issue: %v", err)
	}
	return iss
}

// countingSource counts reads that reach the wrapped source.
type countingSource struct {
	SecretSource
	reads atomic.Int64
	delay time.Duration
}

func (c *countingSource) Read(ctx context.Context, ref SecretRef) (SecretData, error) {
	c.reads.Add(1)
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	return c.SecretSource.Read(ctx, ref)
}
