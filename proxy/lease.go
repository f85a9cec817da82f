package proxy

import (
	"errors"

	"github.com/airlock-dev/airlock/broker"
)

// secretDenial answers a secret the broker could not give: 503 either
// way, with nothing sent upstream; a leased secret that could not be
// obtained (Vault down at the invocation's first use) or whose
// invocation has ended has its own code, so an operator can tell a
// lease's first use from a static secret's read.
func secretDenial(err error) *denial {
	if errors.Is(err, broker.ErrLeaseUnavailable) || errors.Is(err, broker.ErrLeaseEnded) {
		return deny(CodeLeaseUnavailable, "the invocation's leased credential could not be obtained; no request was sent").withReason(err.Error())
	}
	return deny(CodeSecretUnavailable, "the credential's secret is unavailable; no request was sent").withReason(err.Error())
}
