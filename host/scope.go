package host

import "github.com/airlock-dev/airlock/broker"

// IssueScope is the decision's context that every handle of an
// invocation carries to the broker and the egress proxy: the run and
// access grant it runs under, the budgets its egress is charged to, the
// regions it may reach, and how a violation is answered.
type IssueScope struct {
	RunID         string
	AccessGrantID string
	Budget        []broker.BudgetLine
	Residency     []string
	OnViolation   string
}

// Apply puts s into req.
func (s IssueScope) Apply(req *broker.IssueRequest) {
	req.RunID, req.AccessGrantID, req.Budget, req.Residency, req.OnViolation =
		s.RunID, s.AccessGrantID, s.Budget, s.Residency, s.OnViolation
}
