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
	pass, err := Pass(ctx, b, "p", nil, []string{"bound"}, log)
	if err != nil || !broker.LooksLikeHandle(pass.Handle) || pass.ExpiresAt.IsZero() {
		t.Fatalf("%+v %v", pass, err)
	}
	for _, intents := range [][]string{{"nowhere"}, {"bound", "unknown"}} {
		logs.Reset()
		if pass, err := Pass(ctx, b, "p", nil, intents, log); pass.Handle != "" || err != nil || !strings.Contains(logs.String(), "without a proxy pass") {
			t.Fatalf("%v: %q %v, log %q", intents, pass, err, logs.String())
		}
	}
}

// KeepPass keeps a pass alive past its first expiry for as long as the
// plugin runs, stops when the pass is revoked, and stops when the plugin
// exits (the pass then dies at its TTL).
func TestKeepPass(t *testing.T) {
	ctx := context.Background()
	bc := broker.Config{PassTTL: 2 * time.Second, Intents: map[string]broker.Intent{
		"bound": {Class: broker.ClassRead, Destinations: []broker.Destination{{Host: "api.example.com"}}},
	}}.WithDefaults()
	b := broker.New(bc, broker.NewMemoryStore(100, time.Minute, time.Hour, nil), nil, broker.Options{})
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	keep := func(plugin string) (broker.Issued, chan struct{}, chan struct{}) {
		t.Helper()
		pass, err := Pass(ctx, b, plugin, nil, []string{"bound"}, log)
		if err != nil {
			t.Fatal(err)
		}
		done, stopped := make(chan struct{}), make(chan struct{})
		go func() { KeepPass(done, b, plugin, pass, log); close(stopped) }()
		return pass, done, stopped
	}
	waitStopped := func(stopped chan struct{}, why string) {
		t.Helper()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatalf("KeepPass still runs after %s", why)
		}
	}

	pass, done, stopped := keep("p")
	time.Sleep(time.Until(pass.ExpiresAt) + time.Second)
	if g, err := b.Resolve(ctx, pass.Handle); err != nil || !g.ExpiresAt.After(pass.ExpiresAt) {
		t.Fatalf("past its first expiry, the kept pass: %+v %v", g, err)
	}
	close(done)
	waitStopped(stopped, "the plugin exited")
	g, _ := b.Resolve(ctx, pass.Handle)
	time.Sleep(time.Until(g.ExpiresAt) + 100*time.Millisecond)
	if _, err := b.Resolve(ctx, pass.Handle); !errors.Is(err, broker.ErrHandleExpired) {
		t.Fatalf("a pass no longer kept is still live: %v", err)
	}

	_, done, stopped = keep("q")
	defer close(done)
	if _, err := b.RevokePlugin(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	waitStopped(stopped, "the pass was revoked")
	if !strings.Contains(logs.String(), "can no longer be renewed") {
		t.Fatalf("no log line says why the pass is gone: %s", logs.String())
	}
	if strings.Contains(logs.String(), pass.Handle) {
		t.Fatal("a log line holds the pass")
	}
}
