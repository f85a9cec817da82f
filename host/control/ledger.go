package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/evidence"
)

// Ledger route bounds.
const (
	// MaxLedgerBody bounds a grant or approval request body.
	MaxLedgerBody = 64 << 10
	// MaxGrantList bounds each list of a grant (plugins, methods,
	// residency).
	MaxGrantList = 64
	// MaxLedgerName bounds each name or digest in a grant.
	MaxLedgerName = 256
)

// ledgerAPI is what EnableLedger set.
type ledgerAPI struct {
	l        broker.Ledger
	operator func(host.Principal) bool
	revoked  func(id string) // SetGrantRevoked
	now      func() time.Time
}

// EnableLedger serves the access grants and approvals in l:
//
//   - GET /v1/grants, GET /v1/grants/{id} (with its spend): any
//     authenticated principal.
//   - POST /v1/grants (issue), POST /v1/grants/{id}/revoke: principals
//     operator approves of only (403 not_an_operator otherwise).
//   - GET /v1/approvals, GET /v1/approvals/{id}, POST
//     /v1/approvals/{id}/approve and /deny: any authenticated principal;
//     the ledger refuses the requester (self_approval), one not eligible
//     (not_eligible), a second vote (already_approved) and a decided or
//     expired approval (approval_decided, approval_expired).
//
// Every request needs the principal the authentication put in its
// context (WithCaller); without one it is answered 401. Issues,
// revocations and decisions are recorded as host-authored evidence.
func (c *Handler) EnableLedger(l broker.Ledger, operator func(host.Principal) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if operator == nil {
		operator = func(host.Principal) bool { return false }
	}
	var revoked func(string)
	if c.ledger != nil {
		revoked = c.ledger.revoked
	}
	c.ledger = &ledgerAPI{l: l, operator: operator, revoked: revoked, now: time.Now}
}

// SetGrantRevoked sets fn to run after each successful revocation of an
// access grant, with its id — also when it was revoked already, or the
// store could not yet confirm the revocation on its replicas: the host
// cancels its invocations in flight under the grant (and revokes their
// handles) there. Call it after EnableLedger.
func (c *Handler) SetGrantRevoked(fn func(id string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ledger != nil {
		// A copy: a request in flight keeps the one it read.
		api := *c.ledger
		api.revoked = fn
		c.ledger = &api
	}
}

func (c *Handler) ledgerRoutes() {
	c.mux.HandleFunc("GET /v1/grants", c.withLedger(c.listGrants))
	c.mux.HandleFunc("POST /v1/grants", c.withLedger(c.issueGrant))
	c.mux.HandleFunc("GET /v1/grants/{id}", c.withLedger(c.showGrant))
	c.mux.HandleFunc("POST /v1/grants/{id}/revoke", c.withLedger(c.revokeGrant))
	c.mux.HandleFunc("GET /v1/approvals", c.withLedger(c.listApprovals))
	c.mux.HandleFunc("GET /v1/approvals/{id}", c.withLedger(c.showApproval))
	c.mux.HandleFunc("POST /v1/approvals/{id}/approve", c.withLedger(c.decide(true)))
	c.mux.HandleFunc("POST /v1/approvals/{id}/deny", c.withLedger(c.decide(false)))
}

// ledgerHandler serves one ledger route for an authenticated caller.
type ledgerHandler func(w http.ResponseWriter, r *http.Request, api *ledgerAPI, caller host.Principal)

func (c *Handler) withLedger(h ledgerHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		api := c.ledger
		c.mu.Unlock()
		if api == nil {
			writeError(w, http.StatusNotFound, "ledger_disabled", "this host keeps no access grants or approvals")
			return
		}
		caller, ok := CallerFrom(r.Context())
		if !ok || caller.ID == "" {
			writeError(w, http.StatusUnauthorized, "unauthenticated", "the control API authenticated no principal for this request")
			return
		}
		h(w, r, api, caller)
	}
}

// GrantView is an access grant as the control API shows it: the record
// and its state (live, expired or revoked) at the time of the answer.
type GrantView struct {
	*broker.AccessGrant
	State string `json:"state"`
}

// Grant states.
const (
	GrantLive    = "live"
	GrantExpired = "expired"
	GrantRevoked = "revoked"
)

func grantView(g *broker.AccessGrant, now time.Time) GrantView {
	state := GrantLive
	switch {
	case !g.RevokedAt.IsZero():
		state = GrantRevoked
	case !now.Before(g.NotAfter):
		state = GrantExpired
	}
	return GrantView{AccessGrant: g, State: state}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (c *Handler) listGrants(w http.ResponseWriter, r *http.Request, api *ledgerAPI, _ host.Principal) {
	gs, err := api.l.ListAccessGrants(r.Context())
	if err != nil {
		ledgerRefusal(w, err)
		return
	}
	now := api.now()
	views := make([]GrantView, 0, len(gs))
	for _, g := range gs {
		views = append(views, grantView(g, now))
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": views})
}

func (c *Handler) showGrant(w http.ResponseWriter, r *http.Request, api *ledgerAPI, _ host.Principal) {
	g, err := api.l.GetAccessGrant(r.Context(), r.PathValue("id"))
	if err != nil {
		ledgerRefusal(w, err)
		return
	}
	spent, err := api.l.Spent(r.Context(), broker.BudgetKeyGrant(g.ID))
	if err != nil {
		ledgerRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"grant": grantView(g, api.now()), "spent": spent})
}

// GrantRequest is the body of POST /v1/grants. Exactly one of TTL (a Go
// duration) and NotAfter; at most broker.MaxAccessGrantTTL from now.
type GrantRequest struct {
	Principal   string        `json:"principal,omitempty"`
	Actor       string        `json:"actor,omitempty"`
	Plugins     []string      `json:"plugins,omitempty"`
	Methods     []string      `json:"methods,omitempty"`
	RiskCeiling string        `json:"risk_ceiling,omitempty"`
	TTL         string        `json:"ttl,omitempty"`
	NotAfter    time.Time     `json:"not_after,omitzero"`
	Budget      broker.Limits `json:"budget,omitzero"`
	Residency   []string      `json:"residency,omitempty"`
	PlanDigest  string        `json:"plan_digest,omitempty"`
	RunID       string        `json:"run_id,omitempty"`
}

// grant checks req and returns the grant it asks for; its error names the
// field, never the value.
func (req *GrantRequest) grant(now time.Time) (*broker.AccessGrant, error) {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if req.Principal == "" && req.Actor == "" {
		bad("principal or actor: at least one is required")
	}
	if len(req.Plugins) == 0 && req.RiskCeiling == "" {
		bad("plugins or risk_ceiling: at least one is required")
	}
	for _, f := range []struct {
		name string
		v    string
	}{{"principal", req.Principal}, {"actor", req.Actor}, {"plan_digest", req.PlanDigest}, {"run_id", req.RunID}} {
		if f.v != "" && !validLedgerName(f.v) {
			bad("%s: at most %d printable characters, no spaces", f.name, MaxLedgerName)
		}
	}
	if kind, id, ok := strings.Cut(req.Actor, ":"); req.Actor != "" && (!ok || kind == "" || id == "") {
		bad("actor: kind:id")
	}
	for _, f := range []struct {
		name string
		v    []string
	}{{"plugins", req.Plugins}, {"methods", req.Methods}, {"residency", req.Residency}} {
		if len(f.v) > MaxGrantList {
			bad("%s: at most %d entries", f.name, MaxGrantList)
		}
		for i, v := range f.v {
			if !validLedgerName(v) {
				bad("%s[%d]: a name of at most %d printable characters, no spaces", f.name, i, MaxLedgerName)
			}
		}
	}
	if req.RiskCeiling != "" && !broker.ValidRisk(req.RiskCeiling) {
		bad("risk_ceiling: read, low, write or privileged")
	}
	if b := req.Budget; b.Calls < 0 || b.CostMicros < 0 || b.EgressRequests < 0 || b.EgressBytes < 0 || b.Tokens < 0 {
		bad("budget: no negative limit")
	}
	notAfter := req.NotAfter
	switch {
	case req.TTL != "" && !notAfter.IsZero():
		bad("ttl and not_after: one, not both")
	case req.TTL != "":
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 || d > broker.MaxAccessGrantTTL {
			bad("ttl: a duration above 0 and at most %s", broker.MaxAccessGrantTTL)
		}
		notAfter = now.Add(d)
	case notAfter.IsZero():
		bad("ttl or not_after: one is required")
	case !notAfter.After(now) || notAfter.After(now.Add(broker.MaxAccessGrantTTL)):
		bad("not_after: in the future, at most %s from now", broker.MaxAccessGrantTTL)
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return &broker.AccessGrant{ID: broker.NewAccessGrantID(), Principal: req.Principal, Actor: req.Actor, Plugins: req.Plugins,
		Methods: req.Methods, RiskCeiling: req.RiskCeiling, Budget: req.Budget, Residency: req.Residency,
		PlanDigest: req.PlanDigest, RunID: req.RunID, IssuedAt: now, NotAfter: notAfter.UTC()}, nil
}

// validLedgerName: 1 to MaxLedgerName printable ASCII characters, no
// spaces.
func validLedgerName(s string) bool {
	if s == "" || len(s) > MaxLedgerName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// decodeStrict decodes a JSON body of at most MaxLedgerBody, refusing
// unknown fields; an empty body is the zero value when empty is allowed.
func decodeStrict(r *http.Request, v any, emptyOK bool) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxLedgerBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) && emptyOK {
		return nil
	}
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	return err
}

func (c *Handler) issueGrant(w http.ResponseWriter, r *http.Request, api *ledgerAPI, caller host.Principal) {
	if !api.operator(caller) {
		writeError(w, http.StatusForbidden, "not_an_operator", "only an operator principal issues access grants")
		return
	}
	var req GrantRequest
	if err := decodeStrict(r, &req, false); err != nil {
		badBody(w, err, "the body must be a JSON grant request")
		return
	}
	g, err := req.grant(api.now().UTC())
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	g.IssuedBy = caller.ID
	if err := c.putGrant(r.Context(), api, g); err != nil {
		ledgerRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"grant": grantView(g, api.now())})
}

// putGrant stores g and records grant.issued. A grant whose record could
// not be written is revoked again: no grant works without its evidence.
func (c *Handler) putGrant(ctx context.Context, api *ledgerAPI, g *broker.AccessGrant) error {
	if err := api.l.PutAccessGrant(ctx, g); err != nil {
		return err
	}
	data := map[string]any{"grant_id": g.ID, "issued_by": g.IssuedBy, "not_after": g.NotAfter}
	for k, v := range map[string]any{"principal": g.Principal, "actor": g.Actor, "risk_ceiling": g.RiskCeiling,
		"plan_digest": g.PlanDigest, "run_id": g.RunID, "request_digest": g.RequestDigest, "from_approval": g.FromApproval} {
		if v != "" {
			data[k] = v
		}
	}
	for k, v := range map[string][]string{"plugins": g.Plugins, "methods": g.Methods, "residency": g.Residency} {
		if len(v) > 0 {
			data[k] = v
		}
	}
	if !g.Budget.IsZero() {
		data["budget"] = g.Budget
	}
	if g.Uses > 0 {
		data["uses"] = g.Uses
	}
	if _, err := c.h.Options().Record("", "grant.issued", "", data); err != nil {
		_, _ = api.l.RevokeAccessGrant(context.WithoutCancel(ctx), g.ID, "airlock:evidence-unavailable", api.now())
		return err
	}
	return nil
}

func (c *Handler) revokeGrant(w http.ResponseWriter, r *http.Request, api *ledgerAPI, caller host.Principal) {
	if !api.operator(caller) {
		writeError(w, http.StatusForbidden, "not_an_operator", "only an operator principal revokes access grants")
		return
	}
	id := r.PathValue("id")
	live, err := api.l.RevokeAccessGrant(r.Context(), id, caller.ID, api.now().UTC())
	if err != nil && !errors.Is(err, broker.ErrRevocationUnreplicated) {
		ledgerRefusal(w, err)
		return
	}
	// Written on the primary at least: the host stops using the grant now.
	if api.revoked != nil {
		api.revoked(id)
	}
	if err != nil {
		ledgerRefusal(w, err)
		return
	}
	if live {
		if _, rerr := c.h.Options().Record("", "grant.revoked", "", map[string]any{"grant_id": id, "revoked_by": caller.ID}); rerr != nil {
			writeError(w, http.StatusServiceUnavailable, "evidence_unavailable", "the grant is revoked; its evidence record could not be written")
			return
		}
	}
	g, err := api.l.GetAccessGrant(r.Context(), id)
	if err != nil {
		ledgerRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"grant": grantView(g, api.now()), "was_live": live})
}

// ledgerRefusal maps a ledger error to its status and code.
func ledgerRefusal(w http.ResponseWriter, err error) {
	for _, m := range ledgerErrors {
		if errors.Is(err, m.err) {
			writeError(w, m.status, m.code, m.detail)
			return
		}
	}
	writeError(w, http.StatusInternalServerError, "internal", "the ledger could not answer")
}

var ledgerErrors = []struct {
	err    error
	status int
	code   string
	detail string
}{
	{broker.ErrGrantUnknown, http.StatusNotFound, "grant_unknown", "no access grant has this id"},
	{broker.ErrApprovalUnknown, http.StatusNotFound, "approval_unknown", "no approval has this id"},
	{broker.ErrSelfApproval, http.StatusForbidden, "self_approval", "the requester may not decide their own approval"},
	{broker.ErrNotEligible, http.StatusForbidden, "not_eligible", "this principal is not among the approval's eligible approvers"},
	{broker.ErrAlreadyApproved, http.StatusConflict, "already_approved", "this principal's approval is counted already"},
	{broker.ErrApprovalDecided, http.StatusConflict, "approval_decided", "the approval is decided already"},
	{broker.ErrApprovalExpired, http.StatusConflict, "approval_expired", "the approval expired before it was decided"},
	{broker.ErrRevocationUnreplicated, http.StatusServiceUnavailable, "revocation_unreplicated",
		"the revocation is in force on the store's primary but no replica confirmed it yet; revoke again"},
	{broker.ErrRevocationOwed, http.StatusServiceUnavailable, "revocation_unreplicated",
		"the revocation is in force but the store has not confirmed it yet; revoke again"},
	{broker.ErrStoreFull, http.StatusServiceUnavailable, "store_full", "the ledger's store is full"},
	{broker.ErrStoreUnavailable, http.StatusServiceUnavailable, "store_unavailable", "the ledger's store is unavailable"},
	{broker.ErrBrokerUnavailable, http.StatusServiceUnavailable, "store_unavailable", "the broker is unavailable"},
	{evidence.ErrUnavailable, http.StatusServiceUnavailable, "evidence_unavailable", "the evidence record could not be written"},
	{broker.ErrBadRequest, http.StatusBadRequest, "bad_request", "the ledger refused the record"},
}
