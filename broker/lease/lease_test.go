package lease

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/internal/brokertest"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// leaseFixture is one broker replica whose intent "cert" is a leased PKI
// certificate.
type leaseFixture struct {
	b      *broker.Broker
	leases *Manager
	store  broker.Store
	mount  string
}

var leaseDest = []broker.Destination{{Host: "api.example.com"}}

// leaseConfig binds "cert" to mount's issue/leaf path.
func leaseConfig(mount string, lc broker.LeasesConfig) broker.Config {
	return broker.Config{Leases: lc, Intents: map[string]broker.Intent{
		"cert": {Class: broker.ClassWrite, Secret: broker.SecretRef{Source: broker.SourceVaultLease, Mount: mount, Path: "issue/leaf",
			Data: map[string]string{"common_name": "plugin.airlock.test", "ttl": "10m"}, Field: "certificate"},
			Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "X-Cert", Template: "{{secret}}"}}},
		"static": {Class: broker.ClassRead, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "example/api", Field: "token"},
			Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "X-Key", Template: "{{secret}}"}}},
	}}
}

// newLeaseFixture builds a replica on store (a fresh memory store when
// nil) reading Vault with vc; its Run loop stops at cleanup.
func newLeaseFixture(tb testing.TB, vc *vaultapi.Client, mount string, store broker.Store, lc broker.LeasesConfig) *leaseFixture {
	tb.Helper()
	cfg := leaseConfig(mount, lc)
	cfg.Secrets.File = brokertest.WriteSecrets(tb, "example/api: {token: s3cr3t-value}\n")
	if _, ok := store.(*broker.RedisStore); ok {
		cfg.Store.Type = broker.StoreRedis
		cfg.Store.Redis.Address = "127.0.0.1:1" // not dialled: the store is given
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		tb.Fatalf("config: %v", err)
	}
	if store == nil {
		store = broker.NewMemoryStore(1000, cfg.ExpiredRetention, cfg.MaxHandleLifetime, nil)
	}
	l, err := New(cfg, vc, store.(broker.LeaseStore), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Start())
	cache := broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: cfg.Secrets.File}}, time.Minute, 0, nil, nil)
	return &leaseFixture{b: broker.New(cfg, store, cache, broker.Options{Leases: l}), leases: l, store: store, mount: mount}
}

func (f *leaseFixture) issue(tb testing.TB, inv, intent string, deadline time.Time) *broker.Grant {
	tb.Helper()
	iss, err := f.b.Issue(context.Background(), broker.IssueRequest{PluginID: "p", InvocationID: inv, Intent: intent,
		Destinations: leaseDest, Deadline: deadline})
	if err != nil {
		tb.Fatalf("issue: %v", err)
	}
	g, err := f.b.Resolve(context.Background(), iss.Handle)
	if err != nil {
		tb.Fatalf("resolve: %v", err)
	}
	return g
}

var waitFor = brokertest.WaitFor

func newMount(tb testing.TB, v *testenv.VaultServer) string {
	tb.Helper()
	mount := "pki-" + rand.Text()[:8]
	v.MountPKI(tb, mount)
	return mount
}

// The lease is obtained at the first use, not at issue; every handle of
// the invocation shares it; another invocation gets its own; the end of
// the invocation revokes it at Vault and refuses further use.
func TestLeaseFirstUseSharedRevoked(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	mount := newMount(t, v)
	f := newLeaseFixture(t, v.Client(t), mount, nil, broker.LeasesConfig{})
	deadline := time.Now().Add(time.Hour)
	g1 := f.issue(t, "inv-1", "cert", deadline)
	g2 := f.issue(t, "inv-1", "cert", deadline)
	if n := len(v.Leases(t, mount+"/issue/leaf/")); n != 0 {
		t.Fatalf("issue obtained %d leases; want none before the first use", n)
	}
	s1, err := f.b.Secret(ctx, g1, false)
	if err != nil {
		t.Fatalf("first use: %v", err)
	}
	s2, err := f.b.Secret(ctx, g2, true)
	if err != nil {
		t.Fatalf("second handle: %v", err)
	}
	if s1.Lease == "" || s1.Lease != s2.Lease || s1.Value != s2.Value {
		t.Fatalf("the invocation's handles got different leases: %q %q", s1.Lease, s2.Lease)
	}
	other, err := f.b.Secret(ctx, f.issue(t, "inv-2", "cert", deadline), false)
	if err != nil || other.Lease == s1.Lease {
		t.Fatalf("another invocation shares the lease: %v", err)
	}
	if n := len(v.Leases(t, mount+"/issue/leaf/")); n != 2 {
		t.Fatalf("Vault holds %d leases; want 2 (one per invocation)", n)
	}
	if got := f.leases.Outstanding(); got != 2 {
		t.Fatalf("outstanding = %d, want 2", got)
	}
	if _, err := f.b.RevokeInvocation(ctx, "inv-1"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if n := len(v.Leases(t, mount+"/issue/leaf/")); n != 1 {
		t.Fatalf("Vault holds %d leases after inv-1 ended; want 1", n)
	}
	if _, _, err := f.leases.Fields(ctx, g1); !errors.Is(err, broker.ErrLeaseEnded) {
		t.Fatalf("use after the end: %v, want ErrLeaseEnded", err)
	}
	if got := f.leases.Outstanding(); got != 1 {
		t.Fatalf("outstanding = %d after one end, want 1", got)
	}
	// A static secret on the same broker is untouched by leases.
	if s, err := f.b.Secret(ctx, f.issue(t, "inv-2", "static", deadline), false); err != nil || s.Lease != "" {
		t.Fatalf("static secret: lease %q, %v", s.Lease, err)
	}
}

// A deadline that passes without RevokeInvocation (a host that died)
// still ends the lease: the replica that obtained it revokes it.
func TestLeaseDeadlineWithoutEnd(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	mount := newMount(t, v)
	f := newLeaseFixture(t, v.Client(t), mount, nil, broker.LeasesConfig{CheckInterval: 20 * time.Millisecond})
	g := f.issue(t, "inv-deadline", "cert", time.Now().Add(2*time.Second))
	if _, err := f.b.Secret(ctx, g, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease to be revoked at its deadline", func() bool {
		return len(v.Leases(t, mount+"/issue/leaf/")) == 0 && f.leases.Outstanding() == 0
	})
}

// Vault unreachable at the first use: ErrLeaseUnavailable (the proxy's
// 503), and nothing is recorded, so a later use tries again.
func TestLeaseVaultUnreachable(t *testing.T) {
	cfg := vaultapi.DefaultConfig()
	cfg.Address = "http://127.0.0.1:1"
	cfg.MaxRetries = 0
	vc, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newLeaseFixture(t, vc, "pki", nil, broker.LeasesConfig{})
	g := f.issue(t, "inv-down", "cert", time.Now().Add(time.Hour))
	_, err = f.b.Secret(context.Background(), g, false)
	if !errors.Is(err, broker.ErrLeaseUnavailable) {
		t.Fatalf("err = %v, want ErrLeaseUnavailable", err)
	}
	if raw, _ := f.store.(broker.LeaseStore).LoadLease(context.Background(), leaseKey("inv-down", "cert")); raw != nil {
		t.Fatal("a failed first use left a lease record")
	}
}

// A revocation Vault refuses is retried, counted as failing once its
// attempts are used (the readiness check says so), and completes when
// Vault is back.
func TestLeaseRevocationRetried(t *testing.T) {
	ctx := context.Background()
	v := testenv.NewVault(t)
	mount := newMount(t, v)
	f := newLeaseFixture(t, v.Client(t), mount, nil, broker.LeasesConfig{CheckInterval: 20 * time.Millisecond,
		RevokeAttempts: 2, RevokeBackoff: 10 * time.Millisecond, RevokeTimeout: 2 * time.Second})
	g := f.issue(t, "inv-retry", "cert", time.Now().Add(time.Hour))
	if _, err := f.b.Secret(ctx, g, false); err != nil {
		t.Fatal(err)
	}
	v.Seal(t)
	end, err := f.b.EndInvocation(ctx, "inv-retry")
	if err != nil || len(end.Leases) != 1 || end.Leases[0].Revoked {
		t.Fatalf("end with Vault sealed: %+v, %v; want one lease not revoked yet", end, err)
	}
	waitFor(t, "the revocation to be reported failing", func() bool { return f.leases.Check(ctx) != nil })
	if f.leases.Outstanding() != 1 {
		t.Fatalf("outstanding = %d, want 1", f.leases.Outstanding())
	}
	v.Unseal(t)
	waitFor(t, "the revocation to succeed after Vault is back", func() bool {
		return f.leases.Outstanding() == 0 && f.leases.Check(ctx) == nil
	})
	if n := len(v.Leases(t, mount+"/issue/leaf/")); n != 0 {
		t.Fatalf("Vault still holds %d leases", n)
	}
}

// Two replicas on one Redis racing on the first use of one invocation end
// with one lease: the loser revokes its own and uses the winner's.
func TestLeaseTwoReplicasRace(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	mount := newMount(t, v)
	rs := testenv.Redis(t)
	keyFile := sealKeyFile(t)
	lc := broker.LeasesConfig{SealKeyFile: keyFile, CheckInterval: 20 * time.Millisecond}
	var replicas []*leaseFixture
	for range 2 {
		st, err := broker.NewRedisStore(broker.RedisConfig{Address: rs.Addr, KeyPrefix: "lease-race:", LocalCache: -1}, time.Minute, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		replicas = append(replicas, newLeaseFixture(t, v.Client(t), mount, st, lc))
	}
	for round := range 3 {
		inv := "inv-race-" + string(rune('a'+round))
		g := replicas[0].issue(t, inv, "cert", time.Now().Add(time.Hour))
		var wg sync.WaitGroup
		got := make([]broker.Secret, 2)
		errs := make([]error, 2)
		for i, r := range replicas {
			wg.Add(1)
			go func() { defer wg.Done(); got[i], errs[i] = r.b.Secret(ctx, g, false) }()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: %v / %v", round, errs[0], errs[1])
		}
		if got[0].Lease != got[1].Lease || got[0].Value != got[1].Value {
			t.Fatalf("round %d: the replicas use different leases", round)
		}
		waitFor(t, "the race's loser to revoke its lease", func() bool {
			return len(v.Leases(t, mount+"/issue/leaf/")) == 1
		})
		// The end reaches either replica; the other's use is refused.
		if _, err := replicas[1].b.RevokeInvocation(ctx, inv); err != nil {
			t.Fatal(err)
		}
		if n := len(v.Leases(t, mount+"/issue/leaf/")); n != 0 {
			t.Fatalf("round %d: %d leases left after the end", round, n)
		}
		replicas[0].leases.mu.Lock()
		delete(replicas[0].leases.held, leaseKey(inv, "cert")) // as after a restart: read the store
		replicas[0].leases.mu.Unlock()
		if _, _, err := replicas[0].leases.Fields(ctx, g); !errors.Is(err, broker.ErrLeaseEnded) {
			t.Fatalf("round %d: use on the other replica after the end: %v", round, err)
		}
	}
	waitFor(t, "both replicas to forget their leases", func() bool {
		return replicas[0].leases.Outstanding() == 0 && replicas[1].leases.Outstanding() == 0
	})
}

// The store holds the lease id and credentials sealed: a dump of the
// record shows neither.
func TestLeaseRecordSealed(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	mount := newMount(t, v)
	f := newLeaseFixture(t, v.Client(t), mount, nil, broker.LeasesConfig{})
	g := f.issue(t, "inv-sealed", "cert", time.Now().Add(time.Hour))
	s, err := f.b.Secret(ctx, g, false)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := f.store.(broker.LeaseStore).LoadLease(ctx, leaseKey("inv-sealed", "cert"))
	if err != nil || raw == nil {
		t.Fatalf("record: %v", err)
	}
	ids := v.Leases(t, mount+"/issue/leaf/")
	if len(ids) != 1 {
		t.Fatalf("leases: %d", len(ids))
	}
	for _, needle := range []string{ids[0], s.Value[30:60], s.Fields["private_key"][40:70]} {
		if needle == "" || containsBytes(raw, needle) {
			t.Fatalf("the stored record shows a secret part (%d bytes)", len(needle))
		}
	}
	if s.Lease != fingerprint(mount+"/issue/leaf/"+ids[0]) {
		t.Fatal("the fingerprint is not the lease id's")
	}
}

func containsBytes(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }

// The replica that obtained a lease dies and the host never ends the
// invocation: another replica on the same Redis ends the lease at the
// invocation's deadline.
func TestLeaseDeadlineOtherReplica(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	mount := newMount(t, v)
	rs := testenv.Redis(t)
	keyFile := sealKeyFile(t)
	lc := broker.LeasesConfig{SealKeyFile: keyFile, CheckInterval: 20 * time.Millisecond}
	store := func() broker.Store {
		st, err := broker.NewRedisStore(broker.RedisConfig{Address: rs.Addr, KeyPrefix: "lease-dead:", LocalCache: -1}, time.Minute, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	// The obtaining replica: its loop never runs (it died after the
	// first use).
	deadCfg := leaseConfig(mount, lc)
	deadCfg.Store = broker.StoreConfig{Type: broker.StoreRedis, Redis: broker.RedisConfig{Address: rs.Addr}}
	deadCfg = deadCfg.WithDefaults()
	deadStore := store()
	dead, err := New(deadCfg, v.Client(t), deadStore.(broker.LeaseStore), Options{})
	if err != nil {
		t.Fatal(err)
	}
	db := broker.New(deadCfg, deadStore, nil, broker.Options{Leases: dead})
	g := &broker.Grant{PluginID: "p", InvocationID: "inv-orphan", Intent: "cert", ExpiresAt: time.Now().Add(2 * time.Second)}
	if _, err := db.Secret(ctx, g, false); err != nil {
		t.Fatal(err)
	}
	if n := len(v.Leases(t, mount+"/issue/leaf/")); n != 1 {
		t.Fatalf("leases: %d", n)
	}
	survivor := newLeaseFixture(t, v.Client(t), mount, store(), lc)
	waitFor(t, "the surviving replica to revoke the orphaned lease", func() bool {
		return len(v.Leases(t, mount+"/issue/leaf/")) == 0
	})
	if st, err := survivor.leases.State(ctx, "inv-orphan", "cert"); err != nil || st.State != broker.LeaseStateEnded {
		t.Fatalf("lease state: %+v %v", st, err)
	}
}

// The outstanding-leases gauge follows the leases this replica obtained:
// one in use, none once its invocation ended.
func TestLeaseMetrics(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	mount := newMount(t, v)
	cfg := leaseConfig(mount, broker.LeasesConfig{})
	cfg.Secrets.File = brokertest.WriteSecrets(t, "example/api: {token: x}\n")
	cfg = cfg.WithDefaults()
	reg := prometheus.NewRegistry()
	store := broker.NewMemoryStore(100, time.Minute, time.Hour, nil)
	l, err := New(cfg, v.Client(t), store, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	b := broker.New(cfg, store, nil, broker.Options{Leases: l})
	gauge := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	g := &broker.Grant{PluginID: "p", InvocationID: "inv-metrics", Intent: "cert", ExpiresAt: time.Now().Add(time.Hour)}
	if _, err := b.Secret(ctx, g, false); err != nil {
		t.Fatal(err)
	}
	if n := gauge("airlock_broker_leases_outstanding"); n != 1 {
		t.Fatalf("outstanding = %v in use, want 1", n)
	}
	if _, err := b.EndInvocation(ctx, "inv-metrics"); err != nil {
		t.Fatal(err)
	}
	if n := gauge("airlock_broker_leases_outstanding"); n != 0 {
		t.Fatalf("outstanding = %v after the end, want 0", n)
	}
	if n := gauge("airlock_broker_lease_revocations_failing"); n != 0 {
		t.Fatalf("failing = %v", n)
	}
}

// sealKeyFile writes a random lease seal key, as replicas share one.
func sealKeyFile(tb testing.TB) string {
	tb.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	p := filepath.Join(tb.TempDir(), "seal.key")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(key)), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
