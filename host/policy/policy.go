package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Policy decides, before anything reaches a provider, whether an action
// may run. Rules are tried in order; the first that matches decides; none
// matching means Default (deny unless set to allow).
type Policy struct {
	Version string `yaml:"version"`
	Default string `yaml:"default"` // allow | deny (default deny)
	Rules   []Rule `yaml:"rules"`
}

// Rule matches on every field it sets.
type Rule struct {
	Name   string `yaml:"name"`
	Effect string `yaml:"effect"` // allow | deny
	// Plugins are exact names, or "*".
	Plugins []string `yaml:"plugins"`
	// Methods are full method names; a trailing "*" matches a prefix.
	Methods []string `yaml:"methods"`
	// RiskClasses: READ, LOW, WRITE, PRIVILEGED.
	RiskClasses []string `yaml:"risk_classes"`
	// DryRun, when set, matches only dry runs (true) or real runs (false).
	DryRun *bool `yaml:"dry_run"`
}

// Decision is the policy's answer and why.
type Decision struct {
	Allow bool
	Rule  string // the rule that decided, or "default"
}

// Load reads a policy file strictly.
func Load(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(b)
}

// Parse decodes a policy strictly and validates it.
func Parse(b []byte) (*Policy, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	p := &Policy{}
	if err := dec.Decode(p); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("policy: %w", err)
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
	for i, r := range p.Rules {
		if r.Effect != "allow" && r.Effect != "deny" {
			errs = append(errs, fmt.Errorf("policy.rules[%d].effect: must be allow or deny", i))
		}
		for _, rc := range r.RiskClasses {
			if _, ok := ParseRisk(rc); !ok {
				errs = append(errs, fmt.Errorf("policy.rules[%d].risk_classes: unknown class", i))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// AllowAll is the policy of `airlock dev`.
func AllowAll() *Policy { return &Policy{Version: "v1", Default: "allow"} }

// Decide evaluates the policy for one action.
func (p *Policy) Decide(plugin, method string, risk Risk, dryRun bool) Decision {
	for i, r := range p.Rules {
		if r.matches(plugin, method, risk, dryRun) {
			name := r.Name
			if name == "" {
				name = fmt.Sprintf("rules[%d]", i)
			}
			return Decision{Allow: r.Effect == "allow", Rule: name}
		}
	}
	return Decision{Allow: p.Default == "allow", Rule: "default"}
}

func (r Rule) matches(plugin, method string, risk Risk, dryRun bool) bool {
	if len(r.Plugins) > 0 && !anyMatch(r.Plugins, plugin) {
		return false
	}
	if len(r.Methods) > 0 && !anyMatch(r.Methods, method) {
		return false
	}
	if len(r.RiskClasses) > 0 {
		ok := false
		for _, rc := range r.RiskClasses {
			if want, _ := ParseRisk(rc); want == risk {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return r.DryRun == nil || *r.DryRun == dryRun
}

func anyMatch(patterns []string, s string) bool {
	for _, p := range patterns {
		if p == "*" || p == s || strings.HasSuffix(p, "*") && strings.HasPrefix(s, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}
