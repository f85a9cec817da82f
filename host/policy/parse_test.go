package policy

import (
	"fmt"
	"strings"
	"testing"
)

// A policy that does not load says which rule and why, every problem at
// once; a CEL problem carries CEL's message.
func TestParseErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  string
		want []string
	}{
		{"undeclared variable", "rules: [{name: r, effect: allow, when: 'user.id == \"x\"'}]",
			[]string{"policy.rules[0] (r).when:", "undeclared reference to 'user'"}},
		{"misspelt field", "rules: [{effect: allow, when: 'principal.idd == \"x\"'}]",
			[]string{"policy.rules[0].when:", "undefined field 'idd'"}},
		{"type mismatch", "rules: [{effect: allow, when: 'dry_run == \"yes\"'}]",
			[]string{"policy.rules[0].when:", "no matching overload"}},
		{"not boolean", "rules: [{effect: allow}, {name: n, effect: allow, when: 'plugin'}]",
			[]string{"policy.rules[1] (n).when: must be a boolean expression"}},
		{"syntax", "rules: [{effect: allow, when: 'plugin =='}]", []string{"policy.rules[0].when:", "Syntax error"}},
		{"effect", "rules: [{effect: permit}]", []string{"policy.rules[0].effect: must be allow, deny or require_approval"}},
		{"approvals on allow", "rules: [{effect: allow, approvals: {count: 2}}]",
			[]string{"policy.rules[0].approvals: only a require_approval rule"}},
		{"approvals bounds", "rules: [{effect: require_approval, approvals: {count: 11, within: 25h, approvers: ['a*b', '']}}]",
			[]string{"approvals.count: must be 1 to 10", "approvals.within: must be more than 0 and at most 24h0m0s",
				"approvals.approvers[0]", "approvals.approvers[1]"}},
		{"negative within", "rules: [{effect: require_approval, approvals: {within: -1m}}]", []string{"approvals.within"}},
		{"on_violation", "on_violation: explode\nrules: [{effect: deny, on_violation: shrug}]",
			[]string{"policy.on_violation: must be refuse, end or quarantine", "policy.rules[0].on_violation"}},
		{"actors", "actors: [{}, {principals: ['x*y'], actors: ['user:*'], when: 'plugin == \"p\"'}]",
			[]string{"policy.actors[0].principals: required", "policy.actors[0].actors: required",
				"policy.actors[1].principals[0]", "policy.actors[1].when:", "undeclared reference to 'plugin'"}},
		{"unknown key", "rules: [{effect: allow, whn: 'true'}]", []string{"whn"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte("version: v1\n" + tt.src + "\n"))
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// oldDecide is the matcher before the policy language, kept here as the
// reference a v1 file of the old fields must still agree with.
func oldDecide(p *Policy, plugin, method string, risk Risk, dryRun bool) (bool, string) {
	for i, r := range p.Rules {
		match := (len(r.Plugins) == 0 || anyMatch(r.Plugins, plugin)) && (len(r.Methods) == 0 || anyMatch(r.Methods, method))
		if match && len(r.RiskClasses) > 0 {
			ok := false
			for _, rc := range r.RiskClasses {
				if want, _ := ParseRisk(rc); want == risk {
					ok = true
				}
			}
			match = ok
		}
		if match && (r.DryRun == nil || *r.DryRun == dryRun) {
			name := r.Name
			if name == "" {
				name = fmt.Sprintf("rules[%d]", i)
			}
			return r.Effect == "allow", name
		}
	}
	return p.Default == "allow", "default"
}

// Files of the old fields (plugins, methods, risk_classes, dry_run)
// decide exactly as before, through Decide and Evaluate alike.
func TestV1RulesDecideAsBefore(t *testing.T) {
	for _, src := range []string{
		`version: v1
rules:
  - name: no-writes-from-untrusted
    effect: deny
    plugins: [untrusted.plugin]
    risk_classes: [write, privileged]
  - name: tickets-reads
    effect: allow
    methods: ["numinance.ports.tickets.v1.Tickets/List*"]
  - effect: allow
    dry_run: true
  - name: executa
    effect: allow
    plugins: ["*"]
    methods: [summarize]
    risk_classes: [unspecified]
`,
		"version: v1\ndefault: allow\nrules: [{effect: deny, dry_run: false, risk_classes: [PRIVILEGED]}]\n",
		"version: v1\n",
	} {
		p := mustParse(t, src)
		for _, plugin := range []string{"example.tickets", "untrusted.plugin", "other"} {
			for _, method := range []string{"numinance.ports.tickets.v1.Tickets/ListTickets", "numinance.ports.tickets.v1.Tickets/CreateTicket", "summarize", ""} {
				for risk := RiskUnspecified; risk <= RiskPrivileged; risk++ {
					for _, dry := range []bool{false, true} {
						allow, rule := oldDecide(p, plugin, method, risk, dry)
						d := p.Decide(plugin, method, risk, dry)
						e := p.Evaluate(Request{Principal: Principal{ID: "anyone"}, Plugin: plugin, Method: method, Risk: risk, DryRun: dry})
						if d.Allow != allow || d.Rule != rule || e.Allow != allow || e.Rule != rule || (e.Effect == Allow) != allow {
							t.Fatalf("%s %s %v dry=%v: Decide %+v, Evaluate %+v, before: allow=%v by %s", plugin, method, risk, dry, d, e, allow, rule)
						}
					}
				}
			}
		}
	}
}

// MayActFor: no rule is no; principals and actors match by pattern; a
// `when` that fails is no.
func TestMayActFor(t *testing.T) {
	none := mustParse(t, "version: v1\n")
	agent := Principal{ID: "spiffe://corp/support-agent", Attributes: map[string]string{"idp": "sso"}}
	if none.MayActFor(agent, "user", "alice") {
		t.Fatal("no actors rule lets a principal act for someone")
	}
	p := mustParse(t, `version: v1
actors:
  - principals: ["spiffe://corp/support-agent"]
    actors: ["user:*"]
    when: principal.attributes["idp"] == "sso" && !actor.id.startsWith("admin")
  - principals: ["spiffe://corp/batch/*"]
    actors: ["service:billing"]
`)
	for _, tt := range []struct {
		name     string
		p        Principal
		kind, id string
		want     bool
	}{
		{"agent for a user", agent, "user", "alice", true},
		{"agent for an admin user", agent, "user", "admin-bob", false},
		{"agent for a service", agent, "service", "billing", false},
		{"agent without the attribute (when fails)", Principal{ID: agent.ID}, "user", "alice", false},
		{"batch prefix for billing", Principal{ID: "spiffe://corp/batch/nightly"}, "service", "billing", true},
		{"batch for another service", Principal{ID: "spiffe://corp/batch/nightly"}, "service", "payroll", false},
		{"no kind", agent, "", "alice", false},
		{"no id", agent, "user", "", false},
		{"kind with a colon", agent, "user:x", "alice", false},
		{"no principal", Principal{}, "user", "alice", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.MayActFor(tt.p, tt.kind, tt.id); got != tt.want {
				t.Fatalf("MayActFor = %v, want %v", got, tt.want)
			}
		})
	}
}

// MatchPattern is how approvers, actors and principals lists match.
func TestMatchPattern(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"spiffe://corp/oncall/*", "spiffe://corp/oncall/alice", true},
		{"spiffe://corp/oncall/*", "spiffe://corp/oncallx", false},
		{"user:bob", "user:bob", true},
		{"user:bob", "user:bobby", false},
		{"*", "anything", true},
	} {
		if got := MatchPattern(tt.pattern, tt.s); got != tt.want {
			t.Errorf("MatchPattern(%q, %q) = %v", tt.pattern, tt.s, got)
		}
	}
}
