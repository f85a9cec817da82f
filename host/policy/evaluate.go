package policy

import (
	"fmt"
	"slices"

	"cel.dev/cel-go/common/types"
)

// Evaluate decides one call: the first rule whose every set field and
// whose `when` match decides; none matching means the default.
//
// A `when` that fails to evaluate (a missing input field, a cost over
// the limit) never widens what the policy allows: an allow rule whose
// `when` fails does not match, and the next rule decides; a deny or
// require_approval rule whose `when` fails denies the call. Either way
// Decision.Errors names the rule and EvalErrors counts it.
func (p *Policy) Evaluate(r Request) Decision {
	var act *activation
	var failed []string
	for i := range p.Rules {
		rule := &p.Rules[i]
		if !rule.matchesStatic(r.Plugin, r.Method, r.Risk, r.DryRun) {
			continue
		}
		eff, _ := ParseEffect(rule.Effect)
		if rule.When != "" {
			if act == nil {
				act = newActivation(&r, p.adapter())
			}
			ok, err := rule.evalWhen(act)
			if err != nil {
				p.evalErrors.Add(1)
				failed = append(failed, rule.name(i))
				if eff == Allow {
					continue
				}
				d := p.decision(Deny, rule, i)
				d.Errors = failed
				return d
			}
			if !ok {
				continue
			}
		}
		d := p.decision(eff, rule, i)
		d.Errors = failed
		return d
	}
	d := p.decision(Deny, nil, 0)
	if p.Default == "allow" {
		d = p.decision(Allow, nil, 0)
	}
	d.Errors = failed
	return d
}

// Decide evaluates the policy for one action with what callers before
// the policy language knew: plugin, method, risk and dry run.
func (p *Policy) Decide(plugin, method string, risk Risk, dryRun bool) Decision {
	return p.Evaluate(Request{Plugin: plugin, Method: method, Risk: risk, DryRun: dryRun})
}

// decision is effect by rule (nil: the default), with what goes with it.
func (p *Policy) decision(eff Effect, rule *Rule, i int) Decision {
	d := Decision{Effect: eff, Allow: eff == Allow, Rule: "default", OnViolation: p.OnViolation, Digest: p.digest}
	if d.OnViolation == "" {
		d.OnViolation = OnViolationRefuse
	}
	if rule == nil {
		return d
	}
	d.Rule = rule.name(i)
	if rule.OnViolation != "" {
		d.OnViolation = rule.OnViolation
	}
	if eff == RequireApproval {
		a := Approvals{}
		if rule.Approvals != nil {
			a = *rule.Approvals
		}
		d.Approvals, d.ApprovalWithin, d.Approvers = a.Count, a.Within, slices.Clone(a.Approvers)
		if d.Approvals < 1 {
			d.Approvals = DefaultApprovals
		}
		if d.ApprovalWithin <= 0 {
			d.ApprovalWithin = DefaultApprovalWithin
		}
	}
	return d
}

func (r *Rule) name(i int) string {
	if r.Name != "" {
		return r.Name
	}
	return fmt.Sprintf("rules[%d]", i)
}

// evalWhen runs the rule's compiled `when`; one that was never compiled
// (a Rule written as a Go literal) is an error, so it fails closed.
func (r *Rule) evalWhen(act *activation) (bool, error) {
	if r.when == nil {
		return false, errNotCompiled
	}
	return evalWhen(r.when, act)
}

// matchesStatic checks the fields rules had before `when`.
func (r *Rule) matchesStatic(plugin, method string, risk Risk, dryRun bool) bool {
	if len(r.Plugins) > 0 && !anyMatch(r.Plugins, plugin) {
		return false
	}
	if len(r.Methods) > 0 && !anyMatch(r.Methods, method) {
		return false
	}
	if len(r.RiskClasses) > 0 && !r.coversRisk(risk) {
		return false
	}
	return r.DryRun == nil || *r.DryRun == dryRun
}

func (r *Rule) coversRisk(risk Risk) bool {
	if r.risks != nil {
		return slices.Contains(r.risks, risk)
	}
	for _, rc := range r.RiskClasses {
		if want, ok := ParseRisk(rc); ok && want == risk {
			return true
		}
	}
	return false
}

// adapter converts Go values to CEL values for the rule environment.
func (p *Policy) adapter() types.Adapter {
	env, _, err := celEnvs()
	if err != nil {
		return types.DefaultTypeAdapter
	}
	return env.CELTypeAdapter()
}
