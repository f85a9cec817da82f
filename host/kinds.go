package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/airlock-dev/airlock/host/policy"

	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/strictjson"
	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// AddProvider registers an installed plugin/v1 provider and launches it
// under the host's supervisor (see Add).
func (h *Host) AddProvider(inst Installed) error {
	return h.Add(inst.Name, KindPluginV1, func(ctx context.Context) (Runtime, error) {
		return Launch(ctx, inst, h.opts)
	})
}

// AddExecuta registers an Executa plugin and launches it under the host's
// supervisor (see Add). Its methods are its tool names. The host fills
// what every plugin shares: egress proxy, logging, and the evidence of
// credentials issued for its invokes.
func (h *Host) AddExecuta(cfg executa.PluginConfig, opts executa.Options) error {
	if opts.EgressProxy == "" {
		opts.EgressProxy = h.opts.EgressProxy
	}
	if opts.InterceptCAFile == "" {
		opts.InterceptCAFile = h.opts.InterceptCAFile
	}
	opts.NoHTTPSProxy = opts.NoHTTPSProxy || slices.Contains(h.opts.HTTPSProxyOptOut, cfg.Name)
	if opts.Broker == nil {
		opts.Broker = h.opts.Broker
	}
	if opts.Log == nil {
		opts.Log = h.opts.Log
	}
	if opts.Redactor == nil {
		opts.Redactor = h.opts.Redactor
	}
	opts.StderrLevel = h.opts.StderrLevel
	opts.Sandbox, opts.Hide, opts.ProxyServe = h.opts.Sandbox, h.opts.Hide, h.opts.ProxyServe
	opts.Record = func(typ, invocation string, data map[string]any) error {
		_, err := h.opts.record(cfg.Name, typ, invocation, data)
		return err
	}
	first := true
	return h.Add(cfg.Name, KindExecuta, func(ctx context.Context) (Runtime, error) {
		c := cfg
		c.FirstRun = first
		first = false
		p, err := executa.Start(ctx, c, opts)
		if err != nil {
			h.opts.record(cfg.Name, "lifecycle.launch_failed", "", map[string]any{"kind": string(KindExecuta), "reason": err.Error()})
			if errors.Is(err, executa.ErrInvalidManifest) {
				return nil, fmt.Errorf("%w: %w", ErrManifestInvalid, err)
			}
			return nil, err
		}
		data := map[string]any{"kind": string(KindExecuta), "protocol_version": p.Protocol, "sandbox": p.Sandbox()}
		if n := p.Manifest.Name; n != "" && n != cfg.Name {
			// The plugin calls itself otherwise; the host knows it by the
			// configured name. Kept as evidence (clipped, redacted).
			data["manifest_name"] = h.opts.Redactor.String(clip(n, 128))
		}
		h.opts.record(cfg.Name, "lifecycle.launch", "", data)
		return &executaRuntime{p: p, record: opts.Record}, nil
	})
}

// executaRuntime is an Executa process seen as a Runtime.
type executaRuntime struct {
	p      *executa.Process
	record func(typ, invocation string, data map[string]any) error
}

var (
	_ Runtime = (*executaRuntime)(nil)
	_ Runtime = (*Plugin)(nil)
)

func (r *executaRuntime) Kind() Kind              { return KindExecuta }
func (r *executaRuntime) Protocol() string        { return r.p.Protocol }
func (r *executaRuntime) Pid() int                { return r.p.Pid() }
func (r *executaRuntime) Sandbox() string         { return r.p.Sandbox() }
func (r *executaRuntime) Exited() <-chan struct{} { return r.p.Exited() }
func (r *executaRuntime) Fault() error            { return r.p.Fault() }
func (r *executaRuntime) Kill()                   { r.p.Kill() }

// Release has nothing to free: an Executa process's pipes and the
// goroutines reading them end with it.
func (r *executaRuntime) Release() {}

// Shutdown follows the Executa contract (stdin EOF, SIGTERM, SIGKILL).
func (r *executaRuntime) Shutdown(context.Context) error {
	r.p.Shutdown()
	_ = r.record("lifecycle.shutdown", "", nil) // logged; a shutdown is not refused
	return nil
}

// Health maps the plugin's answer: not ready yet refuses calls; no valid
// answer restarts it.
func (r *executaRuntime) Health(ctx context.Context) error {
	err := r.p.Health(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, executa.ErrNotReady):
		return ErrNotServing
	default:
		return fmt.Errorf("%w: %w", ErrProbeFailed, err)
	}
}

// Prepare checks the tool exists and the input is a JSON object. Executa
// has no dry run and no risk classes: policies match it by plugin and
// tool name.
func (r *executaRuntime) Prepare(req InvokeRequest) (Action, error) {
	if _, ok := r.p.Manifest.Tool(req.Method); !ok {
		return nil, fmt.Errorf("%w: no such tool", ErrMethodNotDispatchable)
	}
	if req.DryRun {
		return nil, fmt.Errorf("%w: Executa tools have no dry run", ErrDryRunUnsupported)
	}
	if err := r.p.Unbound(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredentialUnbound, err)
	}
	args := req.JSON
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return nil, fmt.Errorf("%w: the tool's arguments must be a JSON object", ErrBadInput)
	}
	if err := strictjson.Check(args); err != nil {
		return nil, fmt.Errorf("%w: the tool's arguments: %w", ErrBadInput, err)
	}
	return &executaAction{r: r, tool: req.Method, args: args}, nil
}

type executaAction struct {
	r    *executaRuntime
	tool string
	args json.RawMessage
}

func (a *executaAction) Risk() policy.Risk { return policy.RiskUnspecified }

// Run calls the tool. The plugin's {"success": false, "error": …} and any
// failure to answer are FAILED outcomes; the plugin's error object is
// returned to the caller as the result, never put in the reason.
func (a *executaAction) Run(ctx context.Context, call Call) *Outcome {
	out := &Outcome{InvocationID: call.ID}
	res, err := a.r.p.Invoke(ctx, executa.InvokeRequest{InvokeID: call.ID, Deadline: call.Deadline, Tool: a.tool,
		Arguments: a.args, UserID: principal(call.Actor), AppID: call.AppID, AppSlug: call.AppSlug})
	switch {
	case err != nil && ctx.Err() != nil:
		out.Status, out.Reason = pluginv1.Status_STATUS_FAILED, cancelReason(ctx)
	case errors.Is(err, executa.ErrTimeout):
		out.Status, out.Reason = pluginv1.Status_STATUS_FAILED, "deadline passed; the call was cancelled"
	case err != nil:
		out.Status, out.Reason = pluginv1.Status_STATUS_FAILED, executaReason(err)
		var te *executa.ToolError
		if errors.As(err, &te) && len(te.Object) > 0 {
			out.Data, _ = json.Marshal(map[string]json.RawMessage{"error": te.Object})
		}
	case !res.Success:
		out.Status, out.Reason = pluginv1.Status_STATUS_FAILED, "the plugin reported the tool failed"
		if len(res.Error) > 0 {
			out.Data, _ = json.Marshal(map[string]json.RawMessage{"error": res.Error})
		}
	default:
		out.Status, out.Data = pluginv1.Status_STATUS_SUCCEEDED, res.Data
	}
	return out
}

// executaReason is a host-authored reason for an invoke error (never the
// plugin's own message).
func executaReason(err error) string {
	var te *executa.ToolError
	switch {
	case errors.As(err, &te):
		return te.Error()
	case errors.Is(err, executa.ErrPluginExited):
		return "the plugin exited during the call"
	case errors.Is(err, executa.ErrFileTransportRefused):
		return executa.ErrFileTransportRefused.Error()
	default:
		return "the call failed: " + err.Error()
	}
}

func principal(a *pluginv1.Actor) string {
	if a.GetPrincipal() != "" {
		return a.GetPrincipal()
	}
	return "local"
}
