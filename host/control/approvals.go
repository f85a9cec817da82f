package control

import (
	"net/http"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
)

// DecisionRequest is the (optional) body of POST
// /v1/approvals/{id}/approve and /deny. Uses and GrantTTL apply to the
// vote that grants the approval: with Uses above 1 (or the approval's own
// Uses above 1 when the vote names none) the granted approval becomes an
// access grant for that many calls with the approved request digest,
// until GrantTTL from now (at most broker.MaxAccessGrantTTL), or the
// approval's expiry when GrantTTL is empty. An approver may narrow the
// uses the approval asked for, never widen them.
type DecisionRequest struct {
	Uses     int    `json:"uses,omitempty"`
	GrantTTL string `json:"grant_ttl,omitempty"`
}

func (c *Handler) listApprovals(w http.ResponseWriter, r *http.Request, api *ledgerAPI, _ host.Principal) {
	as, err := api.l.ListApprovals(r.Context())
	if err != nil {
		ledgerRefusal(w, err)
		return
	}
	if as == nil {
		as = []*broker.Approval{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": as})
}

func (c *Handler) showApproval(w http.ResponseWriter, r *http.Request, api *ledgerAPI, _ host.Principal) {
	a, err := api.l.GetApproval(r.Context(), r.PathValue("id"))
	if err != nil {
		ledgerRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approval": a})
}

// decide serves approve (true) or deny (false). The ledger decides
// atomically; the route records the vote (approval.decided) and, when it
// changed the approval's state, approval.granted or approval.denied, and
// turns a granted approval for more than one use into an access grant.
func (c *Handler) decide(approve bool) ledgerHandler {
	return func(w http.ResponseWriter, r *http.Request, api *ledgerAPI, caller host.Principal) {
		var req DecisionRequest
		if err := decodeStrict(r, &req, true); err != nil {
			badBody(w, err, "the body must be empty or {\"uses\": N, \"grant_ttl\": duration}")
			return
		}
		var ttl time.Duration
		if req.GrantTTL != "" {
			d, err := time.ParseDuration(req.GrantTTL)
			if err != nil || d <= 0 || d > broker.MaxAccessGrantTTL {
				writeError(w, http.StatusBadRequest, "bad_request", "grant_ttl: a duration above 0 and at most "+broker.MaxAccessGrantTTL.String())
				return
			}
			ttl = d
		}
		if req.Uses < 0 || (!approve && (req.Uses != 0 || ttl != 0)) {
			writeError(w, http.StatusBadRequest, "bad_request", "uses and grant_ttl: only on an approve, uses not negative")
			return
		}
		if req.Uses > MaxApprovalUses {
			writeError(w, http.StatusBadRequest, "bad_request", "uses: at most "+strconv.Itoa(MaxApprovalUses)+
				" calls per approval (issue a grant for more)")
			return
		}
		id := r.PathValue("id")
		if req.Uses > 0 {
			// Checked before the vote, so a refused one counts nothing.
			cur, err := api.l.GetApproval(r.Context(), id)
			if err != nil {
				ledgerRefusal(w, err)
				return
			}
			if cur.Uses > 0 && req.Uses > cur.Uses {
				writeError(w, http.StatusBadRequest, "bad_request", "uses: more than the approval asked for")
				return
			}
		}
		a, err := api.l.DecideApproval(r.Context(), id, caller.ID, approve, api.now())
		if err != nil {
			ledgerRefusal(w, err)
			return
		}
		opts := c.h.Options()
		decision := "deny"
		if approve {
			decision = "approve"
		}
		if _, err := opts.Record(a.Plugin, "approval.decided", "", map[string]any{"approval_id": a.ID, "approver": caller.ID,
			"decision": decision, "state": a.State, "approvals": len(a.Approvers), "required": a.Required}); err != nil {
			ledgerRefusal(w, err)
			return
		}
		switch a.State {
		case broker.ApprovalDenied:
			if _, err := opts.Record(a.Plugin, "approval.denied", "", map[string]any{"approval_id": a.ID, "denier": a.Denier,
				"request_digest": a.RequestDigest}); err != nil {
				ledgerRefusal(w, err)
				return
			}
		case broker.ApprovalGranted:
			uses := a.Uses
			if req.Uses > 0 {
				uses = req.Uses
			}
			if uses > 1 {
				if err := c.grantFromApproval(r, api, caller, a, uses, ttl); err != nil {
					ledgerRefusal(w, err)
					return
				}
			}
			data := map[string]any{"approval_id": a.ID, "approvers": a.Approvers, "request_digest": a.RequestDigest}
			if a.GrantID != "" {
				data["grant_id"] = a.GrantID
			}
			if _, err := opts.Record(a.Plugin, "approval.granted", "", data); err != nil {
				ledgerRefusal(w, err)
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"approval": a})
	}
}

// MaxApprovalUses bounds how many calls one approval may become: an
// approval is a person's look at one request, not standing authority (an
// operator issues a grant for that).
const MaxApprovalUses = 100

// grantFromApproval issues the access grant a granted approval for uses
// calls becomes: for the requester (and actor) and only the approved
// request digest, plugin and method (and run), issued by the approver
// whose vote granted it; a.GrantID names it.
func (c *Handler) grantFromApproval(r *http.Request, api *ledgerAPI, caller host.Principal, a *broker.Approval, uses int, ttl time.Duration) error {
	now := api.now().UTC()
	notAfter := a.ExpiresAt.UTC()
	if ttl > 0 {
		notAfter = now.Add(ttl)
	}
	g := &broker.AccessGrant{ID: broker.NewAccessGrantID(), Principal: a.Requester, Actor: a.Actor, Plugins: []string{a.Plugin},
		Methods: []string{a.Method}, RunID: a.RunID, RequestDigest: a.RequestDigest, Uses: uses, FromApproval: a.ID,
		IssuedBy: caller.ID, IssuedAt: now, NotAfter: notAfter}
	if err := c.putGrant(r.Context(), api, g); err != nil {
		return err
	}
	a.GrantID, a.Uses = g.ID, uses
	return api.l.PutApproval(r.Context(), a)
}
