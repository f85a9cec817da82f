package host

import (
	"encoding/json"
	"time"
)

// InvokeRequest is a call for a plugin, as the control API or a Go caller
// makes it.
type InvokeRequest struct {
	// Method is a plugin/v1 full method
	// ("numinance.ports.<name>.v<major>.<Service>/<Method>") or an
	// Executa tool name.
	Method string
	// Input is the method's input as a Go value the plugin's runtime
	// takes (plugin/v1: a proto.Message of the method's input type); JSON
	// is the input as the control API received it (protojson for
	// plugin/v1, the arguments object for Executa). Input wins when both
	// are set.
	Input    any
	JSON     json.RawMessage
	DryRun   bool
	Deadline time.Time
	// Caller is the authenticated principal that asked (the control
	// API's caller); Actor is who it acts for, when it states one (the
	// policy decides whether it may).
	Caller Principal
	Actor  Actor
	// Run is the run context the caller gave: run id, change id, plan
	// digest.
	Run RunContext
	// AppID and AppSlug are the App context an Executa call runs in, as
	// the caller attests it; empty for none.
	AppID, AppSlug string
	// OnRunning, when set, sees each progress message that passed the
	// runtime's checks (for streaming progress to the caller).
	OnRunning func(Progress)
	// OnPending, when set, is told once when the call starts waiting for
	// an approval the policy requires.
	OnPending func(ApprovalPending)
	// OnAdmitted, when set, is told once when every gate passed (an
	// approval waited for included) and the call is about to be
	// recorded and sent to the plugin: from then on, ending the call's
	// context cancels a call that ran.
	OnAdmitted func()
}

// Actor is who a call is made for: Kind is "user", "service", …, and
// Principal its id in that kind.
type Actor struct {
	Kind      string
	Principal string
}

// Principal is an authenticated caller of the host: ID is the name the
// policy, grants and evidence use (a SPIFFE ID, a certificate subject, a
// JWT's issuer-qualified subject, a token file's principal name); Method
// how it was authenticated ("mtls", "jwt", "token", "peer").
type Principal struct {
	ID     string
	Method string
	// Attributes the authentication carried that the policy may see
	// (JWT claims named in the config, certificate fields).
	Attributes map[string]string
}

// RunContext is the run an invocation belongs to, as its caller names
// it: each value is validated (control API) before the host sees it.
type RunContext struct {
	RunID      string
	ChangeID   string
	PlanDigest string
}

// Progress is a message a plugin sent while the call runs.
type Progress struct {
	Diagnostics []Diagnostic
}

// Diagnostic is a plugin's note on a call: a code, a message and where
// in the input or result it applies. Its JSON is what the control API
// streams.
type Diagnostic struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Path    string `json:"path,omitempty"`
}

// CallStatus is how a call ended, as the host derived it. Its values are
// the names evidence records and the control API carry.
type CallStatus string

// Call statuses.
const (
	CallSucceeded CallStatus = "STATUS_SUCCEEDED"
	CallFailed    CallStatus = "STATUS_FAILED"
	// CallPartial: the plugin said it succeeded, but the host found
	// something missing (declared evidence).
	CallPartial   CallStatus = "STATUS_PARTIAL"
	CallCancelled CallStatus = "STATUS_CANCELLED"
)

// Outcome is what the host derived, never what the plugin claimed.
type Outcome struct {
	InvocationID string
	Status       CallStatus
	// Data is the result as JSON, for either kind (plugin/v1: the
	// terminal result in protojson).
	Data        json.RawMessage
	Diagnostics []Diagnostic
	EvidenceIDs []string
	Reason      string // why the host failed or downgraded the call
	// CostMicros is the cost the plugin reported (plugin/v1 terminal
	// cost, in micro-units of CostUnit), charged to the call's budgets.
	CostMicros int64
	CostUnit   string
	// Violated is set when the plugin tried to use authority it was not
	// given during the call (Violations names the kinds): nothing
	// downstream should trust its result.
	Violated   bool
	Violations []string
}
