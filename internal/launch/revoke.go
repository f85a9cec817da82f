package launch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// revokeTimeout bounds a revocation: the one after an exit holds up
// Exited (and so the supervisor's restart) until the broker answers.
const revokeTimeout = 5 * time.Second

// credentials is the one owner of a plugin process's revocation. The
// plugin ends — a crash, an exit with status 0, a kill, a runtime's
// Shutdown, the host's shutdown — and its exit revokes every handle the
// plugin holds and its pass (ended), before anyone waiting on Exited
// learns of the exit. A Shutdown revokes them first (Runner.Revoke), so
// the plugin is told to stop only once they are dead. Handles of one
// invocation die when the invocation ends: that is the invoke path's.
type credentials struct {
	broker  broker.API // nil: no broker, nothing to revoke
	plugin  string
	passInv string // the pass's invocation ("" no pass)
	log     *slog.Logger
}

// revoke revokes the plugin's handles and its pass, waiting at most
// revokeTimeout for the broker.
func (c *credentials) revoke(ctx context.Context) error {
	if c.broker == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, revokeTimeout)
	defer cancel()
	_, err := c.broker.RevokePlugin(ctx, c.plugin)
	if c.passInv != "" {
		// By its own invocation too: RevokePlugin counts the pass among
		// the plugin's handles, and this keeps its end independent of
		// that.
		if _, e := c.broker.RevokeInvocation(ctx, c.passInv); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}

// ended revokes after the exit.
func (c *credentials) ended() {
	if err := c.revoke(context.Background()); err != nil {
		c.log.Error("revoking the exited plugin's handles and pass failed: they die when they expire", "err", err)
	}
}

// revokePass revokes the pass after a failed start, so that it dies
// with the process rather than at pass_ttl; the plugin never ran, so no
// other handle of it is touched.
func (c *credentials) revokePass() {
	if c.broker == nil || c.passInv == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	if _, err := c.broker.RevokeInvocation(ctx, c.passInv); err != nil {
		c.log.Warn("revoking the plugin's proxy pass failed: it dies at broker.pass_ttl", "err", err)
	}
}
