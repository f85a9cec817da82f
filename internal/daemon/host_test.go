package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/config"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// startServeForHost runs Serve until the test ends, for a Host to use.
func startServeForHost(t *testing.T, cfg *config.Config) {
	t.Helper()
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{OnReady: func(r Ready) { ready <- r }}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
}

// runHost runs Host until the returned stop is called; it returns once
// the host is ready, or with the error Host returned.
func runHost(t *testing.T, cfg *config.Config) (stop func() error, err error) {
	t.Helper()
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Host(ctx, cfg, Options{OnReady: func(r Ready) { ready <- r }}) }()
	select {
	case <-ready:
		return func() error { cancel(); return <-done }, nil
	case err := <-done:
		cancel()
		return nil, err
	}
}

// installProvider installs the sample provider into cfg's state
// directory (no host running: the install is local).
func installProvider(t *testing.T, cfg *config.Config) {
	t.Helper()
	pkg := t.TempDir()
	mf, err := os.ReadFile("../../examples/tickets-provider/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "manifest.yaml"), mf, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(providerBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "provider"), b, 0o700); err != nil {
		t.Fatal(err)
	}
	installProviderPkg(t, cfg, pkg)
}

// installProviderPkg installs the package pkg into cfg's state directory
// (no host running: the install is local).
func installProviderPkg(t *testing.T, cfg *config.Config, pkg string) {
	t.Helper()
	if _, remote, err := Install(context.Background(), cfg, pkg, Options{}); err != nil || remote {
		t.Fatalf("install: remote %v, %v", remote, err)
	}
}

// A second host on the same state directory, even with an evidence log
// of its own, refuses to start (it would launch every installed plugin a
// second time); once the first has stopped, it starts.
func TestOneHostPerStateDir(t *testing.T) {
	cfg := testConfig(t)
	startServeForHost(t, cfg)
	installProvider(t, cfg)

	stopFirst, err := runHost(t, cfg)
	if err != nil {
		t.Fatalf("first host: %v", err)
	}
	second := *cfg
	second.Host.Evidence = filepath.Join(t.TempDir(), "second-evidence.jsonl")
	second.Host.Control, second.Host.Admin = testenv.FreeAddr(t), testenv.FreeAddr(t)
	stopSecond, err := runHost(t, &second)
	if err == nil {
		_ = stopSecond()
		t.Fatal("a second host started on the same state directory")
	}
	if !errors.Is(err, host.ErrStateDirInUse) || !strings.Contains(err.Error(), cfg.StateDir) ||
		!strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second host: %v, want ErrStateDirInUse naming the directory and the holder", err)
	}
	if _, err := os.Stat(second.Host.Evidence); !os.IsNotExist(err) {
		t.Fatalf("the refused host opened its evidence log: %v", err)
	}
	if err := stopFirst(); err != nil {
		t.Fatalf("first host: %v", err)
	}

	stopSecond, err = runHost(t, &second)
	if err != nil {
		t.Fatalf("second host after the first stopped: %v", err)
	}
	if err := stopSecond(); err != nil {
		t.Fatalf("second host: %v", err)
	}
}
