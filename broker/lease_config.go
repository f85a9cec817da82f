package broker

import (
	"fmt"
	"time"
)

// Defaults for LeasesConfig.
const (
	defaultLeaseRenewBefore     = 30 * time.Second
	defaultLeaseRevokeAttempts  = 5
	defaultLeaseRevokeBackoff   = time.Second
	defaultLeaseRevokeTimeout   = 5 * time.Second
	defaultLeaseCheckInterval   = 500 * time.Millisecond
	defaultLeaseFailingWarnings = 1
)

// LeasesConfig tunes the leased secrets (source vault_lease): the
// `broker.leases:` section.
type LeasesConfig struct {
	// SealKeyFile holds the key (32 bytes, hex) that seals each lease's id
	// and credentials in the handle store, so a dump of a shared Redis
	// yields neither. Required with the redis store when an intent is
	// leased (every replica needs the same key); with the memory store a
	// random key is made at start when it is unset.
	SealKeyFile string `yaml:"seal_key_file"`
	// RenewBefore renews a lease this long before it expires, when the
	// invocation is to outlive it.
	RenewBefore time.Duration `yaml:"renew_before"`
	// RevokeAttempts bounds the tries of one revocation (then retried
	// every RevokeBackoff × 2^attempts, at most a minute, until the lease
	// expires at Vault); RevokeBackoff is the wait after the first failure,
	// doubling; RevokeTimeout bounds one try.
	RevokeAttempts int           `yaml:"revoke_attempts"`
	RevokeBackoff  time.Duration `yaml:"revoke_backoff"`
	RevokeTimeout  time.Duration `yaml:"revoke_timeout"`
	// CheckInterval is how often a replica renews its leases and revokes
	// those whose invocation deadline passed without a revocation from the
	// host (a host that died).
	CheckInterval time.Duration `yaml:"check_interval"`
	// FailingWarning: /readyz reports "leases" not ready while this many
	// revocations or more have run out of attempts and the leases are
	// still alive at Vault.
	FailingWarning int `yaml:"failing_warning"`
}

// WithDefaults fills zero fields.
func (c LeasesConfig) WithDefaults() LeasesConfig {
	if c.RenewBefore == 0 {
		c.RenewBefore = defaultLeaseRenewBefore
	}
	if c.RevokeAttempts == 0 {
		c.RevokeAttempts = defaultLeaseRevokeAttempts
	}
	if c.RevokeBackoff == 0 {
		c.RevokeBackoff = defaultLeaseRevokeBackoff
	}
	if c.RevokeTimeout == 0 {
		c.RevokeTimeout = defaultLeaseRevokeTimeout
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = defaultLeaseCheckInterval
	}
	if c.FailingWarning == 0 {
		c.FailingWarning = defaultLeaseFailingWarnings
	}
	return c
}

func (c LeasesConfig) validate(storeType string, leased []string) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.RenewBefore < 0 || c.RevokeAttempts < 0 || c.RevokeBackoff < 0 || c.RevokeTimeout < 0 || c.CheckInterval < 0 || c.FailingWarning < 0 {
		add("broker.leases: durations and counts must not be negative")
	}
	if len(leased) > 0 && storeType == StoreRedis && c.SealKeyFile == "" {
		add("broker.leases.seal_key_file: required with the redis store when an intent is vault_lease (intent %q)", leased[0])
	}
	return errs
}

// LeasedIntents returns the names of the intents bound to a leased secret
// (source vault_lease), sorted.
func (c Config) LeasedIntents() []string {
	var out []string
	for _, name := range c.IntentNames() {
		if c.Intents[name].Secret.Source == SourceVaultLease {
			out = append(out, name)
		}
	}
	return out
}
