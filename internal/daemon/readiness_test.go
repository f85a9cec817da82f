package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// /readyz follows real Redis and a real Vault: the first /readyz after
// Redis stops says handle_store (the old code reused a ready answer for
// 2 s, so a short outage never showed), and a stalled Vault (SIGSTOP,
// which answers nothing) is reported as vault within the check timeout.
func TestServeReadinessReportsOutages(t *testing.T) {
	v := testenv.NewVault(t)
	rd := testenv.Redis(t)
	t.Setenv("VAULT_TOKEN", v.RootToken)
	cfg := testConfig(t)
	cfg.Vault.Address = v.Addr
	cfg.Broker.Store.Type = broker.StoreRedis
	cfg.Broker.Store.Redis.Address = rd.Addr
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addr := serveForTest(t, cfg).Admin
	waitFor := func(code int, failed, what string) { t.Helper(); waitReadyz(t, addr, code, failed, what) }
	waitFor(http.StatusOK, "", "Vault and Redis up")

	rd.Stop()
	if got, body := readyz(t, addr); got != http.StatusServiceUnavailable || !strings.Contains(body, `"handle_store"`) {
		t.Fatalf("the first /readyz after Redis stopped: %d %s", got, body)
	}
	if err := rd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(http.StatusOK, "", "Redis back")

	v.Pause()
	waitFor(http.StatusServiceUnavailable, "vault", "Vault stalled")
	v.Resume()
	waitFor(http.StatusOK, "", "Vault resumed")
}

// serveForTest runs Serve with cfg until the test ends.
func serveForTest(t *testing.T, cfg *config.Config) Ready {
	t.Helper()
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{OnReady: func(r Ready) { ready <- r }}) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case r := <-ready:
		return r
	case err := <-done:
		t.Fatalf("Serve: %v", err)
		return Ready{}
	}
}

// readyz asks the admin listener at addr whether it is ready.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := client.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReadyz waits until /readyz answers code (naming the check failed,
// when set).
func waitReadyz(t *testing.T, addr string, code int, failed, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, body := readyz(t, addr)
		if got == code && (failed == "" || strings.Contains(body, `"`+failed+`"`)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /readyz %d %s", what, got, body)
		}
	}
}
