package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Request is everything the policy sees of one call. Each field is a CEL
// variable of the name in its cel tag (docs/policy.md lists them with
// their types); the host fills what it knows and leaves the rest zero.
type Request struct {
	// Principal is the authenticated caller; Actor whom it acts for
	// (empty strings when it states none).
	Principal Principal
	Actor     Actor
	// Plugin is the plugin's name; Kind its protocol, KindPluginV1 or
	// KindExecuta.
	Plugin string
	Kind   string
	// Method is a plugin/v1 full method or an Executa tool name.
	Method string
	// Risk is the method's risk class from the host's copy of the port
	// (CEL sees it lowercase: "read", "write", …).
	Risk Risk
	// SideEffect is a plugin/v1 method's declared side effect, lowercase
	// without its prefix ("none", "read", "write", "destructive"), or ""
	// (SideEffectName).
	SideEffect string
	DryRun     bool
	// Input is the call's typed input as decoded JSON (InputJSON). For
	// plugin/v1 it is the host's canonical encoding of the decoded
	// message (protojson with UseProtoNames), never the caller's JSON as
	// sent: otherwise a caller could pick a spelling a rule does not
	// test. nil is an empty object.
	Input any
	Run   Run
	// Grant is the access grant the call would run under; its ID is ""
	// when none applies.
	Grant Grant
	// Spent is what has been spent so far, per budget.
	Spent Spent
	// Now is the time of the decision; zero means time.Now().
	Now time.Time
}

// InputJSON decodes a call's input JSON (protojson for plugin/v1, the
// arguments object for Executa) into the form Request.Input takes. Empty
// input is nil (an empty object to the policy). The error names no value.
func InputJSON(b []byte) (any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, errInputNotJSON
	}
	return v, nil
}

// Plugin kinds, as Request.Kind carries them.
const (
	KindPluginV1 = "plugin/v1"
	KindExecuta  = "executa"
)

// Principal is an authenticated caller: ID the name policy and grants
// use, Method how it was authenticated ("mtls", "jwt", "token", "peer"),
// Attributes what its authentication carried that the policy may see.
type Principal struct {
	ID         string            `cel:"id"`
	Method     string            `cel:"method"`
	Attributes map[string]string `cel:"attributes"`
}

// Actor is whom a call is made for: Kind "user", "service", …, and ID
// its id in that kind.
type Actor struct {
	Kind string `cel:"kind"`
	ID   string `cel:"id"`
}

// Run is the run context the caller named.
type Run struct {
	RunID      string `cel:"run_id"`
	ChangeID   string `cel:"change_id"`
	PlanDigest string `cel:"plan_digest"`
}

// Grant is the access grant a call would run under, as the policy sees
// it (the ledger's broker.AccessGrant, narrowed). Actor is "kind:id".
type Grant struct {
	ID          string    `cel:"id"`
	Principal   string    `cel:"principal"`
	Actor       string    `cel:"actor"`
	Plugins     []string  `cel:"plugins"`
	Methods     []string  `cel:"methods"`
	RiskCeiling string    `cel:"risk_ceiling"`
	Residency   []string  `cel:"residency"`
	Uses        int64     `cel:"uses"`
	NotAfter    time.Time `cel:"not_after"`
}

// Spend is what has been spent under one budget; its fields are those
// of broker.Spend, so a broker.Spend converts to it (policy.Spend(s)).
type Spend struct {
	Calls          int64 `cel:"calls"`
	CostMicros     int64 `cel:"cost_micros"`
	EgressRequests int64 `cel:"egress_requests"`
	EgressBytes    int64 `cel:"egress_bytes"`
	Tokens         int64 `cel:"tokens"`
}

// Spent is what has been spent per budget: this invocation, its run and
// its grant.
type Spent struct {
	Invocation Spend `cel:"invocation"`
	Run        Spend `cel:"run"`
	Grant      Spend `cel:"grant"`
}

// Effect is what a decision lets happen.
type Effect int

// Effects. The zero Effect is Deny, so a Decision nobody filled in
// denies.
const (
	Deny Effect = iota
	Allow
	RequireApproval
)

var effectNames = [...]string{Deny: "deny", Allow: "allow", RequireApproval: "require_approval"}

// String is the effect as policy files and evidence name it.
func (e Effect) String() string {
	if e < 0 || int(e) >= len(effectNames) {
		return effectNames[Deny]
	}
	return effectNames[e]
}

// ParseEffect reads an effect name: allow, deny or require_approval.
func ParseEffect(s string) (Effect, bool) {
	for e, n := range effectNames {
		if n == s {
			return Effect(e), true
		}
	}
	return Deny, false
}

// Reactions to a violation (on_violation): refuse the attempt only, also
// end the invocation, or also quarantine the plugin.
const (
	OnViolationRefuse     = "refuse"
	OnViolationEnd        = "end"
	OnViolationQuarantine = "quarantine"
)

func validOnViolation(s string) bool {
	return s == OnViolationRefuse || s == OnViolationEnd || s == OnViolationQuarantine
}

// Decision is the policy's answer and why.
type Decision struct {
	Effect Effect
	// Allow is Effect == Allow (kept for callers of Decide).
	Allow bool
	// Rule is the rule that decided: its name, "rules[i]" for an unnamed
	// one, or "default".
	Rule string
	// Approvals, ApprovalWithin and Approvers are set for
	// RequireApproval: how many other principals must approve, within
	// how long, and which may (patterns; none means any other principal).
	Approvals      int
	ApprovalWithin time.Duration
	Approvers      []string
	// OnViolation is the reaction to a violation by this call: refuse,
	// end or quarantine.
	OnViolation string
	// Digest is the policy bundle's digest (Policy.Digest): the
	// ActionContext's profile_digest.
	Digest string
	// Errors names the rules whose `when` failed to evaluate for this
	// request (no values: a name or "rules[i]"). An allow rule that
	// fails does not match; a deny or require_approval rule that fails
	// denies (see docs/policy.md).
	Errors []string
}

// SideEffectName is a plugin/v1 SideEffect enum name
// ("SIDE_EFFECT_WRITE") as Request.SideEffect carries it ("write");
// unspecified is "".
func SideEffectName(enum string) string {
	name := strings.ToLower(strings.TrimPrefix(enum, "SIDE_EFFECT_"))
	if name == "unspecified" {
		return ""
	}
	return name
}

// riskName is a risk class as CEL sees it: "unspecified", "read", …
func riskName(r Risk) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "RISK_CLASS_"))
}
