package proxy

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/internal/hostport"
)

// Defaults for Config.
const (
	DefaultListen               = "127.0.0.1:8899"
	DefaultPerHandleRPS         = 50
	DefaultPerPluginRPS         = 200
	DefaultPerPluginConcurrency = 64
	DefaultMaxHeaderBytes       = 64 << 10
	DefaultMaxRequestBody       = 32 << 20
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultIdleTimeout          = 120 * time.Second
	DefaultDialTimeout          = 10 * time.Second
	DefaultTLSHandshakeTimeout  = 10 * time.Second
	DefaultResponseTimeout      = 60 * time.Second
	DefaultIdleConnTimeout      = 90 * time.Second
	DefaultMaxIdleConnsPerHost  = 256
	DefaultMaxIdleConns         = 1024
	DefaultMaxWebSocketMessage  = 1 << 20
	DefaultWebSocketIdleTimeout = 5 * time.Minute
	// MaxReplayBody is the largest request body kept for the
	// rotation-aware retry.
	MaxReplayBody = 1 << 20
)

// Config is the egress proxy's configuration (the `proxy:` section).
type Config struct {
	Listen string `yaml:"listen"`
	// AllowCIDRs lets the proxy dial addresses it would otherwise refuse
	// (loopback, private ranges): for tests and private deployments. The
	// proxy's own listen address is refused even then.
	AllowCIDRs []string `yaml:"allow_cidrs"`
	// UpstreamCAFile adds PEM CA certificates to the system roots for
	// upstream TLS.
	UpstreamCAFile string `yaml:"upstream_ca_file"`
	// EchoGuard redacts the injected secret from responses (default on).
	EchoGuard *bool `yaml:"echo_guard"`
	// Resolve pins host names to addresses, like curl --resolve, for dev
	// and private deployments. The addresses are still checked against
	// the address policy (loopback needs allow_cidrs).
	Resolve map[string][]string `yaml:"resolve"`

	Limits    LimitsConfig    `yaml:"limits"`
	Upstream  UpstreamConfig  `yaml:"upstream"`
	Intercept InterceptConfig `yaml:"intercept"`
}

// InterceptConfig turns on CONNECT with TLS interception: the proxy
// terminates the plugin's TLS with a certificate from this CA and runs
// every request inside the tunnel through the same checks as an
// absolute-form request. The CA lives in CAFile (the trust bundle) and
// CAKeyFile (mode 0600), created when neither exists; or, with Vault set,
// in one Vault KV v2 secret that replicas share, the bundle then being
// published to CAFile for the host.
type InterceptConfig struct {
	CAFile    string         `yaml:"ca_file"`
	CAKeyFile string         `yaml:"ca_key_file"`
	Vault     InterceptVault `yaml:"vault"`
	// PermittedDomains, when set, limits the CA by name constraints to
	// these DNS domains (and their subdomains), and the proxy refuses a
	// CONNECT to any other host. Applies to CAs created or staged after
	// it is set.
	PermittedDomains []string `yaml:"permitted_domains"`
	// Reload is how often the proxy rereads the CA to pick up a rotation
	// (default 1m).
	Reload time.Duration `yaml:"reload"`
}

// InterceptVault is the KV v2 secret that holds the intercept CA.
type InterceptVault struct {
	Mount string `yaml:"mount"`
	Path  string `yaml:"path"`
}

// DefaultCAReload is how often the intercept CA is reread.
const DefaultCAReload = time.Minute

// LimitsConfig bounds what a plugin may do through the proxy.
type LimitsConfig struct {
	PerHandleRPS         float64 `yaml:"per_handle_rps"`
	PerHandleBurst       int     `yaml:"per_handle_burst"`
	PerPluginRPS         float64 `yaml:"per_plugin_rps"`
	PerPluginBurst       int     `yaml:"per_plugin_burst"`
	PerPluginConcurrency int     `yaml:"per_plugin_concurrency"`
	// Scope is where the rates hold: "replica" (each airlock serve on its
	// own: behind N replicas a plugin gets N times the rate) or "global"
	// (across every replica sharing the Redis handle store, one Redis
	// round trip per request; Redis down refuses with 503
	// limits_unavailable). Default replica.
	Scope             string        `yaml:"scope"`
	MaxHeaderBytes    int           `yaml:"max_header_bytes"`
	MaxRequestBody    int64         `yaml:"max_request_body"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	// MaxWebSocketMessage bounds a WebSocket message (and so each of
	// its frames), either way; WebSocketIdleTimeout closes a socket
	// with no message either way for that long.
	MaxWebSocketMessage  int64         `yaml:"max_websocket_message"`
	WebSocketIdleTimeout time.Duration `yaml:"websocket_idle_timeout"`
	// StreamCheck is how often a long-lived stream (an HTTP/2 stream, a
	// WebSocket) has its handle and pass resolved again, so that a
	// revoked or expired one ends it: one handle-store read per stream
	// per interval. At most MaxStreamCheck, so that a revocation ends a
	// stream within a second.
	StreamCheck time.Duration `yaml:"stream_check"`
}

// MaxStreamCheck bounds Limits.StreamCheck: a revoked handle's streams
// end within a second.
const MaxStreamCheck = time.Second

// Limit scopes.
const (
	LimitsReplica = "replica"
	LimitsGlobal  = "global"
)

// UpstreamConfig tunes connections to upstream APIs.
type UpstreamConfig struct {
	DialTimeout         time.Duration `yaml:"dial_timeout"`
	TLSHandshakeTimeout time.Duration `yaml:"tls_handshake_timeout"`
	ResponseTimeout     time.Duration `yaml:"response_header_timeout"`
	IdleConnTimeout     time.Duration `yaml:"idle_conn_timeout"`
	// MaxIdleConnsPerHost bounds the idle connections of one pool: one
	// destination, for one plugin and credential. MaxIdleConns bounds
	// them all together; past it the connection idle the longest closes.
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
	MaxIdleConns        int `yaml:"max_idle_conns"`
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Intercept.Reload == 0 {
		c.Intercept.Reload = DefaultCAReload
	}
	if c.EchoGuard == nil {
		on := true
		c.EchoGuard = &on
	}
	l := &c.Limits
	if l.PerHandleRPS == 0 {
		l.PerHandleRPS = DefaultPerHandleRPS
	}
	if l.PerHandleBurst == 0 {
		l.PerHandleBurst = int(2 * l.PerHandleRPS)
	}
	if l.PerPluginRPS == 0 {
		l.PerPluginRPS = DefaultPerPluginRPS
	}
	if l.PerPluginBurst == 0 {
		l.PerPluginBurst = int(2 * l.PerPluginRPS)
	}
	if l.PerPluginConcurrency == 0 {
		l.PerPluginConcurrency = DefaultPerPluginConcurrency
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxRequestBody == 0 {
		l.MaxRequestBody = DefaultMaxRequestBody
	}
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxWebSocketMessage == 0 {
		l.MaxWebSocketMessage = DefaultMaxWebSocketMessage
	}
	if l.WebSocketIdleTimeout == 0 {
		l.WebSocketIdleTimeout = DefaultWebSocketIdleTimeout
	}
	if l.StreamCheck == 0 {
		l.StreamCheck = DefaultStreamCheck
	}
	u := &c.Upstream
	if u.DialTimeout == 0 {
		u.DialTimeout = DefaultDialTimeout
	}
	if u.TLSHandshakeTimeout == 0 {
		u.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if u.ResponseTimeout == 0 {
		u.ResponseTimeout = DefaultResponseTimeout
	}
	if u.IdleConnTimeout == 0 {
		u.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if u.MaxIdleConnsPerHost == 0 {
		u.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if u.MaxIdleConns == 0 {
		u.MaxIdleConns = DefaultMaxIdleConns
	}
	return c
}

// Validate returns every problem at once.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if err := hostport.Listen(c.Listen); err != nil {
		add("proxy.listen: %v", err)
	}
	for i, s := range c.AllowCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			add("proxy.allow_cidrs[%d]: not a CIDR prefix", i)
		}
	}
	ic := c.Intercept
	switch {
	case ic.Vault.Path != "" && (ic.Vault.Mount == "" || ic.CAFile == "" || ic.CAKeyFile != ""):
		add("proxy.intercept.vault: needs mount and path, and ca_file (where the CA bundle is published) without ca_key_file")
	case ic.Vault.Path == "" && ic.Vault.Mount != "":
		add("proxy.intercept.vault: path is required")
	case ic.Vault.Path == "" && (ic.CAFile == "") != (ic.CAKeyFile == ""):
		add("proxy.intercept: ca_file and ca_key_file go together")
	}
	for i, d := range ic.PermittedDomains {
		if n, err := normalizeHost(d); err != nil || n != d {
			add("proxy.intercept.permitted_domains[%d]: must be a lower-case DNS name", i)
		}
	}
	if ic.Reload < 0 {
		add("proxy.intercept.reload: must not be negative")
	}
	for _, host := range slices.Sorted(maps.Keys(c.Resolve)) {
		addrs := c.Resolve[host]
		if host == "" || len(addrs) == 0 {
			add("proxy.resolve: each entry needs a host name and at least one address")
		}
		for i, a := range addrs {
			if _, err := netip.ParseAddr(a); err != nil {
				add("proxy.resolve.%s[%d]: not an IP address", host, i)
			}
		}
	}
	l := c.Limits
	if l.PerHandleRPS < 0 || l.PerPluginRPS < 0 || l.PerHandleBurst < 0 || l.PerPluginBurst < 0 {
		add("proxy.limits: rates and bursts must not be negative")
	}
	if l.PerPluginConcurrency < 0 {
		add("proxy.limits.per_plugin_concurrency: must not be negative")
	}
	if l.Scope != "" && l.Scope != LimitsReplica && l.Scope != LimitsGlobal {
		add("proxy.limits.scope: must be replica or global")
	}
	if l.MaxHeaderBytes < 4<<10 || l.MaxHeaderBytes > 1<<20 {
		add("proxy.limits.max_header_bytes: must be between 4 KiB and 1 MiB")
	}
	if l.MaxRequestBody < 0 {
		add("proxy.limits.max_request_body: must not be negative")
	}
	if l.MaxWebSocketMessage < 0 {
		add("proxy.limits.max_websocket_message: must not be negative")
	}
	if l.StreamCheck < 0 || l.StreamCheck > MaxStreamCheck {
		add("proxy.limits.stream_check: must be between 0 (the default, %s) and %s, so that a revoked handle ends its streams within a second", DefaultStreamCheck, MaxStreamCheck)
	}
	if c.Upstream.MaxIdleConnsPerHost < 0 || c.Upstream.MaxIdleConns < 0 {
		add("proxy.upstream: max_idle_conns_per_host and max_idle_conns must not be negative")
	}
	// A slice, not a map: problems are reported in the same order every run.
	for _, t := range []struct {
		name string
		d    time.Duration
	}{
		{"proxy.limits.read_header_timeout", l.ReadHeaderTimeout}, {"proxy.limits.idle_timeout", l.IdleTimeout},
		{"proxy.upstream.dial_timeout", c.Upstream.DialTimeout}, {"proxy.upstream.tls_handshake_timeout", c.Upstream.TLSHandshakeTimeout},
		{"proxy.upstream.response_header_timeout", c.Upstream.ResponseTimeout}, {"proxy.upstream.idle_conn_timeout", c.Upstream.IdleConnTimeout},
		{"proxy.limits.websocket_idle_timeout", l.WebSocketIdleTimeout},
	} {
		if t.d < 0 {
			add("%s: must not be negative", t.name)
		}
	}
	return errors.Join(errs...)
}
