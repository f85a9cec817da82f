package egressenv

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

func TestVars(t *testing.T) {
	if v := Vars("", "/ca.pem", ""); v != nil {
		t.Fatalf("no proxy, yet %v", v)
	}
	if v := Vars("127.0.0.1:8899", "", "alh_pass"); !slices.Equal(v, []string{"HTTP_PROXY=http://127.0.0.1:8899", "http_proxy=http://127.0.0.1:8899"}) {
		t.Fatalf("without the CA: %v", v)
	}
	v := Vars("127.0.0.1:8899", "/p/ca.pem", "")
	for _, want := range []string{"HTTPS_PROXY=http://127.0.0.1:8899", "https_proxy=http://127.0.0.1:8899", "SSL_CERT_FILE=/p/ca.pem",
		"REQUESTS_CA_BUNDLE=/p/ca.pem", "CURL_CA_BUNDLE=/p/ca.pem", "NODE_EXTRA_CA_CERTS=/p/ca.pem"} {
		if !slices.Contains(v, want) {
			t.Errorf("%s missing: %v", want, v)
		}
	}
	for _, kv := range v {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(Names, name) {
			t.Errorf("%s set but not in Names, so a plugin's configuration could override it", name)
		}
	}
}

func TestVarsPass(t *testing.T) {
	v := Vars("127.0.0.1:8899", "/p/ca.pem", "alh_pass")
	for _, want := range []string{"HTTPS_PROXY=http://airlock:alh_pass@127.0.0.1:8899", "https_proxy=http://airlock:alh_pass@127.0.0.1:8899",
		"HTTP_PROXY=http://127.0.0.1:8899", "http_proxy=http://127.0.0.1:8899"} {
		if !slices.Contains(v, want) {
			t.Errorf("%s missing: %v", want, v)
		}
	}
}

func TestInstallCA(t *testing.T) {
	if p, err := InstallCA("", t.TempDir()); p != "" || err != nil {
		t.Fatalf("no CA: %q %v", p, err)
	}
	src := filepath.Join(t.TempDir(), "ca.pem")
	body := []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
	if err := os.WriteFile(src, body, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := InstallCA(src, dir)
	if err != nil || p != filepath.Join(dir, CAName) {
		t.Fatalf("%q %v", p, err)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != string(body) {
		t.Fatalf("copy %q %v", got, err)
	}
	if _, err := InstallCA(filepath.Join(t.TempDir(), "missing.pem"), dir); err == nil {
		t.Fatal("a missing CA file was not an error")
	}
}

func TestPass(t *testing.T) {
	ctx := context.Background()
	bc := broker.Config{Intents: map[string]broker.Intent{
		"bound":   {Class: broker.ClassRead, Destinations: []broker.Destination{{Host: "api.example.com"}}},
		"nowhere": {Class: broker.ClassRead},
	}}.WithDefaults()
	b := broker.New(bc, broker.NewMemoryStore(100, time.Minute, time.Hour, nil), nil, broker.Options{})
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	pass, inv, err := Pass(ctx, b, "p", nil, []string{"bound"}, log)
	if err != nil || !broker.LooksLikeHandle(pass.Handle) || pass.ExpiresAt.IsZero() || inv == "" {
		t.Fatalf("%+v %v", pass, err)
	}
	for _, intents := range [][]string{{"nowhere"}, {"bound", "unknown"}} {
		logs.Reset()
		if pass, _, err := Pass(ctx, b, "p", nil, intents, log); pass.Handle != "" || err != nil || !strings.Contains(logs.String(), "without a proxy pass") {
			t.Fatalf("%v: %q %v, log %q", intents, pass, err, logs.String())
		}
	}
}

// A Keeper keeps a pass alive past its first expiry for as long as the
// plugin runs and reports nothing lost; when the plugin exits it stops
// (the pass then dies at its TTL); a revoked pass, or one at
// max_pass_lifetime once it expires, is reported lost (ErrPassLost).
// The test runs on synctest's clock: its pass TTLs pass without a wait,
// and the keeper's timers fire in order before any assertion.
func TestKeepPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		bc := broker.Config{PassTTL: 2 * time.Second, Intents: map[string]broker.Intent{
			"bound": {Class: broker.ClassRead, Destinations: []broker.Destination{{Host: "api.example.com"}}},
		}}.WithDefaults()
		store := broker.NewMemoryStore(100, time.Minute, time.Hour, nil)
		b := broker.New(bc, store, nil, broker.Options{})
		bc.MaxPassLifetime = 3 * time.Second
		capped := broker.New(bc, store, nil, broker.Options{})
		logs := &testenv.SyncBuffer{}
		log := slog.New(slog.NewTextHandler(logs, nil))
		type kept struct {
			pass broker.Issued
			k    *Keeper
			done chan struct{}
		}
		keep := func(b *broker.Broker, plugin string) kept {
			t.Helper()
			pass, _, err := Pass(ctx, b, plugin, nil, []string{"bound"}, log)
			if err != nil {
				t.Fatal(err)
			}
			kp := kept{pass: pass, k: &Keeper{}, done: make(chan struct{})}
			kp.k.Keep(kp.done, b, plugin, pass, log)
			return kp
		}
		lost := func(kp kept, why string) error {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); kp.k.Err() == nil; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no loss reported after %s", why)
				}
			}
			return kp.k.Err()
		}

		if err := keepPass(nil, nil, nil, "none", broker.Issued{}, log); err != nil { // no pass: returns at once
			t.Fatal(err)
		}
		kp := keep(b, "p")
		time.Sleep(time.Until(kp.pass.ExpiresAt) + time.Second)
		if g, err := b.Resolve(ctx, kp.pass.Handle); err != nil || !g.ExpiresAt.After(kp.pass.ExpiresAt) || kp.k.Err() != nil {
			t.Fatalf("past its first expiry, the kept pass: %+v %v, lost: %v", g, err, kp.k.Err())
		}
		close(kp.done)
		synctest.Wait() // the keeper has stopped
		g, _ := b.Resolve(ctx, kp.pass.Handle)
		time.Sleep(time.Until(g.ExpiresAt) + time.Second)
		if _, err := b.Resolve(ctx, kp.pass.Handle); !errors.Is(err, broker.ErrHandleExpired) || kp.k.Err() != nil {
			t.Fatalf("a pass no longer kept: %v, lost: %v", err, kp.k.Err())
		}

		kp = keep(b, "q")
		defer close(kp.done)
		if _, err := b.RevokePlugin(ctx, "q"); err != nil {
			t.Fatal(err)
		}
		if err := lost(kp, "the pass was revoked"); !errors.Is(err, ErrPassLost) || !errors.Is(err, broker.ErrHandleRevoked) {
			t.Fatalf("revoked: %v", err)
		}
		if !strings.Contains(logs.String(), "can no longer be renewed") {
			t.Fatalf("no log line says why the pass is gone: %s", logs.String())
		}

		kp = keep(capped, "r")
		defer close(kp.done)
		err := lost(kp, "max_pass_lifetime")
		if g, rerr := capped.Resolve(ctx, kp.pass.Handle); !errors.Is(err, ErrPassLost) || !errors.Is(rerr, broker.ErrHandleExpired) {
			t.Fatalf("at max_pass_lifetime: lost %v, the pass %+v %v", err, g, rerr)
		}
		if strings.Contains(logs.String(), kp.pass.Handle) {
			t.Fatal("a log line holds the pass")
		}
	})
}

// A health probe's Verify notices a revoked pass at once, although its
// next scheduled renewal is many minutes away (`handle revoke --plugin`
// in an incident); a kept pass verifies, and so does one while the
// broker cannot tell (nothing is known lost).
func TestKeepPassVerify(t *testing.T) {
	ctx := context.Background()
	bc := broker.Config{PassTTL: time.Hour, Intents: map[string]broker.Intent{
		"bound": {Class: broker.ClassRead, Destinations: []broker.Destination{{Host: "api.example.com"}}},
	}}.WithDefaults()
	b := broker.New(bc, broker.NewMemoryStore(100, time.Minute, time.Hour, nil), nil, broker.Options{})
	log := slog.New(slog.DiscardHandler)
	pass, _, err := Pass(ctx, b, "p", nil, []string{"bound"}, log)
	if err != nil {
		t.Fatal(err)
	}
	k, done := &Keeper{}, make(chan struct{})
	defer close(done)
	k.Keep(done, b, "p", pass, log)
	if err := k.Verify(ctx); err != nil {
		t.Fatalf("a kept pass: %v", err)
	}
	if _, err := b.RevokePlugin(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := k.Verify(ctx); !errors.Is(err, ErrPassLost) || !errors.Is(err, broker.ErrHandleRevoked) {
		t.Fatalf("the probe after the pass was revoked: %v; want ErrPassLost", err)
	}
	if err := (&Keeper{}).Verify(ctx); err != nil {
		t.Fatal("a plugin without a pass fails its probe")
	}
}
