package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
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
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{OnReady: func(r Ready) { ready <- r }}) }()
	defer func() { cancel(); <-done }()
	r := <-ready
	readyz := func() (int, string) {
		t.Helper()
		resp, err := client.Get("http://" + r.Admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(code int, failed, what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			got, body := readyz()
			if got == code && (failed == "" || strings.Contains(body, `"`+failed+`"`)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz %d %s", what, got, body)
			}
		}
	}
	waitFor(http.StatusOK, "", "Vault and Redis up")

	rd.Stop()
	if got, body := readyz(); got != http.StatusServiceUnavailable || !strings.Contains(body, `"handle_store"`) {
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
