package daemon

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// airlock serve with a leased intent runs the lease manager: its metrics
// are exported and /readyz has its check (ready while no revocation is
// failing).
func TestServeWiresLeases(t *testing.T) {
	v := testenv.Vault(t)
	t.Setenv("VAULT_TOKEN", v.RootToken)
	cfg := testConfig(t)
	cfg.Vault.Address = v.Addr
	cfg.Broker.Intents = map[string]broker.Intent{"mq": {Class: broker.ClassWrite,
		Secret: broker.SecretRef{Source: broker.SourceVaultLease, Mount: "rabbitmq", Path: "creds/plugin", Field: "password"},
		Inject: broker.Inject{Kind: &broker.BasicInject{UsernameField: "username"}}}}
	cfg.Broker = cfg.Broker.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addr := serveForTest(t, cfg).Admin
	waitReadyz(t, addr, http.StatusOK, "", "serve with a leased intent")
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, m := range []string{"airlock_broker_leases_outstanding 0", "airlock_broker_lease_revocations_failing 0"} {
		if !strings.Contains(string(b), m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
}
