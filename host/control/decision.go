package control

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
)

// decisionRefusal answers the decision point's refusals (budgets,
// grants, approvals, residency, quarantine); false when err is none of
// them.
func decisionRefusal(w http.ResponseWriter, err error) bool {
	var be *broker.BudgetExhaustedError
	switch {
	case errors.As(err, &be):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "budget_exhausted", "budget": be.Key, "dimension": be.Dimension,
			"detail": be.Error()})
	case errors.Is(err, host.ErrGrantRequired):
		writeError(w, http.StatusForbidden, "grant_required", err.Error())
	case errors.Is(err, host.ErrApprovalDenied):
		writeError(w, http.StatusForbidden, "approval_denied", err.Error())
	case errors.Is(err, host.ErrApprovalExpired):
		writeError(w, http.StatusForbidden, "approval_expired", err.Error())
	case errors.Is(err, host.ErrApprovalInputChanged):
		writeError(w, http.StatusConflict, "approval_input_changed", err.Error())
	case errors.Is(err, broker.ErrResidencyViolation):
		writeError(w, http.StatusForbidden, "residency_violation", err.Error())
	case errors.Is(err, host.ErrPluginQuarantined):
		writeError(w, http.StatusServiceUnavailable, "plugin_quarantined", err.Error())
	case errors.Is(err, host.ErrLedgerUnavailable):
		writeError(w, http.StatusServiceUnavailable, "ledger_unavailable", err.Error())
	default:
		return false
	}
	return true
}

// refusedEvent is the refusal err as the last event of an answer that
// already streams: the code, detail and fields refusal would have
// written.
func refusedEvent(err error) Event {
	rec := httptest.NewRecorder()
	refusal(rec, err)
	var body struct {
		Error, Detail, Budget, Dimension string
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	return Event{Event: "refused", Error: body.Error, Detail: body.Detail, Budget: body.Budget, Dimension: body.Dimension}
}

// SetOperator sets which principals are operators for the routes only
// operators use: installing a plugin, installing and removing a port,
// and releasing a quarantined plugin. (EnableLedger takes its own for
// grants.) Without one, those routes refuse every caller.
func (c *Handler) SetOperator(operator func(host.Principal) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.operator = operator
}

// operatorOnly answers a caller that is not an operator (401 without a
// principal, 403 not_an_operator) and reports whether it may go on;
// what names the act in the refusal.
func (c *Handler) operatorOnly(w http.ResponseWriter, r *http.Request, what string) (host.Principal, bool) {
	c.mu.Lock()
	operator := c.operator
	c.mu.Unlock()
	caller, ok := CallerFrom(r.Context())
	if !ok || caller.ID == "" {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "the control API authenticated no principal for this request")
		return host.Principal{}, false
	}
	if operator == nil || !operator(caller) {
		writeError(w, http.StatusForbidden, "not_an_operator", "only an operator (host.control_operators) "+what)
		return host.Principal{}, false
	}
	return caller, true
}

// serveRelease is POST /v1/plugins/{name}/release: an operator lifts a
// plugin's quarantine.
func (c *Handler) serveRelease(w http.ResponseWriter, r *http.Request) {
	caller, ok := c.operatorOnly(w, r, "releases a quarantined plugin")
	if !ok {
		return
	}
	released, err := c.h.Release(r.PathValue("name"), caller.ID)
	switch {
	case errors.Is(err, host.ErrPluginUnknown):
		writeError(w, http.StatusNotFound, "plugin_unknown", "no such plugin")
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "release_failed", err.Error())
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"plugin": r.PathValue("name"), "released": released})
	}
}
