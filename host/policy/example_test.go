package policy_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/host/policy"
)

// The policy decides before anything reaches a provider: the first rule
// that matches wins, and nothing matching means the default (deny).
func ExamplePolicy_Decide() {
	p, err := policy.Parse([]byte(`
version: v1
default: deny
rules:
  - name: no-writes-from-untrusted
    effect: deny
    plugins: [untrusted.plugin]
    risk_classes: [write, privileged]
  - name: tickets
    effect: allow
    methods: ["numinance.ports.tickets.v1.Tickets/*"]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []struct {
		plugin, method string
		risk           policy.Risk
	}{
		{"example.tickets", "numinance.ports.tickets.v1.Tickets/CreateTicket", policy.RiskWrite},
		{"untrusted.plugin", "numinance.ports.tickets.v1.Tickets/CreateTicket", policy.RiskWrite},
		{"example.tickets", "numinance.ports.billing.v1.Billing/Refund", policy.RiskWrite},
	} {
		d := p.Decide(c.plugin, c.method, c.risk, false)
		fmt.Println(c.plugin, c.method, "allow:", d.Allow, "by", d.Rule)
	}
	// Output:
	// example.tickets numinance.ports.tickets.v1.Tickets/CreateTicket allow: true by tickets
	// untrusted.plugin numinance.ports.tickets.v1.Tickets/CreateTicket allow: false by no-writes-from-untrusted
	// example.tickets numinance.ports.billing.v1.Billing/Refund allow: false by default
}

// Evaluate sees who asks, for whom, with what input and what has been
// spent; a `when` is CEL, type-checked when the policy loads.
func ExamplePolicy_Evaluate() {
	p, err := policy.Parse([]byte(`
version: v1
actors:
  - principals: ["spiffe://example.org/support-agent"]
    actors: ["user:*"]
rules:
  - name: privileged-needs-approval
    effect: require_approval
    risk_classes: [privileged]
    approvals: {count: 2, within: 30m}
  - name: sup-tickets
    effect: allow
    methods: ["numinance.ports.tickets.v1.Tickets/CreateTicket"]
    when: actor.kind == "user" && input.project == "SUP" && spent.run.calls < 20
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	agent := policy.Principal{ID: "spiffe://example.org/support-agent", Method: "mtls"}
	fmt.Println("may act for user:alice:", p.MayActFor(agent, "user", "alice"))
	r := policy.Request{
		Principal: agent,
		Actor:     policy.Actor{Kind: "user", ID: "alice"},
		Plugin:    "example.tickets",
		Kind:      policy.KindPluginV1,
		Method:    "numinance.ports.tickets.v1.Tickets/CreateTicket",
		Risk:      policy.RiskWrite,
		Input:     map[string]any{"project": "SUP", "title": "Printer on fire"},
	}
	d := p.Evaluate(r)
	fmt.Println(d.Effect, "by", d.Rule)
	r.Spent.Run.Calls = 20
	d = p.Evaluate(r)
	fmt.Println(d.Effect, "by", d.Rule)
	r.Risk = policy.RiskPrivileged
	d = p.Evaluate(r)
	fmt.Println(d.Effect, "by", d.Rule, d.Approvals, "within", d.ApprovalWithin)
	// Output:
	// may act for user:alice: true
	// allow by sup-tickets
	// deny by default
	// require_approval by privileged-needs-approval 2 within 30m0s
}

// RunTests runs a directory's test cases against its policy.yaml, as
// `airlock policy test DIR` does.
func ExampleRunTests() {
	dir, err := os.MkdirTemp("", "policy-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"policy.yaml": "version: v1\nrules: [{name: reads, effect: allow, risk_classes: [read]}]\n",
		"reads_test.yaml": `cases:
  - name: a read is allowed
    request: {method: numinance.ports.tickets.v1.Tickets/ListTickets, risk: read}
    expect: {effect: allow, rule: reads}
  - name: a write is not
    request: {method: numinance.ports.tickets.v1.Tickets/CreateTicket, risk: write}
    expect: {effect: deny}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			fmt.Println(err)
			return
		}
	}
	res, err := policy.RunTests(dir, os.Stdout)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("failed:", res.Failed)
	// Output:
	// reads_test.yaml:
	// a read is allowed: PASS
	// a write is not: PASS
	// --------------------------------------------------------------------------------
	// PASS: 2/2
	// policy sha256:32d8f3c80208f50787f202744557fd68971de03a81a4166dd540fe63ae75a1ec
	// failed: 0
}
