package tokens

import (
	"errors"
	"fmt"
	"time"
)

// Key sources.
const (
	SourceMemory = "memory"
	SourceFile   = "file"
	SourceVault  = "vault"
)

// Defaults for Config.
const (
	DefaultRefresh    = 30 * time.Second
	DefaultVaultMount = "secret"
	// MaxTTL bounds token lifetime; the spec's tokens live 600 s.
	MaxTTL = time.Hour
	// MaxGrace bounds how long a token may outlive its invocation.
	MaxGrace = 5 * time.Minute
)

// Config is the token issuer's configuration (the `tokens:` section).
type Config struct {
	Issuer    string        `yaml:"issuer"`
	Algorithm string        `yaml:"algorithm"`
	TTL       time.Duration `yaml:"ttl"`
	Grace     time.Duration `yaml:"grace"`
	Leeway    time.Duration `yaml:"leeway"`
	// RotateEvery rotates the signing key when it is this old; 0 = only
	// by `airlock token rotate`.
	RotateEvery time.Duration `yaml:"rotate_every"`
	// Refresh is how often the key source is reloaded (to see other
	// replicas' rotations) and rotation is checked.
	Refresh time.Duration `yaml:"refresh"`
	Keys    KeysConfig    `yaml:"keys"`
}

// KeysConfig says where signing keys live.
type KeysConfig struct {
	Source string `yaml:"source"` // memory | file | vault
	Path   string `yaml:"path"`   // file path, or secret path in the Vault mount
	Mount  string `yaml:"mount"`  // Vault KV v2 mount (vault only)
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.Issuer == "" {
		c.Issuer = DefaultIssuer
	}
	if c.Algorithm == "" {
		c.Algorithm = EdDSA
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Leeway == 0 {
		c.Leeway = DefaultLeeway
	}
	if c.Refresh == 0 {
		c.Refresh = DefaultRefresh
	}
	if c.Keys.Source == "" {
		c.Keys.Source = SourceMemory
	}
	if c.Keys.Source == SourceVault && c.Keys.Mount == "" {
		c.Keys.Mount = DefaultVaultMount
	}
	return c
}

// Retention is how long a retired key must keep verifying: the longest
// token lifetime plus the verification leeway.
func (c Config) Retention() time.Duration { return c.TTL + c.Leeway }

// Validate returns every problem at once. Call it on WithDefaults().
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Algorithm != EdDSA && c.Algorithm != ES256 {
		add("tokens.algorithm: must be EdDSA or ES256")
	}
	if c.TTL <= 0 || c.TTL > MaxTTL {
		add("tokens.ttl: must be between 1s and %s", MaxTTL)
	}
	if c.Grace < 0 || c.Grace > MaxGrace {
		add("tokens.grace: must be between 0 and %s", MaxGrace)
	}
	if c.Leeway < 0 || c.Leeway > MaxLeeway {
		add("tokens.leeway: must be between 0 and %s", MaxLeeway)
	}
	if c.RotateEvery < 0 {
		add("tokens.rotate_every: must not be negative")
	} else if c.RotateEvery > 0 && c.RotateEvery < c.Retention() {
		// Rotating faster than retention would pile up keys in the ring.
		add("tokens.rotate_every: must be at least ttl + leeway (%s)", c.Retention())
	}
	if c.Refresh < time.Second {
		add("tokens.refresh: must be at least 1s")
	}
	switch c.Keys.Source {
	case SourceMemory:
		if c.Keys.Path != "" {
			add("tokens.keys.path: not used with source memory")
		}
	case SourceFile, SourceVault:
		if c.Keys.Path == "" {
			add("tokens.keys.path: required with source %s", c.Keys.Source)
		}
	default:
		add("tokens.keys.source: must be one of: memory, file, vault")
	}
	if c.Keys.Source != SourceVault && c.Keys.Mount != "" {
		add("tokens.keys.mount: only used with source vault")
	}
	return errors.Join(errs...)
}
