package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every variable the policy sees is reachable from a `when`, with the
// type docs/policy.md gives it.
func TestEvaluateSeesEveryVariable(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	full := Request{
		Principal:  Principal{ID: "spiffe://corp/agent", Method: "mtls", Attributes: map[string]string{"team": "support"}},
		Actor:      Actor{Kind: "user", ID: "alice"},
		Plugin:     "example.tickets",
		Kind:       KindPluginV1,
		Method:     "numinance.ports.tickets.v1.Tickets/CreateTicket",
		Risk:       RiskWrite,
		SideEffect: "write",
		DryRun:     true,
		Input:      map[string]any{"project": "SUP", "limit": float64(10), "tags": []any{"a", "b"}},
		Run:        Run{RunID: "run-1", ChangeID: "chg-1", PlanDigest: "sha256:aa"},
		Grant: Grant{ID: "g-1", Principal: "spiffe://corp/agent", Actor: "user:alice", Plugins: []string{"example.tickets"},
			Methods: []string{"x"}, RiskCeiling: "write", Residency: []string{"eu"}, Uses: 3, NotAfter: now.Add(time.Hour)},
		Spent: Spent{Invocation: Spend{Calls: 1}, Run: Spend{Calls: 2, CostMicros: 500}, Grant: Spend{EgressRequests: 4,
			EgressBytes: 5, Tokens: 6}},
		Now: now,
	}
	for _, tt := range []struct{ name, when string }{
		{"principal.id", `principal.id == "spiffe://corp/agent"`},
		{"principal.method", `principal.method == "mtls"`},
		{"principal.attributes", `principal.attributes["team"] == "support"`},
		{"actor", `actor.kind == "user" && actor.id == "alice"`},
		{"plugin", `plugin == "example.tickets"`},
		{"kind", `kind == "plugin/v1"`},
		{"method", `method.endsWith("/CreateTicket")`},
		{"risk", `risk == "write"`},
		{"side_effect", `side_effect == "write"`},
		{"dry_run", `dry_run`},
		{"input string", `input.project == "SUP"`},
		{"input number", `input.limit == 10 && input.limit < 11`},
		{"input list", `"b" in input.tags && size(input.tags) == 2`},
		{"input has", `has(input.project) && !has(input.missing)`},
		{"run", `run.run_id == "run-1" && run.change_id == "chg-1" && run.plan_digest.startsWith("sha256:")`},
		{"grant", `grant.id == "g-1" && grant.principal != "" && grant.actor == "user:alice" && "eu" in grant.residency` +
			` && grant.uses == 3 && grant.risk_ceiling == "write" && size(grant.plugins) == 1 && size(grant.methods) == 1`},
		{"grant.not_after", `grant.not_after > now && grant.not_after - now == duration("1h")`},
		{"spent", `spent.invocation.calls == 1 && spent.run.calls == 2 && spent.run.cost_micros == 500` +
			` && spent.grant.egress_requests == 4 && spent.grant.egress_bytes == 5 && spent.grant.tokens == 6`},
		{"now", `now == timestamp("2026-05-01T12:00:00Z") && now.getHours() == 12`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, "version: v1\nrules:\n  - name: r\n    effect: allow\n    when: '"+strings.ReplaceAll(tt.when, "'", "''")+"'\n")
			d := p.Evaluate(full)
			if d.Effect != Allow || d.Rule != "r" || len(d.Errors) != 0 {
				t.Fatalf("%s: %+v, want allow by r", tt.when, d)
			}
			// The same expression over an empty request does not allow.
			if d := p.Evaluate(Request{}); d.Effect != Deny {
				t.Fatalf("%s over an empty request: %+v", tt.when, d)
			}
		})
	}
}

// Effects, approvals and on_violation come from the rule that decides.
func TestEvaluateEffects(t *testing.T) {
	p := mustParse(t, `version: v1
on_violation: end
rules:
  - name: approve-privileged
    effect: require_approval
    risk_classes: [privileged]
    approvals: {count: 2, within: 1h, approvers: ["spiffe://corp/oncall/*", "user:bob"]}
    on_violation: quarantine
  - name: approve-default
    effect: require_approval
    when: input.amount > 100
  - name: deny-fin
    effect: deny
    when: input.project == "FIN"
  - effect: allow
`)
	for _, tt := range []struct {
		name        string
		r           Request
		effect      Effect
		rule        string
		approvals   int
		within      time.Duration
		approvers   []string
		onViolation string
	}{
		{"privileged", Request{Risk: RiskPrivileged}, RequireApproval, "approve-privileged", 2, time.Hour,
			[]string{"spiffe://corp/oncall/*", "user:bob"}, "quarantine"},
		{"defaults", Request{Input: map[string]any{"amount": 500}}, RequireApproval, "approve-default", DefaultApprovals,
			DefaultApprovalWithin, nil, "end"},
		{"deny", Request{Input: map[string]any{"amount": 5, "project": "FIN"}}, Deny, "deny-fin", 0, 0, nil, "end"},
		{"unnamed allow", Request{Input: map[string]any{"amount": 5, "project": "SUP"}}, Allow, "rules[3]", 0, 0, nil, "end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Evaluate(tt.r)
			if d.Effect != tt.effect || d.Allow != (tt.effect == Allow) || d.Rule != tt.rule || d.Approvals != tt.approvals ||
				d.ApprovalWithin != tt.within || !slices.Equal(d.Approvers, tt.approvers) || d.OnViolation != tt.onViolation {
				t.Fatalf("%+v", d)
			}
			if d.Digest != p.Digest() || !strings.HasPrefix(d.Digest, "sha256:") {
				t.Fatalf("decision digest %q, policy %q", d.Digest, p.Digest())
			}
		})
	}
	if got := (Effect(7)).String(); got != "deny" {
		t.Fatalf("an unknown effect is named %q", got)
	}
	if d := (Decision{}); d.Effect != Deny || d.Allow {
		t.Fatal("the zero Decision must deny")
	}
}

// A `when` that fails to evaluate never widens: an allow rule does not
// match; a deny or require_approval rule denies. The failure is counted
// and named, without the request's values.
func TestWhenErrorFailsClosed(t *testing.T) {
	p := mustParse(t, `version: v1
default: allow
rules:
  - name: deny-big-refunds
    effect: deny
    methods: [refund]
    when: input.amount > 1000
  - name: approve-deletes
    effect: require_approval
    methods: [delete]
    when: input.project.startsWith("PROD")
  - name: allow-sup
    effect: allow
    methods: [create]
    when: input.project == "SUP"
  - name: deny-create
    effect: deny
    methods: [create]
`)
	const secret = "s3cr3t-input-value"
	for _, tt := range []struct {
		name   string
		r      Request
		effect Effect
		rule   string
	}{
		{"deny rule errors: denied", Request{Method: "refund", Input: map[string]any{"note": secret}}, Deny, "deny-big-refunds"},
		{"deny rule type error: denied", Request{Method: "refund", Input: map[string]any{"amount": secret}}, Deny, "deny-big-refunds"},
		{"approval rule errors: denied", Request{Method: "delete", Input: map[string]any{"project": 7}}, Deny, "approve-deletes"},
		{"allow rule errors: next rule", Request{Method: "create", Input: map[string]any{"title": secret}}, Deny, "deny-create"},
		{"nil input is an empty object", Request{Method: "create"}, Deny, "deny-create"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := p.EvalErrors()
			d := p.Evaluate(tt.r)
			if d.Effect != tt.effect || d.Rule != tt.rule {
				t.Fatalf("%+v, want %s by %s", d, tt.effect, tt.rule)
			}
			if len(d.Errors) != 1 || p.EvalErrors() != before+1 {
				t.Fatalf("errors %v, counted %d", d.Errors, p.EvalErrors()-before)
			}
			if strings.Contains(strings.Join(d.Errors, " "), secret) {
				t.Fatalf("the decision carries an input value: %v", d.Errors)
			}
		})
	}
	// A rule written as a Go literal has an uncompiled `when`: it fails
	// closed too.
	lit := &Policy{Version: "v1", Default: "allow", Rules: []Rule{{Name: "lit", Effect: "deny", When: "true"}}}
	if d := lit.Evaluate(Request{}); d.Effect != Deny || d.Rule != "lit" {
		t.Fatalf("uncompiled deny rule: %+v", d)
	}
	lit.Rules[0].Effect = "allow"
	lit.Default = "deny"
	if d := lit.Evaluate(Request{}); d.Effect != Deny || d.Rule != "default" {
		t.Fatalf("uncompiled allow rule: %+v", d)
	}
}

// A runaway expression over a large input stops at the cost limit and
// fails closed.
func TestWhenCostLimit(t *testing.T) {
	p := mustParse(t, `version: v1
rules:
  - name: deny-any-bad-item
    effect: deny
    when: input.items.exists(a, input.items.exists(b, a + b == -1))
  - effect: allow
`)
	items := make([]any, 2000)
	for i := range items {
		items[i] = i
	}
	d := p.Evaluate(Request{Input: map[string]any{"items": items}})
	if d.Effect != Deny || d.Rule != "deny-any-bad-item" || len(d.Errors) != 1 {
		t.Fatalf("%+v", d)
	}
	if d := p.Evaluate(Request{Input: map[string]any{"items": items[:10]}}); d.Effect != Allow {
		t.Fatalf("a small input: %+v", d)
	}
}

// The digest is of the file's bytes: the same policy with a changed
// comment is another bundle.
func TestDigest(t *testing.T) {
	src := "version: v1\ndefault: allow\n"
	sum := sha256.Sum256([]byte(src))
	p := mustParse(t, src)
	if want := "sha256:" + hex.EncodeToString(sum[:]); p.Digest() != want {
		t.Fatalf("digest %s, want %s", p.Digest(), want)
	}
	if q := mustParse(t, src+"# changed\n"); q.Digest() == p.Digest() {
		t.Fatal("a changed file kept its digest")
	}
	if AllowAll().Digest() != p.Digest() {
		t.Fatal("AllowAll is the policy `version: v1, default: allow` and has its digest")
	}
	if (&Policy{}).Digest() != "" {
		t.Fatal("a literal policy has no digest")
	}
}

// InputJSON gives Evaluate what encoding/json decodes; empty is an empty
// object; bytes that are not JSON are an error that quotes none of them.
func TestInputJSON(t *testing.T) {
	p := mustParse(t, "version: v1\nrules: [{name: r, effect: allow, when: 'input.project == \"SUP\" && input.n == 3 && size(input) == 2'}]\n")
	in, err := InputJSON([]byte(`{"project":"SUP","n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Evaluate(Request{Input: in}); d.Rule != "r" {
		t.Fatalf("%+v", d)
	}
	if in, err := InputJSON([]byte("  ")); err != nil || in != nil {
		t.Fatalf("empty input: %v %v", in, err)
	}
	if _, err := InputJSON([]byte(`{"secret-value`)); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("not JSON: %v", err)
	}
}

func TestSideEffectName(t *testing.T) {
	for enum, want := range map[string]string{"SIDE_EFFECT_UNSPECIFIED": "", "SIDE_EFFECT_NONE": "none", "SIDE_EFFECT_READ": "read",
		"SIDE_EFFECT_WRITE": "write", "SIDE_EFFECT_DESTRUCTIVE": "destructive"} {
		if got := SideEffectName(enum); got != want {
			t.Errorf("%s: %q, want %q", enum, got, want)
		}
	}
}
