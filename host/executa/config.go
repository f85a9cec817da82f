package executa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/executa/aps"
	"github.com/airlock-dev/airlock/host/executa/sampling"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/internal/sandbox"
	"github.com/airlock-dev/airlock/tokens"
)

// Timeouts of the lifecycle page; a zero field takes its default. They
// are settable (host.executa.timeouts) for hosts where plugins start
// slowly, and tests give every one they do not exercise generous room.
type Timeouts struct {
	Initialize      time.Duration `yaml:"initialize"`       // 5 s
	Describe        time.Duration `yaml:"describe"`         // 5 s
	DescribeOnefile time.Duration `yaml:"describe_onefile"` // 60 s, first launch of a onefile binary
	Invoke          time.Duration `yaml:"invoke"`           // 60 s unless the tool says
	Health          time.Duration `yaml:"health"`           // 3 s
	StdinGrace      time.Duration `yaml:"stdin_grace"`      // 5 s after stdin closes
	TermGrace       time.Duration `yaml:"term_grace"`       // 5 s after SIGTERM
}

// defaultTimeouts are the lifecycle page's.
var defaultTimeouts = Timeouts{
	Initialize: 5 * time.Second, Describe: 5 * time.Second, DescribeOnefile: 60 * time.Second,
	Invoke: 60 * time.Second, Health: 3 * time.Second, StdinGrace: 5 * time.Second, TermGrace: 5 * time.Second,
}

// Or is t with each zero field taken from d.
func (t Timeouts) Or(d Timeouts) Timeouts {
	def := func(f *time.Duration, v time.Duration) {
		if *f == 0 {
			*f = v
		}
	}
	def(&t.Initialize, d.Initialize)
	def(&t.Describe, d.Describe)
	def(&t.DescribeOnefile, d.DescribeOnefile)
	def(&t.Invoke, d.Invoke)
	def(&t.Health, d.Health)
	def(&t.StdinGrace, d.StdinGrace)
	def(&t.TermGrace, d.TermGrace)
	return t
}

func (t Timeouts) withDefaults() Timeouts { return t.Or(defaultTimeouts) }

// Validate refuses a negative timeout, naming it under at.
func (t Timeouts) Validate(at string) error {
	var errs []error
	for name, d := range map[string]time.Duration{"initialize": t.Initialize, "describe": t.Describe,
		"describe_onefile": t.DescribeOnefile, "invoke": t.Invoke, "health": t.Health,
		"stdin_grace": t.StdinGrace, "term_grace": t.TermGrace} {
		if d < 0 || d > time.Hour {
			errs = append(errs, fmt.Errorf("%s.%s: must be between 0 (the default) and 1h", at, name))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// PluginConfig is one Executa plugin as the security team configured it:
// an entry of host.executa.plugins in the config file.
type PluginConfig struct {
	Name    string   `yaml:"name"`
	Command string   `yaml:"command"` // absolute path
	Args    []string `yaml:"args"`
	// The plugin's environment is minimal by default: PATH, HOME, LANG,
	// LC_ALL, TZ from the host, a private TMPDIR, the proxy variables —
	// plus Env (values) and InheritEnv (names, "X_*" a prefix, taken from
	// the host's environment).
	Env        map[string]string `yaml:"env"`
	InheritEnv []string          `yaml:"inherit_env"`
	// InheritAllEnv passes the host's whole environment minus a deny list
	// (EnvDeny and the built-in one). Logged loudly at every start: an
	// operator's shell often holds API keys.
	InheritAllEnv bool     `yaml:"inherit_all_env"`
	EnvDeny       []string `yaml:"env_deny"`
	// Strict is accepted for old configs; the minimal environment is now
	// the default, so it changes nothing.
	Strict bool `yaml:"strict"`
	// Onefile gives the first describe 60 s (PyInstaller-style unpack).
	Onefile bool `yaml:"onefile"`
	// FirstRun is set by the host on the first launch of this binary
	// (describe gets 60 s when Onefile).
	FirstRun bool `yaml:"-"`
	// Credentials map each credential the manifest declares to a broker
	// intent: the plugin receives a handle, never the secret.
	Credentials map[string]string `yaml:"credentials"`
	// Settings give plain values to credentials the manifest declares
	// "sensitive": false (units, regions, feature flags). A sensitive
	// credential is never delivered from here; it must be brokered.
	Settings map[string]string `yaml:"settings"`
	// RawCredentials is the explicit, logged opt-in for plugins that cannot
	// use the proxy: the secret value itself is delivered.
	RawCredentials map[string]string `yaml:"-"`
}

// Secrets reads a configured intent's secret (for the raw opt-in).
type Secrets interface {
	SecretFor(ctx context.Context, intent string, fresh bool) (broker.Secret, error)
}

// Options are the host's services for Executa plugins.
type Options struct {
	Broker  broker.API
	Secrets Secrets
	// Tokens mints sampling and storage tokens: broker.LocalMinter in one
	// process, the broker API client from airlock host.
	Tokens      broker.TokenMinter
	EgressProxy string
	// InterceptCAFile is the egress proxy's intercept CA certificate; see
	// host.Options.InterceptCAFile.
	InterceptCAFile string
	// NoHTTPSProxy: this plugin opted out of CONNECT interception (it
	// gets HTTP_PROXY only).
	NoHTTPSProxy bool
	// Sandbox is how the plugin is confined (host.sandbox); Hide are
	// Airlock's own paths it never sees.
	Sandbox sandbox.Config
	Hide    []string
	// ProxyServe: see host.Options.ProxyServe.
	ProxyServe func(plugin string, l net.Listener) (io.Closer, error)
	Timeouts   Timeouts
	Log        *slog.Logger
	// Verifier checks the tokens plugins present on reverse RPC.
	Verifier *tokens.Verifier
	// Sampling is the backend of sampling/createMessage; none when nil.
	Sampling sampling.Backend
	// KV is the APS key-value store of storage/*; none when nil.
	KV *aps.Store
	// Files serves files/*; none when nil.
	Files *aps.Files
	// SamplingTimeout bounds one sampling backend call (default 60 s; the
	// invoke's deadline bounds it too).
	SamplingTimeout time.Duration
	// SamplingCaps is what the host offers in initialize.
	MaxTokensPerCall, MaxCallsPerInvoke int
	// Record, when set, receives the host-authored evidence of this
	// plugin's invokes (credential.issued). When it fails, the credential
	// is not delivered and the invoke is refused.
	Record func(typ, invocation string, data map[string]any) error
	// StderrLevel and Redactor shape the plugin's stderr log lines.
	StderrLevel slog.Level
	Redactor    *redact.Redactor
}

// Errors.
var (
	ErrStopped      = errors.New("plugin is stopped")
	ErrUnknownTool  = errors.New("tool is not in the plugin's manifest")
	ErrTimeout      = errors.New("plugin did not answer in time")
	ErrPluginExited = errors.New("plugin process exited")
	ErrExitedEarly  = errors.New("plugin exited after one response: it must keep reading stdin until EOF (Executa pitfall #1)")
	// ErrInvalidManifest: describe returned a manifest that does not
	// validate.
	ErrInvalidManifest = errors.New("invalid manifest")
	// ErrFileTransportRefused: the plugin announced its answer in a file
	// the host may not read (not negotiated, or outside its temp dir).
	ErrFileTransportRefused = errors.New("file transport refused")
	// ErrResponseTooLarge: the plugin answered in one frame over 2 MiB
	// (MaxFrame); the call ends at once. A large answer goes through
	// __file_transport.
	ErrResponseTooLarge = errors.New("the plugin's response frame was larger than 2 MiB: a large answer goes through __file_transport")
	// ErrNotReady: the plugin says it is not ready yet (initializing).
	ErrNotReady = errors.New("plugin is not ready")
	// ErrUnhealthy: the plugin gave no valid health answer, said it is in
	// error, or lost its proxy pass (egressenv.ErrPassLost).
	ErrUnhealthy = errors.New("plugin is unhealthy")
)

// UnboundError: a credential the manifest marks required is bound to no
// intent, setting or default; the call is refused before the plugin sees
// it.
type UnboundError struct{ Index []int }

func (e *UnboundError) Error() string {
	parts := make([]string, len(e.Index))
	for i, n := range e.Index {
		parts[i] = fmt.Sprintf("credentials[%d]", n)
	}
	return "the plugin's required " + strings.Join(parts, ", ") + " is bound to no intent or setting (host.executa.plugins[].credentials / settings)"
}

// fileTransportRefused stands in for an answer whose file was refused.
var fileTransportRefused = &RPCError{Code: CodeInternalError, Message: "file transport refused"}

// ToolError is an invoke the plugin answered with a JSON-RPC error; the
// plugin's message is not kept (it is plugin-supplied).
type ToolError struct {
	Code int
	// Object is the plugin's error object, returned to the caller as the
	// call's result; never logged or put in a reason.
	Object json.RawMessage
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("the plugin answered invoke with error code %d", e.Code)
}

func (o Options) samplingTimeout() time.Duration {
	if o.SamplingTimeout > 0 {
		return o.SamplingTimeout
	}
	return DefaultSamplingWindow
}
