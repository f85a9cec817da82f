package policy

import (
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
)

// ActorRule lets principals state actors (delegation): a principal that
// matches Principals may act for an actor ("kind:id") that matches
// Actors, where When, if set, holds.
type ActorRule struct {
	// Principals are principal ids: exact, or a prefix ending in "*".
	Principals []string `yaml:"principals"`
	// Actors are "kind:id" patterns: exact, or a prefix ending in "*"
	// ("user:*" is every user).
	Actors []string `yaml:"actors"`
	// When is a CEL boolean expression over principal and actor.
	When string `yaml:"when"`

	when cel.Program
}

func (a *ActorRule) compile(env *cel.Env, at string) []error {
	var errs []error
	if len(a.Principals) == 0 {
		errs = append(errs, fmt.Errorf("%s.principals: required", at))
	}
	if len(a.Actors) == 0 {
		errs = append(errs, fmt.Errorf("%s.actors: required", at))
	}
	for i, p := range a.Principals {
		if !validPattern(p) {
			errs = append(errs, fmt.Errorf("%s.principals[%d]: must be a principal id or a prefix ending in a single trailing \"*\"", at, i))
		}
	}
	for i, p := range a.Actors {
		if !validPattern(p) {
			errs = append(errs, fmt.Errorf("%s.actors[%d]: must be kind:id or a prefix ending in a single trailing \"*\"", at, i))
		}
	}
	if a.When != "" {
		prg, err := compileWhen(env, a.When)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.when: %w", at, err))
		}
		a.when = prg
	}
	return errs
}

// MayActFor reports whether principal p may state the actor
// actorKind:actorID: some actors rule matches both and its `when`, if
// any, holds. No rule, an empty kind or id, a kind with a colon, or a `when` that fails to
// evaluate is false. A call that states no actor does not ask.
func (p *Policy) MayActFor(pr Principal, actorKind, actorID string) bool {
	if actorKind == "" || actorID == "" || pr.ID == "" || strings.Contains(actorKind, ":") {
		return false
	}
	actor := actorKind + ":" + actorID
	for i := range p.Actors {
		rule := &p.Actors[i]
		if !anyMatch(rule.Principals, pr.ID) || !anyMatch(rule.Actors, actor) {
			continue
		}
		if rule.When == "" {
			return true
		}
		if rule.when == nil {
			p.evalErrors.Add(1)
			continue
		}
		ok, err := evalWhen(rule.when, actorActivation{p: pr, a: Actor{Kind: actorKind, ID: actorID}})
		if err != nil {
			p.evalErrors.Add(1)
			continue
		}
		if ok {
			return true
		}
	}
	return false
}
