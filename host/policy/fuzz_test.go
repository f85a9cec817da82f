package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fuzzPolicy touches every kind of variable, and input in ways that fail
// for inputs of the wrong shape.
const fuzzPolicy = `version: v1
actors: [{principals: ["spiffe://corp/*"], actors: ["user:*"], when: 'actor.id.size() < 64'}]
rules:
  - name: deny-big
    effect: deny
    when: input.amount > 1000
  - name: approve-tags
    effect: require_approval
    when: input.tags.exists(t, t == "prod")
  - name: allow-sup
    effect: allow
    when: input.project == "SUP" && principal.id.startsWith("spiffe://corp/") && spent.run.calls < 20
  - name: read-dry
    effect: allow
    risk_classes: [read]
    dry_run: true
`

// Evaluate never panics on any input, and never allows by a rule whose
// `when` failed.
func FuzzEvaluate(f *testing.F) {
	p, err := Parse([]byte(fuzzPolicy))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`{"project":"SUP","amount":5}`, "spiffe://corp/a", "user", "alice", 3, false)
	f.Add(`{"amount":"x","tags":[1,2,"prod"]}`, "", "", "", 1, true)
	f.Add(`[1,2,3]`, "spiffe://corp/", "user:x", "bob", 9, false)
	f.Add(`{"tags":{"a":1},"project":null}`, "x", "service", "s", -1, true)
	f.Add(`"just a string"`, "spiffe://corp/b", "user", "", 4, false)
	f.Fuzz(func(t *testing.T, input, principal, actorKind, actorID string, risk int, dry bool) {
		var in any
		_ = json.Unmarshal([]byte(input), &in)
		r := Request{Principal: Principal{ID: principal}, Actor: Actor{Kind: actorKind, ID: actorID},
			Risk: Risk(risk), DryRun: dry, Input: in, Spent: Spent{Run: Spend{Calls: int64(risk)}}}
		d := p.Evaluate(r)
		if d.Allow != (d.Effect == Allow) || d.Effect.String() == "" {
			t.Fatalf("inconsistent decision %+v", d)
		}
		if d.Allow && slices.Contains(d.Errors, d.Rule) {
			t.Fatalf("allowed by a rule whose when failed: %+v", d)
		}
		_ = p.MayActFor(r.Principal, actorKind, actorID)
	})
}

// Parse never panics; a policy it accepts evaluates without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(fuzzPolicy))
	if b, err := os.ReadFile(filepath.Join("..", "..", "examples", "policy", PolicyFile)); err == nil {
		f.Add(b)
	}
	f.Add([]byte("version: v1\ndefault: allow\n"))
	f.Add([]byte("version: v1\nrules: [{effect: require_approval, approvals: {count: 3, within: 1h, approvers: [a*]}}]\n"))
	f.Add([]byte("version: v1\nrules: [{effect: allow, when: 'input.a.b.c[0] == 1'}]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse(src)
		if err != nil {
			return
		}
		for _, r := range []Request{{}, {Risk: RiskPrivileged, DryRun: true, Input: map[string]any{"a": []any{1.0}}}} {
			d := p.Evaluate(r)
			if d.Digest != p.Digest() || d.Effect == RequireApproval && (d.Approvals < 1 || d.Approvals > MaxApprovals) {
				t.Fatalf("decision %+v", d)
			}
		}
		_ = p.MayActFor(Principal{ID: "a"}, "user", "b")
	})
}
