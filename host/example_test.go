package host_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-dev/airlock/host"
	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// A host registers plugins of either kind by name and runs every call
// through one invoke path; a plugin that cannot start is marked, and the
// host keeps serving the others.
func ExampleHost() {
	h := host.New(host.Options{Policy: host.AllowAll()})
	defer h.Shutdown(context.Background())
	err := h.Add("broken", host.KindExecuta, func(context.Context) (host.Runtime, error) {
		return nil, fmt.Errorf("%w: tools: at least one tool is required", host.ErrManifestInvalid)
	})
	fmt.Println("add:", err != nil)
	for _, s := range h.Status() {
		fmt.Println(s.Name, s.Kind, s.State)
	}
	_, err = h.Invoke(context.Background(), "broken", host.InvokeRequest{Method: "summarize"})
	fmt.Println("refused as failed:", errors.Is(err, host.ErrPluginFailed))
	// Output:
	// add: true
	// broken executa failed
	// refused as failed: true
}

// The policy decides before anything reaches a provider: the first rule
// that matches wins, and nothing matching means the default (deny).
func ExamplePolicy_Decide() {
	p, err := host.ParsePolicy([]byte(`
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
		risk           pluginv1.RiskClass
	}{
		{"example.tickets", "numinance.ports.tickets.v1.Tickets/CreateTicket", pluginv1.RiskClass_RISK_CLASS_WRITE},
		{"untrusted.plugin", "numinance.ports.tickets.v1.Tickets/CreateTicket", pluginv1.RiskClass_RISK_CLASS_WRITE},
		{"example.tickets", "numinance.ports.billing.v1.Billing/Refund", pluginv1.RiskClass_RISK_CLASS_WRITE},
	} {
		d := p.Decide(c.plugin, c.method, c.risk, false)
		fmt.Println(c.plugin, c.method, "allow:", d.Allow, "by", d.Rule)
	}
	// Output:
	// example.tickets numinance.ports.tickets.v1.Tickets/CreateTicket allow: true by tickets
	// untrusted.plugin numinance.ports.tickets.v1.Tickets/CreateTicket allow: false by no-writes-from-untrusted
	// example.tickets numinance.ports.billing.v1.Billing/Refund allow: false by default
}

// The host reads a provider's handshake line and checks every field before
// it dials the socket the line names.
func ExampleParseHandshakeLine() {
	l, err := host.ParseHandshakeLine("1|1|unix|/run/provider/p.sock|grpc")
	fmt.Println(l.AppVersion, l.Socket, err)
	_, err = host.ParseHandshakeLine("1|1|tcp|127.0.0.1:1234|grpc")
	fmt.Println(err)
	// Output:
	// 1 /run/provider/p.sock <nil>
	// handshake line: network-type: must be unix
}
