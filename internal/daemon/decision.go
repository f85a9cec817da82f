package daemon

import (
	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/internal/config"
)

// wireDecision gives the control API the decision point's parts: who may
// act for whom (the policy in force), who is an operator, and the
// ledger's grants and approvals, whose revocations end this host's
// calls under the grant at once.
func wireDecision(ctl *control.Handler, h *host.Host, cfg *config.Config, l broker.Ledger) {
	ctl.SetActorCheck(h.MayActFor)
	ctl.SetOperator(cfg.Host.Operator)
	if l != nil {
		ctl.EnableLedger(l, cfg.Host.Operator)
		ctl.SetGrantRevoked(func(id string) { h.GrantRevoked(id) })
	}
}
