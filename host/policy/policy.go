package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/cel"
	"go.yaml.in/yaml/v3"
)

// Approval defaults and bounds (a rule's approvals:).
const (
	DefaultApprovals      = 1
	MaxApprovals          = 10
	DefaultApprovalWithin = 15 * time.Minute
	MaxApprovalWithin     = 24 * time.Hour
)

// Policy decides, before anything reaches a provider, whether an action
// may run. Rules are tried in order; the first that matches decides; none
// matching means Default (deny unless set to allow). Parse and Load make
// one ready to use; a Policy written as a Go literal works too, but a
// rule's `when` in one is never compiled and so never matches.
type Policy struct {
	Version string `yaml:"version"`
	Default string `yaml:"default"` // allow | deny (default deny)
	// OnViolation is the reaction to a violation for calls whose rule
	// sets none: refuse (default), end or quarantine.
	OnViolation string `yaml:"on_violation"`
	Rules       []Rule `yaml:"rules"`
	// Actors say which principals may state which actors (delegation);
	// none means no principal may act for anyone.
	Actors []ActorRule `yaml:"actors"`

	digest     string
	evalErrors atomic.Uint64
}

// Rule matches on every field it sets.
type Rule struct {
	Name   string `yaml:"name"`
	Effect string `yaml:"effect"` // allow | deny | require_approval
	// Plugins are exact names, or "*".
	Plugins []string `yaml:"plugins"`
	// Methods are full method names; a trailing "*" matches a prefix.
	Methods []string `yaml:"methods"`
	// RiskClasses: READ, LOW, WRITE, PRIVILEGED.
	RiskClasses []string `yaml:"risk_classes"`
	// DryRun, when set, matches only dry runs (true) or real runs (false).
	DryRun *bool `yaml:"dry_run"`
	// When is a CEL boolean expression over the Request's variables.
	When string `yaml:"when"`
	// Approvals is what a require_approval rule asks for.
	Approvals *Approvals `yaml:"approvals"`
	// OnViolation overrides the policy's on_violation for calls this
	// rule decides.
	OnViolation string `yaml:"on_violation"`

	when  cel.Program
	risks []Risk // RiskClasses, parsed
}

// Approvals is how many principals other than the requester must approve
// a call, within how long, and which principals may.
type Approvals struct {
	Count  int           `yaml:"count"`
	Within time.Duration `yaml:"within"`
	// Approvers are principal ids: exact, or a trailing "*" for a prefix.
	Approvers []string `yaml:"approvers"`
}

// Load reads a policy file strictly.
func Load(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(b)
}

// Parse decodes a policy strictly, validates it and compiles every
// `when`; it reports every problem at once, each naming the rule.
func Parse(b []byte) (*Policy, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	p := &Policy{}
	if err := dec.Decode(p); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := p.compile(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	p.digest = "sha256:" + hex.EncodeToString(sum[:])
	return p, nil
}

// AllowAll is the policy of `airlock dev`.
func AllowAll() *Policy {
	p, err := Parse([]byte("version: v1\ndefault: allow\n"))
	if err != nil {
		panic(err) // a constant that parses
	}
	return p
}

// Digest is "sha256:<hex>" of the policy file's bytes as loaded: the
// ActionContext's profile_digest and every policy.decision record's. A
// Policy not made by Parse or Load has none ("").
func (p *Policy) Digest() string { return p.digest }

// EvalErrors counts the `when` evaluations that failed since the policy
// was loaded (each also named in its Decision's Errors).
func (p *Policy) EvalErrors() uint64 { return p.evalErrors.Load() }

func (p *Policy) compile() error {
	ruleEnv, actorEnv, err := celEnvs()
	if err != nil {
		return fmt.Errorf("policy: CEL environment: %w", err)
	}
	var errs []error
	if p.Version != "v1" {
		errs = append(errs, errors.New("policy.version: must be v1"))
	}
	if p.Default == "" {
		p.Default = "deny"
	}
	if p.Default != "allow" && p.Default != "deny" {
		errs = append(errs, errors.New("policy.default: must be allow or deny"))
	}
	if p.OnViolation == "" {
		p.OnViolation = OnViolationRefuse
	}
	if !validOnViolation(p.OnViolation) {
		errs = append(errs, errors.New("policy.on_violation: must be refuse, end or quarantine"))
	}
	for i := range p.Rules {
		errs = append(errs, p.Rules[i].compile(ruleEnv, fmt.Sprintf("policy.rules[%d]%s", i, nameSuffix(p.Rules[i].Name)))...)
	}
	for i := range p.Actors {
		errs = append(errs, p.Actors[i].compile(actorEnv, fmt.Sprintf("policy.actors[%d]", i))...)
	}
	return errors.Join(errs...)
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (%s)", name)
}

func (r *Rule) compile(env *cel.Env, at string) []error {
	var errs []error
	eff, ok := ParseEffect(r.Effect)
	if !ok {
		errs = append(errs, fmt.Errorf("%s.effect: must be allow, deny or require_approval", at))
	}
	r.risks = nil
	for _, rc := range r.RiskClasses {
		risk, ok := ParseRisk(rc)
		if !ok {
			errs = append(errs, fmt.Errorf("%s.risk_classes: unknown class", at))
		}
		r.risks = append(r.risks, risk)
	}
	if r.When != "" {
		prg, err := compileWhen(env, r.When)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.when: %w", at, err))
		}
		r.when = prg
	}
	if r.OnViolation != "" && !validOnViolation(r.OnViolation) {
		errs = append(errs, fmt.Errorf("%s.on_violation: must be refuse, end or quarantine", at))
	}
	switch {
	case r.Approvals != nil && eff != RequireApproval:
		errs = append(errs, fmt.Errorf("%s.approvals: only a require_approval rule takes approvals", at))
	case eff == RequireApproval:
		if r.Approvals == nil {
			r.Approvals = &Approvals{}
		}
		errs = append(errs, r.Approvals.validate(at+".approvals")...)
	}
	return errs
}

func (a *Approvals) validate(at string) []error {
	var errs []error
	if a.Count == 0 {
		a.Count = DefaultApprovals
	}
	if a.Count < 1 || a.Count > MaxApprovals {
		errs = append(errs, fmt.Errorf("%s.count: must be 1 to %d", at, MaxApprovals))
	}
	if a.Within == 0 {
		a.Within = DefaultApprovalWithin
	}
	if a.Within < 0 || a.Within > MaxApprovalWithin {
		errs = append(errs, fmt.Errorf("%s.within: must be more than 0 and at most %s", at, MaxApprovalWithin))
	}
	for i, ap := range a.Approvers {
		if !validPattern(ap) {
			errs = append(errs, fmt.Errorf("%s.approvers[%d]: must be a principal id or a prefix ending in a single trailing \"*\"", at, i))
		}
	}
	return errs
}

// validPattern: non-empty, with "*" at most once and only at the end.
func validPattern(p string) bool {
	i := strings.IndexByte(p, '*')
	return p != "" && (i < 0 || i == len(p)-1)
}

// anyMatch reports whether s matches one of patterns: "*", the exact
// string, or a prefix ending in "*".
func anyMatch(patterns []string, s string) bool {
	for _, p := range patterns {
		if p == "*" || p == s || strings.HasSuffix(p, "*") && strings.HasPrefix(s, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// MatchPattern reports whether s matches pattern as approvers, actors
// and principals lists match: exact, or a prefix ending in "*".
func MatchPattern(pattern, s string) bool { return anyMatch([]string{pattern}, s) }
