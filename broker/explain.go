package broker

import "context"

// Explainer says what the egress proxy would decide for a request under a
// grant, sending nothing (proxy.Server implements it).
type Explainer interface {
	Explain(ctx context.Context, g *Grant, method, rawURL string) Explanation
}

// Explanation is the proxy's decision path for one request.
type Explanation struct {
	Allowed bool
	Code    string // the denial code, when not allowed
	Steps   []ExplainStep
}

// ExplainStep is one check and its verdict.
type ExplainStep struct {
	Check  string
	OK     bool
	Detail string
}
