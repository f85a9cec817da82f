package control

import (
	"encoding/json"
	"errors"
	"net/http"

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
