package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// The plugin that `airlock host install` launches to check its handshake
// logs its stderr as a running host's plugins do: at host.stderr_level,
// through host.redact. (Install built its own host options and dropped
// both.)
func TestInstallLaunchKeepsRedactAndStderrLevel(t *testing.T) {
	cfg := testConfig(t)
	cfg.Host.Redact = []string{`canary-[0-9a-f]{8}`}
	cfg.Host.StderrLevel = "warn"
	pkg := t.TempDir()
	mf, err := os.ReadFile("../../examples/tickets-provider/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "manifest.yaml"), mf, 0o600); err != nil {
		t.Fatal(err)
	}
	// A provider that says something secret-shaped on stderr and exits
	// before its handshake.
	script := "#!/bin/sh\necho 'install-probe canary-5e9d1c2a' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(pkg, "provider"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, _, err := Install(context.Background(), cfg, pkg, Options{Log: log}); err == nil {
		t.Fatal("a provider that exits before its handshake was installed")
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "install-probe") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("the provider's stderr was not logged:\n%s", logs.String())
	}
	if strings.Contains(line, "canary-5e9d1c2a") {
		t.Errorf("host.redact not applied: %s", line)
	}
	if !strings.Contains(line, `"level":"WARN"`) {
		t.Errorf("host.stderr_level not applied: %s", line)
	}
}

// Dev works on a copy of its config: after a run, the caller's config —
// its intents, Executa plugins, control address, lockfile, intercept CA —
// is exactly as it was (Dev used to write the demo's into it).
func TestDevLeavesCallersConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.Broker.Intents = map[string]broker.Intent{"user.api": {Class: broker.ClassRead,
		Secret: broker.SecretRef{Source: broker.SourceVault, Mount: "secret", Path: "user/api", Field: "key", KVVersion: 2},
		Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}}}
	ctlDir := t.TempDir()
	if err := os.Chmod(ctlDir, 0o700); err != nil {
		t.Fatal(err)
	}
	before, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Dev(ctx, cfg, DevOptions{Options: Options{OnReady: func(r Ready) { ready <- r }},
			Provider: filepath.Join(t.TempDir(), "no-such-provider"), Executa: executaBin,
			Control: "unix:" + filepath.Join(ctlDir, "control.sock"), Invoke: "airlock"})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Dev: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("Dev not ready")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Dev: %v", err)
	}
	after, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("Dev changed its caller's config:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// airlock dev puts a demo secret, keys and evidence in its state
// directory: one another user may write to (a careless 0777, or one they
// made first) is refused before anything is made there.
func TestDevRefusesAStateDirectoryOthersMayWrite(t *testing.T) {
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	if err := os.Chmod(cfg.StateDir, 0o777); err != nil {
		t.Fatal(err)
	}
	err := Dev(context.Background(), cfg, DevOptions{Provider: filepath.Join(t.TempDir(), "no-such-provider"), Executa: executaBin})
	if !errors.Is(err, fsutil.ErrPlanted) {
		t.Fatalf("Dev in a state directory anyone may write to: %v", err)
	}
	if ents, _ := os.ReadDir(cfg.StateDir); len(ents) != 0 {
		t.Fatalf("Dev made %s in it", ents[0].Name())
	}
}
