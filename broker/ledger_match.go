package broker

import (
	"sort"
	"time"
)

// GrantQuery is the call an access grant is checked against.
type GrantQuery struct {
	Principal string // the authenticated caller
	Actor     string // "kind:id" the caller acts for, "" for none
	Plugin    string
	Method    string
	// Risk is the method's risk class, lower case: "read", "low",
	// "write", "privileged" or "unspecified".
	Risk          string
	RunID         string
	PlanDigest    string
	RequestDigest string
	Now           time.Time
}

// riskRanks orders the risk classes a ceiling compares. "unspecified"
// is not in it: a method that declares no risk class is under no
// ceiling, only a grant without one covers it.
var riskRanks = map[string]int{"read": 1, "low": 2, "write": 3, "privileged": 4}

// ValidRisk reports whether r names a risk class a ceiling may be.
func ValidRisk(r string) bool { _, ok := riskRanks[r]; return ok }

// Covers reports whether g covers the call q, and when it does not, why
// (for evidence: a field name, never a value the caller sent). A grant's
// uses and budget are not checked here: they are spend (see BudgetLine).
func (g *AccessGrant) Covers(q GrantQuery) (bool, string) {
	switch {
	case !g.RevokedAt.IsZero():
		return false, "revoked"
	case !q.Now.Before(g.NotAfter):
		return false, "expired"
	case q.Now.Before(g.IssuedAt):
		return false, "not yet valid"
	case g.Principal != "" && g.Principal != q.Principal:
		return false, "principal"
	case g.Actor != "" && g.Actor != q.Actor:
		return false, "actor"
	case len(g.Plugins) > 0 && !matchesAny(g.Plugins, q.Plugin):
		return false, "plugin"
	case len(g.Methods) > 0 && !matchesAny(g.Methods, q.Method):
		return false, "method"
	case g.RunID != "" && g.RunID != q.RunID:
		return false, "run_id"
	case g.PlanDigest != "" && g.PlanDigest != q.PlanDigest:
		return false, "plan_digest"
	case g.RequestDigest != "" && g.RequestDigest != q.RequestDigest:
		return false, "request_digest"
	}
	if g.RiskCeiling != "" {
		ceiling, ok := riskRanks[g.RiskCeiling]
		risk, known := riskRanks[q.Risk]
		if !ok || !known || risk > ceiling {
			return false, "risk_ceiling"
		}
	}
	return true, ""
}

// BudgetLine is the budget every call under g is charged against, keyed
// BudgetKeyGrant(g.ID): g.Budget, with the calls limit at most g.Uses
// when the grant counts uses. A grant's uses are its calls: the caller
// charges Spend{Calls: 1} on this line (with the invocation's and run's
// lines) before each call, and the charge that would pass Uses is
// refused with a *BudgetExhaustedError on dimension "calls".
func (g *AccessGrant) BudgetLine() BudgetLine {
	l := g.Budget
	if g.Uses > 0 && (l.Calls == 0 || int64(g.Uses) < l.Calls) {
		l.Calls = int64(g.Uses)
	}
	return BudgetLine{Key: BudgetKeyGrant(g.ID), Limits: l}
}

// SelectGrants returns the grants that cover q, the one to use first:
// the narrowest, then the most recently issued. Narrower means, in this
// order: bound to the request's digest; bound to more of run and plan;
// naming more of principal and actor; naming plugins and methods exactly
// (no pattern) rather than by pattern or not at all; then the latest
// issued, then the smallest id (so replicas choose alike). A caller whose
// charge on the first is refused (budget spent) may try the next.
func SelectGrants(grants []*AccessGrant, q GrantQuery) []*AccessGrant {
	var out []*AccessGrant
	for _, g := range grants {
		if ok, _ := g.Covers(q); ok {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := narrowness(out[i]), narrowness(out[j])
		for k := range a {
			if a[k] != b[k] {
				return a[k] > b[k]
			}
		}
		if !out[i].IssuedAt.Equal(out[j].IssuedAt) {
			return out[i].IssuedAt.After(out[j].IssuedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// SelectGrant is SelectGrants' first grant, nil when none covers q.
func SelectGrant(grants []*AccessGrant, q GrantQuery) *AccessGrant {
	if s := SelectGrants(grants, q); len(s) > 0 {
		return s[0]
	}
	return nil
}

func narrowness(g *AccessGrant) [4]int {
	var n [4]int
	if g.RequestDigest != "" {
		n[0] = 1
	}
	n[1] = count(g.RunID != "", g.PlanDigest != "")
	n[2] = count(g.Principal != "", g.Actor != "")
	n[3] = count(exactNames(g.Plugins), exactNames(g.Methods), g.RiskCeiling != "")
	return n
}

func exactNames(patterns []string) bool {
	if len(patterns) == 0 {
		return false
	}
	for _, p := range patterns {
		if p == "" || p[len(p)-1] == '*' {
			return false
		}
	}
	return true
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
