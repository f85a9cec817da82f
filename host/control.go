package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/airlock-dev/airlock/host/executa"
	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// Control API limits.
const (
	MaxControlBody      = 4 << 20
	DefaultInvokeTimout = 60 * time.Second
	MaxInvokeTimeout    = time.Hour
)

// Host runs a set of launched plugins and serves the control API.
type Host struct {
	mu      sync.Mutex
	plugins map[string]*Plugin
	executa map[string]*executa.Supervisor
}

// NewHost returns an empty host.
func NewHost() *Host {
	return &Host{plugins: map[string]*Plugin{}, executa: map[string]*executa.Supervisor{}}
}

// ErrNameTaken: another plugin already has the name on the control API.
var ErrNameTaken = errors.New("another plugin has this name")

// AddExecuta registers an Executa plugin; its methods are tool names. A
// name must not be taken by a plugin/v1 provider or another Executa
// plugin: the control API routes by name.
func (h *Host) AddExecuta(name string, s *executa.Supervisor) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.plugins[name]; ok {
		return fmt.Errorf("%w: %s", ErrNameTaken, name)
	}
	if _, ok := h.executa[name]; ok {
		return fmt.Errorf("%w: %s", ErrNameTaken, name)
	}
	h.executa[name] = s
	return nil
}

// Add registers a launched plugin under its installed name.
func (h *Host) Add(p *Plugin) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.plugins[p.inst.Name] = p
}

// Plugin returns a plugin by name.
func (h *Host) Plugin(name string) *Plugin {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.plugins[name]
}

// Names lists the plugins.
func (h *Host) Names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.plugins)+len(h.executa))
	for n := range h.plugins {
		out = append(out, n)
	}
	for n := range h.executa {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Shutdown shuts every plugin down.
func (h *Host) Shutdown(ctx context.Context) {
	h.mu.Lock()
	ps := make([]*Plugin, 0, len(h.plugins))
	for _, p := range h.plugins {
		ps = append(ps, p)
	}
	ex := make([]*executa.Supervisor, 0, len(h.executa))
	for _, s := range h.executa {
		ex = append(ex, s)
	}
	h.mu.Unlock()
	for _, s := range ex {
		s.Shutdown()
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Shutdown(ctx) }()
	}
	wg.Wait()
}

// InvocationRequest is the control API's request body.
type InvocationRequest struct {
	Plugin  string          `json:"plugin"`
	Method  string          `json:"method"`
	Input   json.RawMessage `json:"input"`
	DryRun  bool            `json:"dry_run"`
	Timeout string          `json:"timeout"` // Go duration; default 60s
}

// Event is one NDJSON line of the control API's answer.
type Event struct {
	Event        string                 `json:"event"` // running | outcome
	InvocationID string                 `json:"invocation_id,omitempty"`
	Status       string                 `json:"status,omitempty"`
	Result       json.RawMessage        `json:"result,omitempty"`
	Diagnostics  []*pluginv1.Diagnostic `json:"diagnostics,omitempty"`
	EvidenceIDs  []string               `json:"evidence_ids,omitempty"`
	Reason       string                 `json:"reason,omitempty"`
}

// ControlHandler serves POST /v1/invocations: the answer streams as
// NDJSON, a "running" event per progress message and one "outcome".
// Refusals before the call are JSON errors with a 4xx status.
func (h *Host) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/invocations", h.invoke)
	mux.HandleFunc("GET /v1/plugins", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"plugins": h.Names()})
	})
	return mux
}

func controlError(w http.ResponseWriter, code int, errCode, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": errCode, "detail": detail})
}

func (h *Host) invoke(w http.ResponseWriter, r *http.Request) {
	var req InvocationRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		controlError(w, http.StatusBadRequest, "bad_request", "the body must be a JSON invocation request")
		return
	}
	h.mu.Lock()
	ex := h.executa[req.Plugin]
	h.mu.Unlock()
	if ex != nil {
		h.invokeExecuta(w, r, ex, req)
		return
	}
	p := h.Plugin(req.Plugin)
	if p == nil {
		controlError(w, http.StatusNotFound, "plugin_unknown", "no such plugin")
		return
	}
	md, _, err := p.method(req.Method)
	if err != nil {
		controlError(w, http.StatusNotFound, "method_not_dispatchable", err.Error())
		return
	}
	in := dynamicpb.NewMessage(md.Input())
	if len(req.Input) > 0 {
		if err := (protojson.UnmarshalOptions{}).Unmarshal(req.Input, in); err != nil {
			controlError(w, http.StatusBadRequest, "bad_input", "input does not match "+string(md.Input().FullName()))
			return
		}
	}
	timeout := DefaultInvokeTimout
	if req.Timeout != "" {
		if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout <= 0 || timeout > MaxInvokeTimeout {
			controlError(w, http.StatusBadRequest, "bad_timeout", "timeout must be a duration between 0 and 1h")
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	started := false
	emit := func(e Event) {
		if !started {
			w.WriteHeader(http.StatusOK)
			started = true
		}
		_ = enc.Encode(e)
		if flusher != nil {
			flusher.Flush()
		}
	}
	out, err := p.Invoke(r.Context(), InvokeRequest{Method: req.Method, Input: in, DryRun: req.DryRun,
		Deadline: time.Now().Add(timeout), Actor: &pluginv1.Actor{Kind: "control-api", Principal: "local"},
		OnRunning: func(m *pluginv1.ActionResult) { emit(Event{Event: "running", Diagnostics: m.GetDiagnostics()}) }})
	switch {
	case errors.Is(err, ErrPolicyDenied):
		if !started {
			controlError(w, http.StatusForbidden, "policy_denied", err.Error())
		}
		return
	case errors.Is(err, ErrDryRunUnsupported), errors.Is(err, ErrDeadlineRequired):
		controlError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	case err != nil:
		controlError(w, http.StatusServiceUnavailable, "invoke_failed", err.Error())
		return
	}
	ev := Event{Event: "outcome", InvocationID: out.InvocationID, Status: out.Status.String(),
		Diagnostics: out.Diagnostics, EvidenceIDs: out.EvidenceIDs, Reason: out.Reason}
	if out.Result != nil {
		msg := dynamicpb.NewMessage(md.Output())
		if err := proto.Unmarshal(out.Result.GetValue(), msg); err == nil {
			ev.Result, _ = protojson.Marshal(msg)
		}
	}
	emit(ev)
}

// invokeExecuta calls an Executa tool: METHOD is the tool name, input its
// arguments.
func (h *Host) invokeExecuta(w http.ResponseWriter, r *http.Request, s *executa.Supervisor, req InvocationRequest) {
	timeout := DefaultInvokeTimout
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 || d > MaxInvokeTimeout {
			controlError(w, http.StatusBadRequest, "bad_timeout", "timeout must be a duration between 0 and 1h")
			return
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	res, err := s.Invoke(ctx, executa.InvokeRequest{Tool: req.Method, Arguments: req.Input, UserID: "local"})
	switch {
	case errors.Is(err, executa.ErrUnknownTool):
		controlError(w, http.StatusNotFound, "method_not_dispatchable", "no such tool")
		return
	case err != nil:
		controlError(w, http.StatusServiceUnavailable, "invoke_failed", err.Error())
		return
	}
	ev := Event{Event: "outcome", InvocationID: res.InvokeID, Status: pluginv1.Status_STATUS_SUCCEEDED.String(), Result: res.Data}
	if !res.Success {
		ev.Status, ev.Reason = pluginv1.Status_STATUS_FAILED.String(), string(res.Error)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	_ = json.NewEncoder(w).Encode(ev)
}
