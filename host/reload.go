package host

import "github.com/airlock-dev/airlock/host/policy"

// SetPolicy replaces the policy that decides every call from now on (a
// config reload); calls already past their decision are not affected.
// nil denies every call (ErrNoPolicy), as at New.
func (h *Host) SetPolicy(p *policy.Policy) { h.policy.Store(p) }

// invokeOptions are the options a call runs with: the host's, under the
// policy in force when the call starts.
func (h *Host) invokeOptions() Options {
	o := h.opts
	o.Policy = h.policy.Load()
	return o
}
