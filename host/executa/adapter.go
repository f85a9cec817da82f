package executa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/internal/strictjson"
)

// The adapter: an Executa process seen as the host's Runtime, so the
// registry, supervisor and invoke path treat it as they treat a plugin/v1
// provider.

// Add registers an Executa plugin with h and launches it under h's
// supervisor (see host.Host.Add). Its methods are its tool names. The
// host fills what every plugin shares: egress proxy, logging, and the
// evidence of credentials issued for its invokes.
func Add(h *host.Host, cfg PluginConfig, opts Options) error {
	hopts := h.Options()
	if opts.EgressProxy == "" {
		opts.EgressProxy = hopts.EgressProxy
	}
	if opts.InterceptCAFile == "" {
		opts.InterceptCAFile = hopts.InterceptCAFile
	}
	opts.NoHTTPSProxy = opts.NoHTTPSProxy || slices.Contains(hopts.HTTPSProxyOptOut, cfg.Name)
	if opts.Broker == nil {
		opts.Broker = hopts.Broker
	}
	if opts.Log == nil {
		opts.Log = hopts.Log
	}
	if opts.Redactor == nil {
		opts.Redactor = hopts.Redactor
	}
	opts.StderrLevel = hopts.StderrLevel
	opts.Sandbox, opts.Hide, opts.ProxyServe = hopts.Sandbox, hopts.Hide, hopts.ProxyServe
	opts.Record = func(typ, invocation string, data map[string]any) error {
		_, err := hopts.Record(cfg.Name, typ, invocation, data)
		return err
	}
	first := true
	return h.Add(cfg.Name, host.KindExecuta, func(ctx context.Context) (host.Runtime, error) {
		c := cfg
		c.FirstRun = first
		first = false
		p, err := Start(ctx, c, opts)
		if err != nil {
			hopts.Record(cfg.Name, "lifecycle.launch_failed", "", map[string]any{"kind": string(host.KindExecuta), "reason": err.Error()})
			if errors.Is(err, ErrInvalidManifest) {
				return nil, fmt.Errorf("%w: %w", host.ErrManifestInvalid, err)
			}
			return nil, err
		}
		data := map[string]any{"kind": string(host.KindExecuta), "protocol_version": p.Protocol, "sandbox": p.Sandbox()}
		if n := p.Manifest.Name; n != "" && n != cfg.Name {
			// The plugin calls itself otherwise; the host knows it by the
			// configured name. Kept as evidence (clipped, redacted).
			data["manifest_name"] = hopts.Redactor.String(redact.Clip(n, 128))
		}
		hopts.Record(cfg.Name, "lifecycle.launch", "", data)
		return &runtime{p: p, record: opts.Record}, nil
	})
}

// runtime is an Executa process seen as a host.Runtime.
type runtime struct {
	p      *Process
	record func(typ, invocation string, data map[string]any) error
}

var _ host.Runtime = (*runtime)(nil)

func (r *runtime) Kind() host.Kind         { return host.KindExecuta }
func (r *runtime) Protocol() string        { return r.p.Protocol }
func (r *runtime) Pid() int                { return r.p.Pid() }
func (r *runtime) Sandbox() string         { return r.p.Sandbox() }
func (r *runtime) Exited() <-chan struct{} { return r.p.Exited() }
func (r *runtime) Fault() error            { return r.p.Fault() }
func (r *runtime) Kill()                   { r.p.Kill() }

// Release has nothing to free: an Executa process's pipes and the
// goroutines reading them end with it.
func (r *runtime) Release() {}

// Shutdown revokes the plugin's handles and pass, then follows the
// Executa contract (stdin EOF, SIGTERM, SIGKILL).
func (r *runtime) Shutdown(context.Context) error {
	err := r.p.Shutdown()
	_ = r.record("lifecycle.shutdown", "", nil) // logged; a shutdown is not refused
	return err
}

// Health maps the plugin's answer: not ready yet refuses calls; no valid
// answer restarts it.
func (r *runtime) Health(ctx context.Context) error {
	err := r.p.Health(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotReady):
		return host.ErrNotServing
	default:
		return fmt.Errorf("%w: %w", host.ErrProbeFailed, err)
	}
}

// Prepare checks the tool exists and the input is a JSON object. Executa
// has no dry run and no risk classes: policies match it by plugin and
// tool name.
func (r *runtime) Prepare(req host.InvokeRequest) (host.Action, error) {
	if _, ok := r.p.Manifest.Tool(req.Method); !ok {
		return nil, fmt.Errorf("%w: no such tool", host.ErrMethodNotDispatchable)
	}
	if req.DryRun {
		return nil, fmt.Errorf("%w: Executa tools have no dry run", host.ErrDryRunUnsupported)
	}
	if err := r.p.Unbound(); err != nil {
		return nil, fmt.Errorf("%w: %w", host.ErrCredentialUnbound, err)
	}
	args := req.JSON
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return nil, fmt.Errorf("%w: the tool's arguments must be a JSON object", host.ErrBadInput)
	}
	if err := strictjson.Check(args); err != nil {
		return nil, fmt.Errorf("%w: the tool's arguments: %w", host.ErrBadInput, err)
	}
	return &action{r: r, tool: req.Method, args: args}, nil
}

type action struct {
	r    *runtime
	tool string
	args json.RawMessage
}

func (a *action) Risk() policy.Risk { return policy.RiskUnspecified }

// Run calls the tool. The plugin's {"success": false, "error": …} and any
// failure to answer are FAILED outcomes; the plugin's error object is
// returned to the caller as the result, never put in the reason.
func (a *action) Run(ctx context.Context, call host.Call) *host.Outcome {
	out := &host.Outcome{InvocationID: call.ID}
	req := InvokeRequest{InvokeID: call.ID, Deadline: call.Deadline, Tool: a.tool,
		Arguments: a.args, UserID: UserID(call.Caller, call.Actor), AppID: call.AppID, AppSlug: call.AppSlug,
		Scope: call.Scope.Apply, SpendTokens: call.SpendTokens}
	if on := call.OnRunning; on != nil {
		// As a plugin/v1 RUNNING message: one diagnostic, the host's
		// reading of the event (ProgressEvent.Diagnostic).
		red := a.r.p.opts.Redactor
		req.OnProgress = func(e ProgressEvent) { on(host.Progress{Diagnostics: []host.Diagnostic{e.Diagnostic(red)}}) }
	}
	res, err := a.r.p.Invoke(ctx, req)
	switch {
	case err != nil && ctx.Err() != nil:
		out.Status, out.Reason = host.CallFailed, host.CancelReason(ctx)
	case errors.Is(err, ErrTimeout):
		out.Status, out.Reason = host.CallFailed, "deadline passed; the call was cancelled"
	case err != nil:
		out.Status, out.Reason = host.CallFailed, executaReason(err)
		var te *ToolError
		if errors.As(err, &te) && len(te.Object) > 0 {
			out.Data, _ = json.Marshal(map[string]json.RawMessage{"error": te.Object})
		}
	case !res.Success:
		out.Status, out.Reason = host.CallFailed, "the plugin reported the tool failed"
		if len(res.Error) > 0 {
			out.Data, _ = json.Marshal(map[string]json.RawMessage{"error": res.Error})
		}
	default:
		out.Status, out.Data = host.CallSucceeded, res.Data
	}
	return out
}

// executaReason is a host-authored reason for an invoke error (never the
// plugin's own message).
func executaReason(err error) string {
	var te *ToolError
	switch {
	case errors.As(err, &te):
		return te.Error()
	case errors.Is(err, ErrPluginExited):
		return "the plugin exited during the call"
	case errors.Is(err, ErrFileTransportRefused), errors.Is(err, ErrResponseTooLarge):
		return err.Error()
	default:
		return "the call failed: " + err.Error()
	}
}

// UserID is the user_id an Executa call's sampling and storage tokens
// carry (and its "user" storage scope): the actor's id when the call is
// made for a user, else the id of the principal that asked — never a
// value the caller typed for itself. A Go caller that names neither gets
// "local".
func UserID(caller host.Principal, actor host.Actor) string {
	switch {
	case actor.Kind == "user" && actor.Principal != "":
		return actor.Principal
	case caller.ID != "":
		return caller.ID
	case actor.Principal != "":
		return actor.Principal
	}
	return "local"
}

// Facts implements host.Describer: an Executa tool declares no side
// effect; its input is the arguments object.
func (a *action) Facts() host.ActionFacts { return host.ActionFacts{InputJSON: a.args} }
