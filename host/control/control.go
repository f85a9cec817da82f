package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/internal/writedeadline"
)

// Control API limits.
const (
	MaxBody             = 4 << 20
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
	// Actor is who the call is made for, when the caller acts for
	// someone (SetActorCheck decides whether it may); none: the caller.
	Actor *ActorRef `json:"actor,omitempty"`
	// RunID, ChangeID and PlanDigest are the run context the call
	// belongs to (host.RunContext): ids of 1–128 characters of
	// [A-Za-z0-9._:-], a digest "sha256:<64 lowercase hex>".
	RunID      string `json:"run_id,omitempty"`
	ChangeID   string `json:"change_id,omitempty"`
	PlanDigest string `json:"plan_digest,omitempty"`
}

// Event is one NDJSON line of the control API's answer.
type Event struct {
	Event        string            `json:"event"` // pending | running | outcome | refused
	InvocationID string            `json:"invocation_id,omitempty"`
	Status       string            `json:"status,omitempty"`
	Result       json.RawMessage   `json:"result,omitempty"`
	Diagnostics  []host.Diagnostic `json:"diagnostics,omitempty"`
	EvidenceIDs  []string          `json:"evidence_ids,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	// Violated and Violations (outcome): the plugin tried to use
	// authority it was not given, of these kinds.
	Violated   bool     `json:"violated,omitempty"`
	Violations []string `json:"violations,omitempty"`
	// Approval, Required and ExpiresAt (pending): the call waits for this
	// approval by Required principals other than its caller, until
	// ExpiresAt (RFC 3339).
	Approval  string `json:"approval,omitempty"`
	Required  int    `json:"required,omitempty"`
	ExpiresAt string `json:"expires_at,omitempty"`
	// Error, Detail, Budget and Dimension (refused): a refusal after
	// the answer began streaming, with the code and fields its JSON error
	// would have had.
	Error     string `json:"error,omitempty"`
	Detail    string `json:"detail,omitempty"`
	Budget    string `json:"budget,omitempty"`
	Dimension string `json:"dimension,omitempty"`
}

// Handler serves the control API of one host. Make it with NewHandler.
type Handler struct {
	h   *host.Host
	mux *http.ServeMux

	mu         sync.Mutex
	installer  Installer                 // set by EnableInstall
	ledger     *ledgerAPI                // set by EnableLedger
	actorCheck ActorCheck                // set by SetActorCheck
	operator   func(host.Principal) bool // set by SetOperator
	// writeTimeout bounds each write of an answer (SetWriteTimeout).
	writeTimeout time.Duration
}

// NewHandler returns the control API of h:
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
//   - /v1/grants and /v1/approvals: access grants and approvals (see
//     EnableLedger; 404 ledger_disabled until it is called).
func NewHandler(h *host.Host) *Handler {
	c := &Handler{h: h, mux: http.NewServeMux()}
	c.mux.HandleFunc("POST /v1/invocations", c.serveInvoke)
	c.mux.HandleFunc("GET /v1/plugins", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"plugins": h.Status()})
	})
	c.evidenceRoutes()
	c.mux.HandleFunc("POST /v1/plugins", c.serveInstall)
	c.mux.HandleFunc("POST /v1/plugins/{name}/release", c.serveRelease)
	c.ledgerRoutes()
	return c
}

func (c *Handler) log() *slog.Logger {
	if l := c.h.Options().Log; l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// SetWriteTimeout bounds each write of an answer to d (zero: 30s; at
// most 10m; host.control_write_timeout). An invocation's answer streams:
// a caller that stops reading it fills the connection's buffers, and the
// write that finds them full fails at d instead of holding the call (and
// the plugin's progress messages behind it) for as long as the caller
// keeps the connection open. The call is then cancelled as if the caller
// had hung up. Set it before serving.
func (c *Handler) SetWriteTimeout(d time.Duration) { c.writeTimeout = d }

// ServeHTTP implements http.Handler.
func (c *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writedeadline.Handler(writedeadline.Bound(c.writeTimeout), c.mux).ServeHTTP(w, r)
}

// badBody answers a body that could not be decoded: 408 body_timeout
// when it did not arrive in time (host.control_write_timeout per
// 64 KiB), else 400 bad_request with detail.
func badBody(w http.ResponseWriter, err error, detail string) {
	if errors.Is(err, writedeadline.ErrBodyTimeout) {
		writeError(w, http.StatusRequestTimeout, "body_timeout", "the request body did not arrive in time (64 KiB per host.control_write_timeout)")
		return
	}
	writeError(w, http.StatusBadRequest, "bad_request", detail)
}

func writeError(w http.ResponseWriter, code int, errCode, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": errCode, "detail": detail})
}

// refusal maps an invoke-path error to its status and code.
func refusal(w http.ResponseWriter, err error) {
	if decisionRefusal(w, err) {
		return
	}
	var re *host.RestartingError
	switch {
	case errors.As(err, &re):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(re.RetryAfter.Seconds()))))
		writeError(w, http.StatusServiceUnavailable, "plugin_restarting", "the plugin is restarting; retry later")
	case errors.Is(err, host.ErrPluginUnknown):
		writeError(w, http.StatusNotFound, "plugin_unknown", "no such plugin")
	case errors.Is(err, host.ErrMethodNotDispatchable):
		writeError(w, http.StatusNotFound, "method_not_dispatchable", err.Error())
	case errors.Is(err, host.ErrBadInput):
		writeError(w, http.StatusBadRequest, "bad_input", err.Error())
	case errors.Is(err, host.ErrDryRunUnsupported), errors.Is(err, host.ErrDeadlineRequired):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, host.ErrPolicyDenied):
		writeError(w, http.StatusForbidden, "policy_denied", err.Error())
	case errors.Is(err, host.ErrPluginFailed):
		writeError(w, http.StatusServiceUnavailable, "plugin_failed", err.Error())
	case errors.Is(err, host.ErrCredentialUnbound):
		writeError(w, http.StatusServiceUnavailable, "credential_unbound", err.Error())
	case errors.Is(err, host.ErrNotServing):
		writeError(w, http.StatusServiceUnavailable, "plugin_not_serving", "the plugin reports it is not serving")
	case errors.Is(err, evidence.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "evidence_unavailable", err.Error())
	case errors.Is(err, host.ErrHostShutdown):
		writeError(w, http.StatusServiceUnavailable, "host_shutting_down", "the host is shutting down")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "invoke_refused", "the call ended before it reached the plugin")
	default:
		writeError(w, http.StatusInternalServerError, "internal", "the host could not run the call")
	}
}

func (c *Handler) serveInvoke(w http.ResponseWriter, r *http.Request) {
	var req InvocationRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		badBody(w, err, "the body must be a JSON invocation request")
		return
	}
	timeout := DefaultInvokeTimout
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 || d > MaxInvokeTimeout {
			writeError(w, http.StatusBadRequest, "bad_timeout", "timeout must be a duration between 0 and 1h")
			return
		}
		timeout = d
	}
	caller, ok := CallerFrom(r.Context())
	if !ok {
		// Authenticate names every caller; a handler served without it
		// serves no one.
		writeError(w, http.StatusUnauthorized, "unauthenticated", "the control API names no caller for this request")
		return
	}
	run, err := req.runContext()
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_run_context", err.Error())
		return
	}
	actor, ok := c.actor(w, caller, req.Actor)
	if !ok {
		return
	}
	log := c.log().With("principal", caller.ID, "actor_kind", actor.Kind, "actor", actor.Principal,
		"run_id", run.RunID, "change_id", run.ChangeID, "plugin", req.Plugin)
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
	deadline := time.Now().Add(timeout)
	out, err := c.h.Invoke(r.Context(), req.Plugin, host.InvokeRequest{Method: req.Method, JSON: req.Input, DryRun: req.DryRun,
		AppID: req.AppID, AppSlug: req.AppSlug,
		Deadline: deadline, Caller: caller, Actor: actor, Run: run,
		OnRunning: func(m host.Progress) { emit(Event{Event: "running", Diagnostics: m.Diagnostics}) },
		OnPending: func(p host.ApprovalPending) {
			log.Info("control API invocation waits for approval", "approval", p.ApprovalID, "required", p.Required)
			emit(Event{Event: "pending", Approval: p.ApprovalID, Required: p.Required, ExpiresAt: p.ExpiresAt.UTC().Format(time.RFC3339)})
		}})
	if err != nil {
		log.Info("control API invocation refused before an outcome")
		if !started {
			w.Header().Set("Content-Type", "application/json")
			refusal(w, err)
		} else {
			// The answer already streams (a pending event): the refusal is
			// its last event, with the code it would have had.
			emit(refusedEvent(err))
		}
		return
	}
	log.Info("control API invocation", "invocation_id", out.InvocationID, "status", string(out.Status))
	// The outcome is delivered within the call's own timeout, however
	// large it is and however slowly the caller reads, and by the
	// call's deadline and one write timeout: a call that answered late
	// in an hour's timeout does not have its outcome held for another.
	limit := time.Now().Add(timeout)
	if by := deadline.Add(writedeadline.Bound(c.writeTimeout)); by.Before(limit) {
		limit = by
	}
	writedeadline.SetLimit(w, limit)
	emit(Event{Event: "outcome", InvocationID: out.InvocationID, Status: string(out.Status), Result: out.Data,
		Diagnostics: out.Diagnostics, EvidenceIDs: out.EvidenceIDs, Reason: out.Reason,
		Violated: out.Violated, Violations: out.Violations})
}
