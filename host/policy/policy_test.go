package policy

import (
	"strings"
	"testing"
)

func TestPolicy(t *testing.T) {
	p, err := Parse([]byte(`version: v1
rules:
  - name: no-writes-from-untrusted
    effect: deny
    plugins: [untrusted.plugin]
    risk_classes: [write, privileged]
  - name: tickets-reads
    effect: allow
    methods: ["numinance.ports.tickets.v1.Tickets/List*"]
  - name: dry-runs
    effect: allow
    dry_run: true
`))
	if err != nil {
		t.Fatal(err)
	}
	read, write := RiskRead, RiskWrite
	for _, tt := range []struct {
		plugin, method string
		risk           Risk
		dry            bool
		allow          bool
		rule           string
	}{
		{"example.tickets", "numinance.ports.tickets.v1.Tickets/ListTickets", read, false, true, "tickets-reads"},
		{"example.tickets", "numinance.ports.tickets.v1.Tickets/CreateTicket", write, false, false, "default"},
		{"example.tickets", "numinance.ports.tickets.v1.Tickets/CreateTicket", write, true, true, "dry-runs"},
		{"untrusted.plugin", "numinance.ports.tickets.v1.Tickets/CreateTicket", write, true, false, "no-writes-from-untrusted"},
	} {
		d := p.Decide(tt.plugin, tt.method, tt.risk, tt.dry)
		if d.Allow != tt.allow || d.Rule != tt.rule {
			t.Errorf("%s %s dry=%v: %+v, want allow=%v by %s", tt.plugin, tt.method, tt.dry, d, tt.allow, tt.rule)
		}
	}
	_, err = Parse([]byte("version: v2\ndefault: maybe\nrules: [{effect: permit, risk_classes: [scary]}]\nextra: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "extra") {
		t.Fatalf("unknown key: %v", err)
	}
	_, err = Parse([]byte("version: v2\ndefault: maybe\nrules: [{effect: permit, risk_classes: [scary]}]\n"))
	for _, want := range []string{"policy.version", "policy.default", "rules[0].effect", "rules[0].risk_classes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
