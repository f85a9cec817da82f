package host

import (
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
)

// policyRequest is everything the policy sees of one call.
func policyRequest(name string, kind Kind, act Action, facts ActionFacts, req InvokeRequest,
	g *broker.AccessGrant, spentRun, spentGrant broker.Spend, now time.Time) policy.Request {
	// The form `airlock policy test` decodes a case's input into, so a
	// case decides as the call does. Prepare checked the input is JSON.
	input, _ := policy.InputJSON(facts.InputJSON)
	r := policy.Request{
		Principal:  policy.Principal{ID: req.Caller.ID, Method: req.Caller.Method, Attributes: req.Caller.Attributes},
		Actor:      policy.Actor{Kind: req.Actor.Kind, ID: req.Actor.Principal},
		Plugin:     name,
		Kind:       string(kind),
		Method:     req.Method,
		Risk:       act.Risk(),
		SideEffect: facts.SideEffect,
		DryRun:     req.DryRun,
		Input:      input,
		Run:        policy.Run{RunID: req.Run.RunID, ChangeID: req.Run.ChangeID, PlanDigest: req.Run.PlanDigest},
		Spent:      policy.Spent{Run: policy.Spend(spentRun), Grant: policy.Spend(spentGrant)},
		Now:        now,
	}
	if g != nil {
		r.Grant = policy.Grant{ID: g.ID, Principal: g.Principal, Actor: g.Actor, Plugins: g.Plugins, Methods: g.Methods,
			RiskCeiling: g.RiskCeiling, Residency: g.Residency, Uses: int64(g.Uses), NotAfter: g.NotAfter}
	}
	return r
}

// riskName is a risk class as grants name it: "read", "write", …
func riskName(r policy.Risk) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "RISK_CLASS_"))
}

// MayActFor says whether the policy in force lets p state the actor
// kind/id (its actors rules); with no policy no one may.
func (h *Host) MayActFor(p Principal, kind, id string) bool {
	pol := h.policy.Load()
	if pol == nil {
		return false
	}
	return pol.MayActFor(policy.Principal{ID: p.ID, Method: p.Method, Attributes: p.Attributes}, kind, id)
}
