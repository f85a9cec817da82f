package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/hostport"
	"github.com/airlock-dev/airlock/internal/redact"
)

// Host is the plugin host's configuration (the `host:` section). Paths
// default under the state directory. It lives here, not in package host,
// because it configures host and its runtimes (host/pluginv1,
// host/executa), evidence, policy and the control API at once: the daemon
// turns it into each package's options.
type Host struct {
	PluginsDir string `yaml:"plugins_dir"`
	Lockfile   string `yaml:"lockfile"`
	Evidence   string `yaml:"evidence"`
	// Policy is a policy file; without one every action is denied.
	Policy string `yaml:"policy"`
	// Control is where the control API listens: unix:/path (default
	// <state_dir>/run/control.sock; its directory 0700, peers checked by
	// uid) or host:port (only with ControlTLS or ControlTokenFile).
	Control string `yaml:"control"`
	// ControlTokenFile holds the bearer token every control API request
	// presents (Authorization: Bearer …): it is the operator's authority,
	// installing a plugin included. The host creates it (0600) when
	// missing and refuses one others may read. Default for a unix socket:
	// control.token beside it; a TCP listener has no default.
	ControlTokenFile string `yaml:"control_token_file"`
	// ControlAllowedUIDs and ControlAllowedUsers (names) may connect to a
	// unix control socket (SO_PEERCRED); default: the host's own uid.
	ControlAllowedUIDs  []int    `yaml:"control_allowed_uids"`
	ControlAllowedUsers []string `yaml:"control_allowed_users"`
	// ControlTLS serves a TCP control API over mutual TLS.
	ControlTLS *ControlTLS `yaml:"control_tls"`
	// ControlPrincipals name the control API's callers beyond the
	// connection: principals' own token files, names for the unix
	// socket's uids, an OIDC issuer's JWTs.
	ControlPrincipals ControlPrincipals `yaml:"control_principals"`
	// ControlOperators are the principals (exact, or a prefix ending in
	// "*") that issue and revoke access grants and release quarantined
	// plugins. Empty: the principals of the operator's own credentials —
	// unix socket peers, client certificates and the control token on
	// TCP — but not token-file or JWT principals.
	ControlOperators []string `yaml:"control_operators"`
	// ControlWriteTimeout bounds each write of a control API answer: a
	// caller that stops reading an invocation's NDJSON stream is dropped
	// then, and its call cancelled (default 30s, at most 10m).
	ControlWriteTimeout time.Duration `yaml:"control_write_timeout"`
	// Broker is airlock serve's broker socket (unix:/path); default
	// broker.api.socket.
	Broker string `yaml:"broker"`
	// Artifacts is a directory that serves ResolveReference for
	// artifact://NAME references; none when empty.
	Artifacts string `yaml:"artifacts"`
	// EvidenceKey is the Ed25519 key that signs evidence checkpoints
	// (created 0600 on first use; default <state_dir>/evidence-key.pem);
	// CheckpointInterval is how often a checkpoint is appended when
	// records were (1m; one is also written at shutdown).
	EvidenceKey        string        `yaml:"evidence_key"`
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
	// EvidenceFailOpen lets calls proceed when their evidence records
	// cannot be written (a full disk, an I/O error), logging each
	// failure. Off by default: such a call is refused (503
	// evidence_unavailable). Warned at every start when on.
	EvidenceFailOpen bool `yaml:"evidence_fail_open"`
	// Admin is the host's admin listener (/healthz, /readyz with plugin
	// health, /metrics); default 127.0.0.1:9467. airlock dev serves these
	// on admin.listen instead.
	Admin string `yaml:"admin"`
	// Decision is what the decision point counts and requires beyond the
	// policy: budgets, residency, grants.
	Decision Decision `yaml:"decision"`
	// Restart is how crashed plugins of either kind are restarted.
	Restart host.RestartPolicy `yaml:"restart"`
	// HealthInterval is how often each running plugin is probed (10s).
	HealthInterval time.Duration `yaml:"health_interval"`
	// ShutdownGrace bounds a plugin/v1 Shutdown before its process group
	// is killed (5s).
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// StderrLevel is the log level of plugin stderr lines (info).
	StderrLevel string `yaml:"stderr_level"`
	// Redact are extra regular expressions whose matches are redacted from
	// plugin stderr, HostService.Log fields and plugin evidence, besides
	// the built-in handle, token and secret shapes.
	Redact []string `yaml:"redact"`
	// HTTPSProxyOptOut names plugins (either kind) that get only
	// HTTP_PROXY when the proxy intercepts CONNECT: no HTTPS_PROXY, no
	// CA variables, no pass. For a plugin whose TLS stack must not be
	// pointed at the intercept CA.
	HTTPSProxyOptOut []string `yaml:"https_proxy_opt_out"`
	// Executa configures the Executa plugins this host runs beside the
	// plugin/v1 providers.
	Executa HostExecuta `yaml:"executa"`
	// Sandbox is how every plugin is confined: the level (auto,
	// namespaces, landlock, off), extra read-only paths and limits, per
	// plugin.
	Sandbox host.SandboxConfig `yaml:"sandbox"`
	// MCP serves the plugins' tools to agents over the Model Context
	// Protocol on the control API's listener (off by default).
	MCP HostMCP `yaml:"mcp"`
}

// DefaultCheckpointInterval is how often evidence checkpoints are signed.
const DefaultCheckpointInterval = time.Minute

// DefaultHostAdmin is the host admin listener's default address.
const DefaultHostAdmin = "127.0.0.1:9467"

// Redactor compiles Redact (call after Validate).
func (c Host) Redactor() *redact.Redactor {
	r := &redact.Redactor{}
	for _, p := range c.Redact {
		if re, err := regexp.Compile(p); err == nil {
			r.Extra = append(r.Extra, re)
		}
	}
	return r
}

// HostExecuta is the `host.executa:` section.
type HostExecuta struct {
	// JWKS is where the host fetches the keys that verify the tokens
	// plugins present on reverse RPC; default airlock serve's admin
	// listener.
	JWKS string `yaml:"jwks"`
	// Storage is the APS store of storage/* and files/* metadata; default
	// <state_dir>/aps.db.
	Storage string `yaml:"storage"`
	// StorageQuota is the bytes each scope owner may use; default 5 GiB.
	StorageQuota int64 `yaml:"storage_quota"`
	// FilesListen turns on files/*: the host serves presigned URLs here
	// (host:port); blobs live in FilesDir (default <state_dir>/files).
	FilesListen string `yaml:"files_listen"`
	FilesDir    string `yaml:"files_dir"`
	// Sampling is the backend of sampling/createMessage; none when empty.
	Sampling ExecutaSampling `yaml:"sampling"`
	// Timeouts of every Executa plugin's lifecycle (initialize 5s,
	// describe 5s, health 3s, …); raise them where plugins start slowly.
	Timeouts executa.Timeouts `yaml:"timeouts"`
	Plugins  []ExecutaPlugin  `yaml:"plugins"`
}

// ExecutaSampling selects at most one sampling backend.
type ExecutaSampling struct {
	// Fixture is a JSONL file of canned completions (tests, demos).
	Fixture string `yaml:"fixture"`
	// OpenAI calls an OpenAI-compatible API through the egress proxy with
	// a brokered key.
	OpenAI *ExecutaOpenAI `yaml:"openai"`
	// Timeout bounds one backend call (60s); the invoke's deadline bounds
	// it too.
	Timeout time.Duration `yaml:"timeout"`
}

// ExecutaOpenAI is the OpenAI-compatible sampling backend.
type ExecutaOpenAI struct {
	// BaseURL is http://host[:port][/prefix], with or without the API's
	// /v1 (http://api.example.com and http://api.example.com/v1 both
	// reach /v1/chat/completions); http: the proxy upgrades to TLS.
	BaseURL string `yaml:"base_url"`
	Model   string `yaml:"model"`
	// Intent is the broker intent that holds the API key.
	Intent string `yaml:"intent"`
	// JSON says the model honours response_format.
	JSON bool `yaml:"json"`
}

// ExecutaPlugin is one Executa plugin (host.executa.plugins[i]); the
// runtime takes it as it is.
type ExecutaPlugin = executa.PluginConfig

var (
	executaName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Validate returns every problem in the section at once.
func (c HostExecuta) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.StorageQuota < 0 {
		add("host.executa.storage_quota: must not be negative")
	}
	if c.FilesListen != "" {
		if err := hostport.Listen(c.FilesListen); err != nil {
			add("host.executa.files_listen: %v", err)
		}
	}
	if c.JWKS != "" {
		if u, err := url.Parse(c.JWKS); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("host.executa.jwks: must be an http(s) URL")
		} else if err := hostport.URL(u.Host); err != nil && u.Port() != "0" {
			// Port 0 is the default derived from an admin listener on an
			// ephemeral port (tests, embedded use), where the keys are
			// the process's own; any other bad port is an error.
			add("host.executa.jwks: %v", err)
		}
	}
	if err := c.Timeouts.Validate("host.executa.timeouts"); err != nil {
		errs = append(errs, err)
	}
	if t := c.Sampling.Timeout; t < 0 || t > 10*time.Minute {
		add("host.executa.sampling.timeout: must be between 0 and 10m")
	}
	if s := c.Sampling; s.Fixture != "" && s.OpenAI != nil {
		add("host.executa.sampling: set fixture or openai, not both")
	}
	if o := c.Sampling.OpenAI; o != nil {
		u, err := url.Parse(o.BaseURL)
		switch {
		case err != nil || u.Scheme != "http" || u.Host == "":
			add("host.executa.sampling.openai.base_url: must be http://host[:port][/prefix] (the proxy adds TLS)")
		case hostport.URL(u.Host) != nil:
			add("host.executa.sampling.openai.base_url: %v", hostport.URL(u.Host))
		case strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/chat/completions"):
			// The host appends the endpoint itself: this one would call
			// .../chat/completions/v1/chat/completions and get 404.
			add("host.executa.sampling.openai.base_url: name the API root or its /v1, not the endpoint: drop /chat/completions (the host appends /v1/chat/completions, or /chat/completions after /v1)")
		}
		if o.Model == "" {
			add("host.executa.sampling.openai.model: required")
		}
		if o.Intent == "" {
			add("host.executa.sampling.openai.intent: required (the broker intent holding the API key)")
		}
	}
	seen := map[string]bool{}
	for i, p := range c.Plugins {
		at := fmt.Sprintf("host.executa.plugins[%d]", i)
		switch {
		case !executaName.MatchString(p.Name):
			add("%s.name: must be lower-case letters, digits, '.', '_' or '-' (at most 63)", at)
		case seen[p.Name]:
			add("%s.name: the same name as an earlier plugin", at)
		}
		seen[p.Name] = true
		if !filepath.IsAbs(p.Command) {
			add("%s.command: must be an absolute path", at)
		}
		for _, k := range slices.Sorted(maps.Keys(p.Credentials)) {
			if !envName.MatchString(k) {
				add("%s.credentials: a key is not an environment variable name", at)
				continue
			}
			if p.Credentials[k] == "" {
				add("%s.credentials.%s: needs a broker intent", at, k)
			}
			if _, ok := p.Settings[k]; ok {
				add("%s.settings.%s: also bound to a broker intent; a credential is one or the other", at, k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(p.Settings)) {
			if !envName.MatchString(k) {
				add("%s.settings: a key is not a credential name", at)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(p.Env)) {
			if !envName.MatchString(k) {
				add("%s.env: a key is not an environment variable name", at)
			}
		}
		for i, k := range p.InheritEnv {
			if !envName.MatchString(strings.TrimSuffix(k, "*")) {
				add("%s.inherit_env[%d]: must be a variable name or NAME_* prefix", at, i)
			}
		}
	}
	return errors.Join(errs...)
}

// ControlTLS is the control API's mutual TLS (host.control_tls): the
// host's certificate, and the CA its clients' certificates chain to.
type ControlTLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
	// IDFrom is how a client certificate names its principal: spiffe
	// (default: its SPIFFE ID, else its subject), subject_cn or subject.
	IDFrom string `yaml:"id_from"`
}

// DefaultControlTokenFile is the control token's name beside a unix
// control socket.
const DefaultControlTokenFile = "control.token"

// ControlSocket is the path of a unix control API ("unix:/path"); ok is
// false for host:port.
func (c Host) ControlSocket() (path string, ok bool) { return strings.CutPrefix(c.Control, "unix:") }

// WithControlDefaults puts the control token beside a unix control socket
// when unset.
func (c Host) WithControlDefaults() Host {
	if p, ok := c.ControlSocket(); ok && c.ControlTokenFile == "" && p != "" {
		c.ControlTokenFile = filepath.Join(filepath.Dir(p), DefaultControlTokenFile)
	}
	return c
}

// validateControl: a unix socket, or TCP only with an authority (mutual
// TLS or a token) — and a token alone only on loopback, where it does not
// cross a network in clear.
func (c Host) validateControl() []error {
	var errs []error
	add := func(s string) { errs = append(errs, errors.New(s)) }
	if c.ControlTokenFile != "" && !filepath.IsAbs(c.ControlTokenFile) {
		add("host.control_token_file: must be an absolute path")
	}
	for _, u := range c.ControlAllowedUIDs {
		if u < 0 {
			add("host.control_allowed_uids: uids are not negative")
			break
		}
	}
	if t := c.ControlTLS; t != nil && (t.CertFile == "" || t.KeyFile == "" || t.ClientCAFile == "") {
		add("host.control_tls: cert_file, key_file and client_ca_file are required (mutual TLS)")
	}
	if t := c.ControlTLS; t != nil {
		switch t.IDFrom {
		case "", "spiffe", "subject_cn", "subject":
		default:
			add("host.control_tls.id_from: must be spiffe, subject_cn or subject")
		}
	}
	errs = append(errs, c.ControlPrincipals.validate()...)
	if p, ok := c.ControlSocket(); ok {
		switch {
		case !filepath.IsAbs(p):
			add("host.control: unix:PATH needs an absolute path")
		case len(p) > 107:
			add("host.control: longer than a unix socket path may be (107 bytes)")
		case c.ControlTLS != nil:
			add("host.control_tls: only for a TCP control API (host.control is a unix socket)")
		}
		return errs
	}
	host, _, err := net.SplitHostPort(c.Control)
	if err != nil {
		add("host.control: must be unix:/path or host:port")
		return errs
	}
	if err := hostport.Listen(c.Control); err != nil {
		add("host.control: " + err.Error())
		return errs
	}
	switch {
	case c.ControlTLS == nil && c.ControlTokenFile == "" && !c.ControlPrincipals.bearer():
		add("host.control: a TCP control API needs host.control_tls (mutual TLS), host.control_token_file or " +
			"host.control_principals (tokens or jwt); without one anyone who reaches the port could install a plugin " +
			"(use a unix:/path socket, the default)")
	case c.ControlTLS == nil && !isLoopback(host):
		add("host.control: a token over plain TCP crosses the network in clear; listen on loopback or set host.control_tls")
	}
	if len(c.ControlAllowedUIDs) > 0 || len(c.ControlAllowedUsers) > 0 {
		add("host.control_allowed_uids, host.control_allowed_users: only for a unix control socket (the kernel names no uid over TCP)")
	}
	if len(c.ControlPrincipals.Peers) > 0 {
		add("host.control_principals.peers: only for a unix control socket (the kernel names no uid over TCP)")
	}
	return errs
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Validate returns every problem at once.
func (c Host) Validate() error {
	var errs []error
	if c.Broker != "" && !strings.HasPrefix(c.Broker, "unix:/") {
		errs = append(errs, errors.New("host.broker: must be unix:/path (the broker API socket)"))
	}
	if c.Control == "" {
		errs = append(errs, errors.New("host.control: required"))
	} else {
		errs = append(errs, c.validateControl()...)
	}
	errs = append(errs, c.Sandbox.Validate())
	if c.Admin != "" {
		if err := hostport.Listen(c.Admin); err != nil {
			errs = append(errs, fmt.Errorf("host.admin: %w", err))
		}
	}
	r := c.Restart
	if r.Base < 0 || r.Max < 0 || r.Budget < 0 || r.ResetAfter < 0 {
		errs = append(errs, errors.New("host.restart: durations and budget must not be negative"))
	}
	if r.Max > 0 && r.Base > r.Max {
		errs = append(errs, errors.New("host.restart.base: must not exceed host.restart.max"))
	}
	if c.CheckpointInterval < 0 || c.CheckpointInterval > 0 && c.CheckpointInterval < time.Second {
		errs = append(errs, errors.New("host.checkpoint_interval: must be at least 1s"))
	}
	if c.HealthInterval < 0 || c.HealthInterval > 0 && c.HealthInterval < 100*time.Millisecond {
		errs = append(errs, errors.New("host.health_interval: must be at least 100ms"))
	}
	if c.ControlWriteTimeout < 0 || c.ControlWriteTimeout > 10*time.Minute {
		errs = append(errs, errors.New("host.control_write_timeout: must be between 0 and 10m"))
	}
	if c.ShutdownGrace < 0 || c.ShutdownGrace > 5*time.Minute {
		errs = append(errs, errors.New("host.shutdown_grace: must be between 0 and 5m"))
	}
	if c.StderrLevel != "" {
		var l slog.Level
		if l.UnmarshalText([]byte(c.StderrLevel)) != nil {
			errs = append(errs, errors.New("host.stderr_level: must be debug, info, warn or error"))
		}
	}
	for i, p := range c.Redact {
		if _, err := regexp.Compile(p); err != nil {
			errs = append(errs, fmt.Errorf("host.redact[%d]: not a regular expression", i))
		}
	}
	if err := c.Executa.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.MCP.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Decision.Validate(); err != nil {
		errs = append(errs, err)
	}
	for i, p := range c.ControlOperators {
		if p == "" || strings.Count(p, "*") > 1 || strings.Contains(strings.TrimSuffix(p, "*"), "*") {
			errs = append(errs, fmt.Errorf("host.control_operators[%d]: a principal id, or a prefix ending in one \"*\"", i))
		}
	}
	return errors.Join(errs...)
}
