package host

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/host/evidence"
	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// Control API limits.
const (
	MaxControlBody      = 4 << 20
	DefaultInvokeTimout = 60 * time.Second
	MaxInvokeTimeout    = time.Hour
)

// InvocationRequest is the control API's request body.
type InvocationRequest struct {
	Plugin  string          `json:"plugin"`
	Method  string          `json:"method"` // plugin/v1 full method, or an Executa tool name
	Input   json.RawMessage `json:"input"`
	DryRun  bool            `json:"dry_run"`
	Timeout string          `json:"timeout"` // Go duration; default 60s
	// AppID and AppSlug give an Executa call the App context the caller
	// attests (the storage_token's app claims, for scope "app").
	AppID   string `json:"app_id,omitempty"`
	AppSlug string `json:"app_slug,omitempty"`
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

// ControlHandler serves the control API:
//
//   - POST /v1/invocations: the answer streams as NDJSON, a "running"
//     event per progress message and one "outcome" (a plugin's own
//     failure is a FAILED outcome with status 200). Refusals before the
//     call are JSON errors {"error": code, "detail": …} with a 4xx/5xx
//     status.
//   - GET /v1/plugins: every plugin with its kind, state, protocol
//     version, restarts, last failure and health.
//   - POST /v1/plugins {"dir": …}: install a provider package while the
//     host runs (see EnableInstall) and launch it.
//   - GET /v1/evidence/head: the latest signed checkpoint of the evidence
//     log; GET /v1/evidence/jwks.json: the key that signs them.
func (h *Host) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/invocations", h.serveInvoke)
	mux.HandleFunc("GET /v1/plugins", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"plugins": h.Status()})
	})
	h.evidenceRoutes(mux)
	return mux
}

func controlError(w http.ResponseWriter, code int, errCode, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": errCode, "detail": detail})
}

// refusal maps an invoke-path error to its status and code.
func refusal(w http.ResponseWriter, err error) {
	var re *RestartingError
	switch {
	case errors.As(err, &re):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(re.RetryAfter.Seconds()))))
		controlError(w, http.StatusServiceUnavailable, "plugin_restarting", "the plugin is restarting; retry later")
	case errors.Is(err, ErrPluginUnknown):
		controlError(w, http.StatusNotFound, "plugin_unknown", "no such plugin")
	case errors.Is(err, ErrMethodNotDispatchable):
		controlError(w, http.StatusNotFound, "method_not_dispatchable", err.Error())
	case errors.Is(err, ErrBadInput):
		controlError(w, http.StatusBadRequest, "bad_input", err.Error())
	case errors.Is(err, ErrDryRunUnsupported), errors.Is(err, ErrDeadlineRequired):
		controlError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, ErrPolicyDenied):
		controlError(w, http.StatusForbidden, "policy_denied", err.Error())
	case errors.Is(err, ErrPluginFailed):
		controlError(w, http.StatusServiceUnavailable, "plugin_failed", err.Error())
	case errors.Is(err, ErrCredentialUnbound):
		controlError(w, http.StatusServiceUnavailable, "credential_unbound", err.Error())
	case errors.Is(err, ErrNotServing):
		controlError(w, http.StatusServiceUnavailable, "plugin_not_serving", "the plugin reports it is not serving")
	case errors.Is(err, evidence.ErrUnavailable):
		controlError(w, http.StatusServiceUnavailable, "evidence_unavailable", err.Error())
	case errors.Is(err, ErrHostShutdown):
		controlError(w, http.StatusServiceUnavailable, "host_shutting_down", "the host is shutting down")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		controlError(w, http.StatusServiceUnavailable, "invoke_refused", "the call ended before it reached the plugin")
	default:
		controlError(w, http.StatusInternalServerError, "internal", "the host could not run the call")
	}
}

func (h *Host) serveInvoke(w http.ResponseWriter, r *http.Request) {
	var req InvocationRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		controlError(w, http.StatusBadRequest, "bad_request", "the body must be a JSON invocation request")
		return
	}
	timeout := DefaultInvokeTimout
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 || d > MaxInvokeTimeout {
			controlError(w, http.StatusBadRequest, "bad_timeout", "timeout must be a duration between 0 and 1h")
			return
		}
		timeout = d
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
	out, err := h.Invoke(r.Context(), req.Plugin, InvokeRequest{Method: req.Method, JSON: req.Input, DryRun: req.DryRun,
		AppID: req.AppID, AppSlug: req.AppSlug,
		Deadline: time.Now().Add(timeout), Actor: &pluginv1.Actor{Kind: "control-api", Principal: "local"},
		OnRunning: func(m *pluginv1.ActionResult) { emit(Event{Event: "running", Diagnostics: m.GetDiagnostics()}) }})
	if err != nil {
		if !started {
			w.Header().Set("Content-Type", "application/json")
			refusal(w, err)
		}
		return
	}
	emit(Event{Event: "outcome", InvocationID: out.InvocationID, Status: out.Status.String(), Result: out.Data,
		Diagnostics: out.Diagnostics, EvidenceIDs: out.EvidenceIDs, Reason: out.Reason})
}
