package broker

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/hostport"
)

// Defaults for Config.
const (
	defaultMaxHandleLifetime       = time.Hour
	defaultMaxHandlesPerInvocation = 64 // the host allows 16; this is the broker's backstop
	defaultMaxHandles              = 1_000_000
	defaultSecretTTL               = 30 * time.Second
	defaultExpiredRetention        = 5 * time.Minute
	defaultRedisKeyPrefix          = "airlock:"
)

// Store types.
const (
	StoreMemory = "memory"
	StoreRedis  = "redis"
)

// Secret source names used in intent bindings.
const (
	SourceVault = "vault"
	SourceFile  = "file"
	// SourceVaultLease is a Vault path whose answer carries a lease (a
	// dynamic secret): obtained at the first use within an invocation and
	// revoked when it ends (see lease.go).
	SourceVaultLease = "vault_lease"
)

// SecretPlaceholder is where a header template puts the secret.
const SecretPlaceholder = "{{secret}}"

// Config is the broker's configuration (the `broker:` section).
type Config struct {
	// EgressProxy is the proxy address handed to plugins with each handle
	// (host:port, as they put it in HTTP_PROXY).
	EgressProxy string `yaml:"egress_proxy"`
	// MaxHandleLifetime caps expires_at below the invocation deadline.
	MaxHandleLifetime time.Duration `yaml:"max_handle_lifetime"`
	// PassTTL is how long a plugin pass lives after it is issued or
	// renewed (default 1h); the host renews it while the plugin runs and
	// revokes it when the plugin exits.
	PassTTL time.Duration `yaml:"pass_ttl"`
	// MaxPassLifetime caps a pass's lifetime, renewals included; zero
	// (the default): renewed for as long as the plugin runs.
	MaxPassLifetime time.Duration `yaml:"max_pass_lifetime"`
	// MaxHandlesPerInvocation is a safety cap behind the host's limit.
	MaxHandlesPerInvocation int `yaml:"max_handles_per_invocation"`
	// ExpiredRetention keeps an expired grant in the store this long so
	// the audit log can say "expired" rather than "unknown".
	ExpiredRetention time.Duration `yaml:"expired_retention"`

	API     APIConfig     `yaml:"api"`
	Leases  LeasesConfig  `yaml:"leases"`
	Store   StoreConfig   `yaml:"store"`
	Secrets SecretsConfig `yaml:"secrets"`
	// Intents are the security team's bindings: which secret backs which
	// credential intent, and how the proxy injects it.
	Intents map[string]Intent `yaml:"intents"`
}

// StoreConfig selects where grants live.
type StoreConfig struct {
	Type  string      `yaml:"type"` // memory | redis
	Redis RedisConfig `yaml:"redis"`
	// MaxHandles bounds the memory store.
	MaxHandles int `yaml:"max_handles"`
}

// RedisConfig reaches the Redis server shared by replicas.
type RedisConfig struct {
	// Address is one primary (host:port); or Sentinel names the Sentinels
	// that know the primary, and the client follows failovers.
	Address      string          `yaml:"address"`
	Sentinel     *SentinelConfig `yaml:"sentinel"`
	Username     string          `yaml:"username"`
	PasswordFile string          `yaml:"password_file"`
	DB           int             `yaml:"db"`
	TLS          bool            `yaml:"tls"`
	CAFile       string          `yaml:"ca_file"`
	KeyPrefix    string          `yaml:"key_prefix"`
	// LocalCache is how many grants each replica keeps in memory so a
	// resolve needs no round trip (default 100,000; -1 turns it off).
	// Revocations reach every replica's cache over Redis pub/sub; while
	// that feed is down the cache is bypassed.
	LocalCache int `yaml:"local_cache"`
	// RevocationReplicas is how many replicas must hold a revocation
	// before it is acknowledged (Redis WAIT); -1 never waits. Default 1:
	// with Sentinel required, without it capped at the replicas the
	// primary has connected. A revocation not confirmed is written again
	// for up to defaultRevocationAck, then owed (ErrRevocationOwed), so a
	// failover cannot silently undo it.
	RevocationReplicas int `yaml:"revocation_replicas"`
	// RevocationWait bounds one WAIT (default 1s).
	RevocationWait time.Duration `yaml:"revocation_wait"`
}

// defaultRevocationWait bounds how long a revocation waits for a replica.
const defaultRevocationWait = time.Second

// defaultLocalCache is the default size of a replica's grant cache.
const defaultLocalCache = 100000

// SentinelConfig locates the primary through Redis Sentinel.
type SentinelConfig struct {
	MasterName string   `yaml:"master_name"`
	Addresses  []string `yaml:"addresses"` // host:port of each Sentinel
	// Username and PasswordFile authenticate to the Sentinels (the data
	// nodes use the store's own username and password_file).
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
}

// SecretsConfig configures secret sources and the cache in front of them.
type SecretsConfig struct {
	// CacheTTL is how long a read secret is served from memory.
	CacheTTL time.Duration `yaml:"cache_ttl"`
	// StaleIfError serves an expired cache entry this long past its TTL
	// when the source fails; 0 fails closed at once.
	StaleIfError time.Duration `yaml:"stale_if_error"`
	// File is the dev secret file (YAML or JSON: path -> field -> value).
	File string `yaml:"file"`
}

// Intent binds a credential intent to a secret and an injection.
type Intent struct {
	Class  Class     `yaml:"class"`
	Secret SecretRef `yaml:"secret"`
	Inject Inject    `yaml:"inject"`
	// Destinations, when set, further restrict the manifest's: a request
	// must match both. Each may name its own region.
	Destinations []Destination `yaml:"destinations"`
	// Region is where the intent's API and secret live ("eu-west-1",
	// "eu"): a residency that does not list it gets no handle for the
	// intent, and no request to a destination of another region.
	Region string `yaml:"region"`
}

// SecretRef names one secret in a source.
type SecretRef struct {
	Source    string `yaml:"source"`     // vault | file
	Mount     string `yaml:"mount"`      // Vault mount (vault only)
	Path      string `yaml:"path"`       // path within the mount, or the file's key
	Field     string `yaml:"field"`      // the field holding the secret
	KVVersion int    `yaml:"kv_version"` // 2 (default) or 1 (vault only)
	// Data is the request body of a vault_lease path (for example a PKI
	// role's common_name): set, the path is written; unset, it is read.
	Data map[string]string `yaml:"data"`
}

// isZero reports a binding with no secret at all.
func (r SecretRef) isZero() bool {
	return r.Source == "" && r.Mount == "" && r.Path == "" && r.Field == "" && r.KVVersion == 0 && len(r.Data) == 0
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.MaxHandleLifetime == 0 {
		c.MaxHandleLifetime = defaultMaxHandleLifetime
	}
	if c.PassTTL == 0 {
		c.PassTTL = defaultPassTTL
	}
	if c.MaxHandlesPerInvocation == 0 {
		c.MaxHandlesPerInvocation = defaultMaxHandlesPerInvocation
	}
	if c.ExpiredRetention == 0 {
		c.ExpiredRetention = defaultExpiredRetention
	}
	if c.Store.Type == "" {
		c.Store.Type = StoreMemory
	}
	if c.Store.MaxHandles == 0 {
		c.Store.MaxHandles = defaultMaxHandles
	}
	if c.Store.Redis.KeyPrefix == "" {
		c.Store.Redis.KeyPrefix = defaultRedisKeyPrefix
	}
	if c.Secrets.CacheTTL == 0 {
		c.Secrets.CacheTTL = defaultSecretTTL
	}
	intents := make(map[string]Intent, len(c.Intents))
	for name, in := range c.Intents {
		if in.Secret.Source == SourceVault {
			if in.Secret.KVVersion == 0 {
				in.Secret.KVVersion = 2
			}
			if in.Secret.Mount == "" {
				in.Secret.Mount = "secret"
			}
		}
		if in.Inject.Kind != nil {
			in.Inject.Kind = in.Inject.Kind.WithDefaults()
		}
		intents[name] = in
	}
	c.Intents = intents
	return c
}

var intentName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Validate returns every problem at once. Call it on WithDefaults().
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.EgressProxy != "" {
		// It defaults to proxy.listen (port 0 there: the port serve
		// binds), so it is checked as one.
		if err := hostport.Listen(c.EgressProxy); err != nil {
			add("broker.egress_proxy: %v", err)
		}
	}
	if c.MaxHandleLifetime <= 0 || c.MaxHandleLifetime > 24*time.Hour {
		add("broker.max_handle_lifetime: must be between 1s and 24h")
	}
	if c.PassTTL < 2*time.Second || c.PassTTL > 24*time.Hour {
		add("broker.pass_ttl: must be between 2s and 24h")
	}
	if c.MaxPassLifetime != 0 && (c.MaxPassLifetime < c.PassTTL || c.MaxPassLifetime > 90*24*time.Hour) {
		add("broker.max_pass_lifetime: must be 0 (no limit) or between pass_ttl and 90 days")
	}
	if c.MaxHandlesPerInvocation < 1 {
		add("broker.max_handles_per_invocation: must be at least 1")
	}
	if c.ExpiredRetention < 0 {
		add("broker.expired_retention: must not be negative")
	}
	if err := c.API.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch c.Store.Type {
	case StoreMemory:
		if c.Store.MaxHandles < 1 {
			add("broker.store.max_handles: must be at least 1")
		}
	case StoreRedis:
		r := c.Store.Redis
		switch sn := r.Sentinel; {
		case sn != nil && r.Address != "":
			add("broker.store.redis: set address or sentinel, not both")
		case sn != nil:
			if sn.MasterName == "" {
				add("broker.store.redis.sentinel.master_name: required")
			}
			if len(sn.Addresses) == 0 {
				add("broker.store.redis.sentinel.addresses: at least one Sentinel")
			}
			for i, a := range sn.Addresses {
				if err := hostport.Dial(a); err != nil {
					add("broker.store.redis.sentinel.addresses[%d]: %v", i, err)
				}
			}
		default:
			if err := hostport.Dial(r.Address); err != nil {
				add("broker.store.redis.address: %v", err)
			}
		}
		if c.Store.Redis.DB < 0 {
			add("broker.store.redis.db: must not be negative")
		}
		if c.Store.Redis.LocalCache < -1 {
			add("broker.store.redis.local_cache: a size, or -1 for none")
		}
		if c.Store.Redis.RevocationReplicas < -1 {
			add("broker.store.redis.revocation_replicas: a count, or -1 for no wait")
		}
		if w := c.Store.Redis.RevocationWait; w < 0 || w > time.Minute {
			add("broker.store.redis.revocation_wait: must be between 0 and 1m")
		}
	default:
		add("broker.store.type: must be one of: memory, redis")
	}
	errs = append(errs, c.Leases.validate(c.Store.Type, c.LeasedIntents())...)
	if c.Secrets.CacheTTL < 0 || c.Secrets.StaleIfError < 0 {
		add("broker.secrets: cache_ttl and stale_if_error must not be negative")
	}
	for _, name := range c.IntentNames() {
		in := c.Intents[name]
		p := "broker.intents." + name
		if !intentName.MatchString(name) {
			add("%s: intent names are lower-case letters, digits, _ . - (at most 64)", p)
		}
		if in.Class != ClassRead && in.Class != ClassWrite {
			add("%s.class: must be read or write", p)
		}
		if in.Region != "" && !validRegion(in.Region) {
			add("%s.region: %s", p, regionRule)
		}
		for i, d := range in.Destinations {
			if d.Region != "" && !validRegion(d.Region) {
				add("%s.destinations[%d].region: %s", p, i, regionRule)
			}
		}
		if in.Secret.isZero() && in.Inject.Kind == nil {
			continue // declared but not bound yet: Issue answers ErrIntentUnbound
		}
		errs = append(errs, in.Secret.validate(p+".secret", c.Secrets.File != "")...)
		errs = append(errs, in.Inject.validate(p+".inject", in)...)
		for i, d := range in.Destinations {
			if err := d.Check(); err != nil {
				add("%s.destinations[%d]: %v", p, i, err)
			} else if _, err := d.Normalize(); err != nil {
				add("%s.destinations[%d]: %v", p, i, err)
			}
		}
	}
	return errors.Join(errs...)
}

// IntentNames returns the configured intent names, sorted.
func (c Config) IntentNames() []string {
	names := make([]string, 0, len(c.Intents))
	for n := range c.Intents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (r SecretRef) validate(p string, haveFile bool) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch r.Source {
	case SourceVault:
		if r.Mount == "" {
			add("%s.mount: required", p)
		}
		if r.KVVersion != 1 && r.KVVersion != 2 {
			add("%s.kv_version: must be 1 or 2", p)
		}
	case SourceVaultLease:
		if r.Mount == "" || strings.Contains(r.Mount, "..") || strings.HasPrefix(r.Mount, "/") {
			add("%s.mount: required for vault_lease (the secrets engine's mount), relative, without ..", p)
		}
		if r.KVVersion != 0 {
			add("%s.kv_version: is for source vault", p)
		}
	case SourceFile:
		if !haveFile {
			add("%s.source: file needs broker.secrets.file", p)
		}
		if r.Mount != "" || r.KVVersion != 0 {
			add("%s: mount and kv_version are for source vault", p)
		}
	case "":
		add("%s.source: required (vault, vault_lease or file)", p)
	default:
		add("%s.source: must be one of: vault, vault_lease, file", p)
	}
	if len(r.Data) > 0 && r.Source != SourceVaultLease {
		add("%s.data: is for source vault_lease", p)
	}
	if r.Path == "" || strings.HasPrefix(r.Path, "/") || strings.Contains(r.Path, "..") {
		add("%s.path: required, relative, without ..", p)
	}
	if r.Field == "" {
		add("%s.field: required", p)
	}
	return errs
}

// isHopByHopOrProxy reports headers the proxy strips or owns.
func isHopByHopOrProxy(name string) bool {
	switch strings.ToLower(name) {
	case "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length":
		return true
	}
	return strings.HasPrefix(strings.ToLower(name), "proxy-")
}
