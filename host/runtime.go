package host

import (
	"context"
	"errors"
	"time"

	"github.com/airlock-dev/airlock/host/policy"
)

// Kind names a plugin protocol.
type Kind string

// Plugin kinds.
const (
	KindPluginV1 Kind = "plugin/v1" // gRPC over a unix socket
	KindExecuta  Kind = "executa"   // JSON-RPC 2.0 over stdio
)

// Runtime is one running plugin process, whatever its protocol. The
// host's registry, supervisor and invoke path see plugins only through
// it, so both kinds get the same policy decision, evidence, handle
// revocation, restart and health handling.
type Runtime interface {
	Kind() Kind
	// Protocol is the negotiated protocol version ("1", "2.0", "1.1").
	Protocol() string
	// Sandbox is the sandbox level the process runs at (namespaces,
	// landlock, off).
	Sandbox() string
	Pid() int
	// Prepare resolves a call before the policy sees it: the method
	// exists, the input is of its type, dry run is supported. Its errors
	// are refusals (ErrMethodNotDispatchable, ErrBadInput,
	// ErrDryRunUnsupported); nothing has reached the plugin.
	Prepare(req InvokeRequest) (Action, error)
	// Health asks the plugin whether it serves calls.
	Health(ctx context.Context) error
	// Exited is closed once the process has exited and its process group
	// is dead.
	Exited() <-chan struct{}
	// Fault explains an exit the host did not ask for: nil when the exit
	// is not a fault (an Executa plugin that ended cleanly and starts cold
	// on the next call).
	Fault() error
	// Shutdown cancels what is in flight, revokes the plugin's handles
	// and pass (through the launch layer, before the plugin is told),
	// asks the plugin to stop and kills its process group after the grace,
	// or at ctx's deadline when that comes first (the supervisor's one
	// grace, part of which the calls in flight may have used).
	Shutdown(ctx context.Context) error
	// Kill ends the process group at once.
	Kill()
	// Release frees what the host opened for a process that has exited
	// without Shutdown (a crash, a failed probe, a clean Executa exit):
	// sockets, connections and the goroutines serving them. The
	// supervisor calls it before launching again.
	Release()
}

// Action is a prepared call: what the policy decides on, and how to run it
// once allowed.
type Action interface {
	Risk() policy.Risk
	// Run sends the call and derives the outcome. A plugin's own failure
	// is a FAILED outcome, never an error.
	Run(ctx context.Context, call Call) *Outcome
}

// Call is what the invoke path hands a prepared action: the invocation
// the host opened for it.
type Call struct {
	ID               string
	Deadline         time.Time
	DryRun           bool
	Caller           Principal
	Actor            Actor
	PolicyDecisionID string
	OnRunning        func(Progress)
	AppID, AppSlug   string
	// Run is the run context the caller gave; GrantID the access grant
	// the call runs under ("" none); ProfileDigest the digest of the
	// policy bundle that decided.
	Run           RunContext
	GrantID       string
	ProfileDigest string
	// Budget is what the call may still spend: the least of its
	// invocation's, run's and grant's remaining calls and cost (zero: no
	// limit). A provider that reports more cost fails the call.
	Budget CallBudget
	// Residency are the regions the call's handles may reach (none: no
	// limit).
	Residency []string
	// Scope is what every handle the runtime asks the broker for carries
	// (IssueScope.Apply).
	Scope IssueScope
	// SpendTokens, when set, checks (tokens 0: refused once a budget's
	// tokens are spent) or charges the call's budgets with the sampling
	// tokens an Executa call used.
	SpendTokens func(ctx context.Context, tokens int64) error
}

// CallBudget is the budget the ActionContext carries.
type CallBudget struct {
	MaxCalls      int64
	MaxCostMicros int64
}

// Refusals of the invoke path: the call never reached the plugin.
var (
	ErrPluginUnknown    = errors.New("no plugin has this name")
	ErrPluginRestarting = errors.New("plugin is restarting")
	ErrPluginFailed     = errors.New("plugin failed and is not serving")
	ErrHostShutdown     = errors.New("host shutting down")
	ErrBadInput         = errors.New("input does not match the method's input type")
	// ErrNotServing: the plugin's last health answer said it does not
	// serve calls.
	ErrNotServing            = errors.New("plugin is not serving")
	ErrMethodNotDispatchable = errors.New("method is not in a port the host serves for this plugin")
	ErrDryRunUnsupported     = errors.New("method does not support dry run")
	ErrDeadlineRequired      = errors.New("invocation needs a deadline in the future")
	// ErrCredentialUnbound: a credential the plugin requires is bound to
	// nothing in the host's config.
	ErrCredentialUnbound = errors.New("credential unbound")
	// ErrPluginQuarantined: a violation quarantined the plugin; it serves
	// no call until an operator releases it.
	ErrPluginQuarantined = errors.New("plugin is quarantined after a violation; an operator must release it")
	// ErrPolicyDenied: the policy refused the action; nothing was sent.
	ErrPolicyDenied = errors.New("policy denied the action")
	// ErrNoPolicy: the host has no policy, so it denies every action
	// (wrapped with ErrPolicyDenied). The message names the setting,
	// since a plugin author's first call meets it.
	ErrNoPolicy = errors.New("no policy is configured: every call is denied until host.policy names a policy file " +
		"(a rule such as {effect: allow, plugins: [\"*\"]} allows everything)")
)

// RestartingError is ErrPluginRestarting with when to retry.
type RestartingError struct {
	RetryAfter time.Duration
}

func (e *RestartingError) Error() string { return ErrPluginRestarting.Error() }

// Unwrap makes errors.Is(err, ErrPluginRestarting) hold.
func (e *RestartingError) Unwrap() error { return ErrPluginRestarting }
