package policy_test

import (
	"fmt"

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
