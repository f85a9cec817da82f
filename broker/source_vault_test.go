package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// vaultBroker returns a broker whose intents read the real Vault.
func vaultBroker(tb testing.TB, client *vaultapi.Client, prefix string, src **countingSource) *Broker {
	tb.Helper()
	cfg := Config{Intents: map[string]Intent{
		"api": {Class: ClassRead, Secret: SecretRef{Source: SourceVault, Path: prefix + "/api", Field: "token"},
			Inject: Inject{Kind: &HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}},
		"basic": {Class: ClassWrite, Secret: SecretRef{Source: SourceVault, Path: prefix + "/api", Field: "token"},
			Inject: Inject{Kind: &BasicInject{UsernameField: "user"}}},
		"nofield": {Class: ClassRead, Secret: SecretRef{Source: SourceVault, Path: prefix + "/api", Field: "absent"},
			Inject: Inject{Kind: &QueryInject{Name: "key"}}},
		"nopath": {Class: ClassRead, Secret: SecretRef{Source: SourceVault, Path: prefix + "/missing", Field: "token"},
			Inject: Inject{Kind: &QueryInject{Name: "key"}}},
		"v1": {Class: ClassRead, Secret: SecretRef{Source: SourceVault, Mount: "kv1", KVVersion: 1, Path: prefix + "/api", Field: "token"},
			Inject: Inject{Kind: &QueryInject{Name: "key"}}},
		"wrongkv": {Class: ClassRead, Secret: SecretRef{Source: SourceVault, Mount: "kv1", KVVersion: 2, Path: prefix + "/api", Field: "token"},
			Inject: Inject{Kind: &QueryInject{Name: "key"}}},
	}}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	cs := &countingSource{SecretSource: &VaultSource{Client: client}}
	if src != nil {
		*src = cs
	}
	cache := NewSecretCache(map[string]SecretSource{SourceVault: cs}, cfg.Secrets.CacheTTL, 0, nil, nil)
	return New(cfg, NewMemoryStore(100, 0, time.Hour, nil), cache, Options{})
}

func putSecret(tb testing.TB, c *vaultapi.Client, path string, data map[string]any) {
	tb.Helper()
	if _, err := c.KVv2("secret").Put(context.Background(), path, data); err != nil {
		tb.Fatalf("vault kv put: %v", err)
	}
}

// Vault admins rotate with `vault kv put`; after a refresh the next fetch
// uses the new version, and the version is reported.
func TestVaultRotation(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	root := v.Client(t)
	prefix := "rotation"
	putSecret(t, root, prefix+"/api", map[string]any{"token": "v1-secret", "user": "bot"})
	var src *countingSource
	b := vaultBroker(t, root, prefix, &src)

	s, err := b.SecretFor(ctx, "api", false)
	if err != nil || s.Value != "v1-secret" || s.Version != 1 {
		t.Fatalf("first fetch: %+v %v", s, err)
	}
	putSecret(t, root, prefix+"/api", map[string]any{"token": "v2-secret", "user": "bot"})
	if s, _ := b.SecretFor(ctx, "api", false); s.Version != 1 {
		t.Fatalf("within TTL the cache answers: got v%d", s.Version)
	}
	b.RefreshSecrets()
	s, err = b.SecretFor(ctx, "api", false)
	if err != nil || s.Value != "v2-secret" || s.Version != 2 {
		t.Fatalf("after refresh: %+v %v", s, err)
	}
	s, err = b.SecretFor(ctx, "basic", false)
	if err != nil || s.Username != "bot" || s.Value != "v2-secret" {
		t.Fatalf("basic: %+v %v", s, err)
	}
	if n := src.reads.Load(); n != 2 {
		t.Fatalf("Vault reads = %d, want 2 (one per version; intents sharing a path share the entry)", n)
	}
}

// Under 1,000 concurrent fetches of one intent, Vault sees one read.
func TestVaultOneReadPerTTL(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	root := v.Client(t)
	putSecret(t, root, "burst/api", map[string]any{"token": "t"})
	var src *countingSource
	b := vaultBroker(t, root, "burst", &src)
	var wg sync.WaitGroup
	errc := make(chan error, 1000)
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.SecretFor(ctx, "api", false); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if n := src.reads.Load(); n != 1 {
		t.Fatalf("Vault reads = %d, want 1", n)
	}
}

func TestVaultSecretErrors(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	root := v.Client(t)
	putSecret(t, root, "errors/api", map[string]any{"token": "hunter2-value"})
	if err := root.Sys().MountWithContext(ctx, "kv1", &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "1"}}); err != nil &&
		!strings.Contains(err.Error(), "path is already in use") {
		t.Fatal(err)
	}
	if _, err := root.Logical().WriteWithContext(ctx, "kv1/errors/api", map[string]any{"token": "v1-mount-value"}); err != nil {
		t.Fatal(err)
	}
	b := vaultBroker(t, root, "errors", nil)
	if s, err := b.SecretFor(ctx, "v1", false); err != nil || s.Value != "v1-mount-value" || s.Version != 0 {
		t.Fatalf("KV v1 read: %+v %v", s, err)
	}
	for _, tt := range []struct {
		intent string
		want   error
	}{
		{"nofield", ErrSecretFieldMissing},
		{"nopath", ErrSecretNotFound},
		{"wrongkv", ErrWrongKVVersion},
	} {
		_, err := b.SecretFor(ctx, tt.intent, false)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.intent, err, tt.want)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, `intent "`+tt.intent+`"`) || strings.Contains(msg, "hunter2") || strings.Contains(msg, "errors/") {
			t.Errorf("%s: error must name the intent and not the secret: %q", tt.intent, msg)
		}
	}
}

// Sealed, stopped or token-revoked Vault: ErrSecretUnavailable, never a
// value; recovery without restart once Vault is back.
func TestVaultOutages(t *testing.T) {
	ctx := context.Background()
	v := testenv.NewVault(t)
	root := v.Client(t)
	putSecret(t, root, "outage/api", map[string]any{"token": "t1"})

	// A token of its own, so revoking it does not break the test's root.
	tok, err := root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{"root"}})
	if err != nil {
		t.Fatal(err)
	}
	client := v.Client(t)
	client.SetToken(tok.Auth.ClientToken)
	b := vaultBroker(t, client, "outage", nil)
	// Each fresh read below is a new second: fresh reads of one secret
	// are coalesced within MinFreshInterval.
	var skew atomic.Int64
	b.secrets.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	fresh := func() error {
		skew.Add(int64(MinFreshInterval))
		_, err := b.SecretFor(ctx, "api", true)
		return err
	}

	if err := fresh(); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	v.Seal(t)
	if err := fresh(); !errors.Is(err, ErrSecretUnavailable) {
		t.Fatalf("sealed: %v", err)
	}
	v.Unseal(t)
	if err := fresh(); err != nil {
		t.Fatalf("after unseal: %v", err)
	}
	if err := root.Auth().Token().RevokeTreeWithContext(ctx, tok.Auth.ClientToken); err != nil {
		t.Fatal(err)
	}
	if err := fresh(); !errors.Is(err, ErrSecretUnavailable) {
		t.Fatalf("token revoked: %v", err)
	}
	v.Stop()
	if err := fresh(); !errors.Is(err, ErrSecretUnavailable) {
		t.Fatalf("Vault stopped: %v", err)
	}
}

// With Vault sealed, an upstream answering 401 to every request asks for
// a fresh re-read on each response. The first re-read finds Vault down;
// further ones are skipped at once (no response waits for a read that
// will fail) until sourceRetry has passed, when one probe is let through,
// and the first probe after unsealing reads again. On the old code every
// re-read went to the sealed Vault.
func TestVaultKnownDownSkipsFreshReads(t *testing.T) {
	ctx := context.Background()
	v := testenv.NewVault(t)
	root := v.Client(t)
	putSecret(t, root, "down/api", map[string]any{"token": "before-seal", "user": "bot"})
	var src *countingSource
	b := vaultBroker(t, root, "down", &src)
	clk := newClock()
	b.secrets.now = clk.Now
	if _, err := b.SecretFor(ctx, "api", false); err != nil {
		t.Fatal(err)
	}
	v.Seal(t)
	clk.Advance(MinFreshInterval)
	reads := func() int64 { return src.reads.Load() }
	before := reads()
	for i := 0; i < 20; i++ {
		if _, err := b.SecretFor(ctx, "api", true); !errors.Is(err, ErrSecretUnavailable) {
			t.Fatalf("fresh read %d with Vault sealed: %v", i, err)
		}
	}
	if n := reads() - before; n != 1 {
		t.Fatalf("20 fresh re-reads with Vault sealed made %d reads of Vault, want 1", n)
	}
	// The cached version still serves ordinary requests.
	if s, err := b.SecretFor(ctx, "api", false); err != nil || s.Value != "before-seal" {
		t.Fatalf("cached read with Vault sealed: %v", err)
	}
	clk.Advance(sourceRetry)
	for i := 0; i < 5; i++ {
		_, _ = b.SecretFor(ctx, "api", true)
	}
	if n := reads() - before; n != 2 {
		t.Fatalf("after sourceRetry: %d reads in all, want one probe more (2)", n)
	}
	v.Unseal(t)
	clk.Advance(sourceRetry)
	if s, err := b.SecretFor(ctx, "api", true); err != nil || s.Value != "before-seal" {
		t.Fatalf("the first probe after unsealing: %v", err)
	}
	if _, err := b.SecretFor(ctx, "api", true); err != nil {
		t.Fatalf("a fresh read once Vault is known up: %v", err)
	}
}

// The static KV v2 read, as the baseline of the leased secrets' benchmarks
// (broker/lease).
func BenchmarkSecretStaticKV(b *testing.B) {
	v := testenv.Vault(b)
	putSecret(b, v.Client(b), "bench-static/api", map[string]any{"token": "static-value"})
	br := vaultBroker(b, v.Client(b), "bench-static", nil)
	g := &Grant{PluginID: "p", InvocationID: "inv", Intent: "api", ExpiresAt: time.Now().Add(time.Hour)}
	ctx := context.Background()
	if _, err := br.Secret(ctx, g, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Secret(ctx, g, false); err != nil {
			b.Fatal(err)
		}
	}
}
