package broker

import (
	"fmt"
	"slices"
)

// The decision point's context a handle carries: the run and access
// grant it was issued under, the budgets the proxy charges its egress to,
// the regions it may reach and what a violation with it does. The host
// fills them from its decision; a plugin never does.

// What a handle's violation does beyond the refusal (Grant.OnViolation).
const (
	// OnViolationRefuse refuses the request, and records the violation.
	OnViolationRefuse = "refuse"
	// OnViolationEnd also revokes the handle's invocation at once, so no
	// later request of it gets out; the host ends the invocation.
	OnViolationEnd = "end"
	// OnViolationQuarantine is OnViolationEnd, and the host quarantines
	// the plugin until an operator acts.
	OnViolationQuarantine = "quarantine"
)

// Bounds of the decision context of an issue request.
const (
	MaxBudgetLines   = 8
	MaxBudgetKey     = MaxIDBytes + 16 // "invocation:" and an id
	MaxResidency     = 32
	MaxRegionBytes   = 32
	regionRule       = "a region is 1-32 lower-case letters, digits and -"
	violationOptions = "on_violation: one of refuse, end, quarantine"
)

// validRegion reports whether s is a region name: [a-z0-9-]{1,32}.
func validRegion(s string) bool {
	if s == "" || len(s) > MaxRegionBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ResidencyAllows reports whether region may be reached under residency:
// an empty residency is no limit; under one, a place without a region is
// refused, since nothing says where it is.
func ResidencyAllows(residency []string, region string) bool {
	if len(residency) == 0 {
		return true
	}
	return region != "" && slices.Contains(residency, region)
}

// RegionOf is the region of a request to host, port and path under the
// intent binding: that of the first of its destinations covering the
// place that names a region, else the binding's own.
func (in Intent) RegionOf(host string, port int, path string) string {
	for _, d := range in.Destinations {
		if d.Region != "" && HostMatches(d.Host, host) && d.Port == port && PathMatches(d.PathPrefix, path) {
			return d.Region
		}
	}
	return in.Region
}

// checkDecision bounds and checks the decision context of an issue
// request, and returns its on_violation with the default filled in.
// Budget keys and run and grant ids come from the host; they are bounded
// because the proxy sends each key to the ledger on every request.
func checkDecision(req IssueRequest) (string, error) {
	switch {
	case len(req.RunID) > MaxIDBytes:
		return "", fmt.Errorf("%w: run id: at most %d bytes", ErrBadRequest, MaxIDBytes)
	case len(req.AccessGrantID) > MaxIDBytes:
		return "", fmt.Errorf("%w: access grant id: at most %d bytes", ErrBadRequest, MaxIDBytes)
	case len(req.Budget) > MaxBudgetLines:
		return "", fmt.Errorf("%w: budget: at most %d lines", ErrBadRequest, MaxBudgetLines)
	case len(req.Residency) > MaxResidency:
		return "", fmt.Errorf("%w: residency: at most %d regions", ErrBadRequest, MaxResidency)
	}
	for i, l := range req.Budget {
		lim := l.Limits
		if l.Key == "" || len(l.Key) > MaxBudgetKey {
			return "", fmt.Errorf("%w: budget[%d].key: required, at most %d bytes", ErrBadRequest, i, MaxBudgetKey)
		}
		if slices.ContainsFunc(req.Budget[:i], func(o BudgetLine) bool { return o.Key == l.Key }) {
			// A charge takes each key once.
			return "", fmt.Errorf("%w: budget[%d].key: repeats an earlier line's", ErrBadRequest, i)
		}
		if lim.Calls < 0 || lim.CostMicros < 0 || lim.EgressRequests < 0 || lim.EgressBytes < 0 || lim.Tokens < 0 {
			return "", fmt.Errorf("%w: budget[%d].limits: must not be negative", ErrBadRequest, i)
		}
	}
	for i, r := range req.Residency {
		if !validRegion(r) {
			return "", fmt.Errorf("%w: residency[%d]: %s", ErrBadRequest, i, regionRule)
		}
	}
	switch req.OnViolation {
	case "":
		return OnViolationRefuse, nil
	case OnViolationRefuse, OnViolationEnd, OnViolationQuarantine:
		return req.OnViolation, nil
	}
	return "", fmt.Errorf("%w: %s", ErrBadRequest, violationOptions)
}
