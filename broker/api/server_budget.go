package api

import (
	"github.com/airlock-dev/airlock/broker"
	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"
)

// budgetToProto and budgetFromProto carry budget lines over the broker
// API.
func budgetToProto(lines []broker.BudgetLine) []*brokerv1.HandleBudgetLine {
	out := make([]*brokerv1.HandleBudgetLine, 0, len(lines))
	for _, l := range lines {
		out = append(out, &brokerv1.HandleBudgetLine{Key: l.Key, Calls: l.Limits.Calls, CostMicros: l.Limits.CostMicros,
			EgressRequests: l.Limits.EgressRequests, EgressBytes: l.Limits.EgressBytes, Tokens: l.Limits.Tokens})
	}
	return out
}

func budgetFromProto(lines []*brokerv1.HandleBudgetLine) []broker.BudgetLine {
	if len(lines) == 0 {
		return nil
	}
	out := make([]broker.BudgetLine, 0, len(lines))
	for _, l := range lines {
		out = append(out, broker.BudgetLine{Key: l.GetKey(), Limits: broker.Limits{Calls: l.GetCalls(), CostMicros: l.GetCostMicros(),
			EgressRequests: l.GetEgressRequests(), EgressBytes: l.GetEgressBytes(), Tokens: l.GetTokens()}})
	}
	return out
}
