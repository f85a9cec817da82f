package lease_test

import (
	"context"
	"log"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/lease"
)

// A broker whose intents read Vault dynamic secrets (source vault_lease)
// gets a lease manager: it obtains a lease for an invocation's handle,
// ends it with the invocation, and retries the ends Vault could not
// confirm while Run runs. cfg holds such an intent; the memory and Redis
// stores both hold leases.
func Example() {
	var cfg broker.Config // loaded from the config file, with an intent of source vault_lease
	cfg = cfg.WithDefaults()
	vc, err := vaultapi.NewClient(vaultapi.DefaultConfig()) // VAULT_ADDR, VAULT_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	store := broker.NewMemoryStore(cfg.Store.MaxHandles, cfg.ExpiredRetention, cfg.MaxHandleLifetime, nil)
	m, err := lease.New(cfg, vc, store, lease.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx) // owed ends retried, expiring leases swept
	b := broker.New(cfg, store, nil, broker.Options{Leases: m})
	_ = b // issue, resolve and end invocations as in broker's Example
}
