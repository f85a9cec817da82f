package daemon

import (
	"fmt"
	"log/slog"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/lease"
	"github.com/airlock-dev/airlock/internal/vault"
)

// newLeases is the lease manager of the leased intents (source
// vault_lease), nil when the config has none.
func newLeases(bc broker.Config, vc *vault.Client, store broker.Store, reg prometheus.Registerer, log *slog.Logger) (*lease.Manager, error) {
	leased := false
	for _, in := range bc.Intents {
		leased = leased || in.Secret.Source == broker.SourceVaultLease
	}
	if !leased {
		return nil, nil
	}
	ls, ok := store.(broker.LeaseStore)
	if !ok {
		return nil, fmt.Errorf("broker.store.type %q: the store cannot hold leases", bc.Store.Type)
	}
	var api *vaultapi.Client
	var onAuth func()
	if vc != nil {
		api, onAuth = vc.API, vc.Reauth
	}
	return lease.New(bc, api, ls, lease.Options{Logger: log, Registerer: reg, OnAuthError: onAuth})
}
