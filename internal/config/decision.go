package config

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
)

// Decision is the host.decision section: what the decision point
// counts and requires beyond the policy.
type Decision struct {
	// Budgets every invocation and every run (calls that name the same
	// run_id) get; a zero field is no limit. A grant's own budget is the
	// grant's.
	Budgets struct {
		Invocation Budget `yaml:"invocation"`
		Run        Budget `yaml:"run"`
	} `yaml:"budgets"`
	// Residency lists the regions calls may reach when no grant names
	// fewer; empty: no limit.
	Residency []string `yaml:"residency"`
	// RequireGrant refuses every call no live access grant covers
	// (grant_required), whatever the policy allows.
	RequireGrant bool `yaml:"require_grant"`
	// ApprovalPoll and WatchInterval: how often a waiting call looks at
	// its approval (250ms), and a running one at its grant and
	// violations (500ms).
	ApprovalPoll  time.Duration `yaml:"approval_poll"`
	WatchInterval time.Duration `yaml:"watch_interval"`
}

// Budget is one budget's limits.
type Budget struct {
	Calls          int64 `yaml:"calls"`
	CostMicros     int64 `yaml:"cost_micros"`
	EgressRequests int64 `yaml:"egress_requests"`
	EgressBytes    int64 `yaml:"egress_bytes"`
	Tokens         int64 `yaml:"tokens"`
}

func (b Budget) limits() broker.Limits { return broker.Limits(b) }

var regionName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// Validate returns every problem at once.
func (d Decision) Validate() error {
	var errs []error
	for name, b := range map[string]Budget{"invocation": d.Budgets.Invocation, "run": d.Budgets.Run} {
		if b.Calls < 0 || b.CostMicros < 0 || b.EgressRequests < 0 || b.EgressBytes < 0 || b.Tokens < 0 {
			errs = append(errs, fmt.Errorf("host.decision.budgets.%s: limits must not be negative", name))
		}
	}
	for i, r := range d.Residency {
		if !regionName.MatchString(r) {
			errs = append(errs, fmt.Errorf("host.decision.residency[%d]: a region is 1-32 of a-z, 0-9 and -", i))
		}
	}
	if d.ApprovalPoll < 0 || d.ApprovalPoll > 0 && d.ApprovalPoll < 10*time.Millisecond || d.ApprovalPoll > time.Minute {
		errs = append(errs, errors.New("host.decision.approval_poll: must be between 10ms and 1m"))
	}
	if d.WatchInterval < 0 || d.WatchInterval > 0 && d.WatchInterval < 10*time.Millisecond || d.WatchInterval > time.Minute {
		errs = append(errs, errors.New("host.decision.watch_interval: must be between 10ms and 1m"))
	}
	return errors.Join(errs...)
}

// Options are the host's DecisionConfig.
func (d Decision) Options() host.DecisionConfig {
	return host.DecisionConfig{InvocationBudget: d.Budgets.Invocation.limits(), RunBudget: d.Budgets.Run.limits(),
		Residency: d.Residency, RequireGrant: d.RequireGrant, ApprovalPoll: d.ApprovalPoll, WatchInterval: d.WatchInterval}
}

// Operator says whether p is an operator of the control API
// (host.control_operators).
func (c Host) Operator(p host.Principal) bool {
	if len(c.ControlOperators) == 0 {
		return p.Method == "peer" || p.Method == "mtls" || p.ID == "control-token"
	}
	for _, pat := range c.ControlOperators {
		if policy.MatchPattern(pat, p.ID) {
			return true
		}
	}
	return false
}
