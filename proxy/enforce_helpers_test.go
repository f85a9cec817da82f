package proxy

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-dev/airlock/broker"
)

// ledgerForTest is the ledger enforcement tests run on: the handle
// store's own when it keeps one (nil here: the proxy takes the broker's
// store), else a ledger in memory with the semantics broker.Ledger
// documents, so the same tests run on the real stores once they
// implement it.
func ledgerForTest() broker.Ledger {
	if _, ok := any((*broker.MemoryStore)(nil)).(broker.Ledger); ok {
		return nil
	}
	return newTestLedger()
}

// testLedger keeps spend, violations and access grants in memory, with
// the charge semantics of the handle stores' ledger.
type testLedger struct {
	mu         sync.Mutex
	spent      map[string]broker.Spend
	violations []broker.Violation
	grants     map[string]*broker.AccessGrant
}

func newTestLedger() *testLedger {
	return &testLedger{spent: map[string]broker.Spend{}, grants: map[string]*broker.AccessGrant{}}
}

var _ broker.Ledger = (*testLedger)(nil)

// dims names the dimensions of a Spend, as BudgetExhaustedError does.
func dims(s *broker.Spend) []struct {
	name string
	v    *int64
} {
	return []struct {
		name string
		v    *int64
	}{{"calls", &s.Calls}, {"cost_micros", &s.CostMicros}, {"egress_requests", &s.EgressRequests},
		{"egress_bytes", &s.EgressBytes}, {"tokens", &s.Tokens}}
}

func (l *testLedger) Charge(_ context.Context, lines []broker.BudgetLine, add broker.Spend) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range lines {
		sp, lim := l.spent[line.Key], line.Limits
		sd, ld, ad := dims(&sp), dims(&lim), dims(&add)
		for i := range sd {
			// As the stores do: a charge of nothing is refused once a
			// limited dimension is spent; a charge, only on the
			// dimensions it adds to.
			l, c, a := *ld[i].v, *sd[i].v, *ad[i].v
			if l > 0 && (add == (broker.Spend{}) && c >= l || a > 0 && c+a > l) {
				return &broker.BudgetExhaustedError{Key: line.Key, Dimension: sd[i].name, Limit: *ld[i].v, Spent: *sd[i].v}
			}
		}
	}
	for _, line := range lines {
		sp := l.spent[line.Key]
		sd, ad := dims(&sp), dims(&add)
		for i := range sd {
			*sd[i].v += *ad[i].v
		}
		l.spent[line.Key] = sp
	}
	return nil
}

func (l *testLedger) Spent(_ context.Context, key string) (broker.Spend, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent[key], nil
}

func (l *testLedger) RecordViolation(_ context.Context, v broker.Violation) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, v)
	return nil
}

func (l *testLedger) Violations(_ context.Context, inv string) ([]broker.Violation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []broker.Violation
	for _, v := range l.violations {
		if v.InvocationID == inv {
			out = append(out, v)
		}
	}
	return out, nil
}

func (l *testLedger) PluginViolations(_ context.Context, plugin string, since time.Time) ([]broker.Violation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []broker.Violation
	for _, v := range l.violations {
		if v.PluginID == plugin && !v.At.Before(since) {
			out = append(out, v)
		}
	}
	return out, nil
}

func (l *testLedger) PutAccessGrant(_ context.Context, g *broker.AccessGrant) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := *g
	l.grants[g.ID] = &c
	return nil
}

func (l *testLedger) GetAccessGrant(_ context.Context, id string) (*broker.AccessGrant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.grants[id]
	if !ok {
		return nil, broker.ErrGrantUnknown
	}
	c := *g
	return &c, nil
}

func (l *testLedger) ListAccessGrants(context.Context) ([]*broker.AccessGrant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*broker.AccessGrant
	for _, g := range l.grants {
		c := *g
		out = append(out, &c)
	}
	return out, nil
}

func (l *testLedger) RevokeAccessGrant(_ context.Context, id, by string, at time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.grants[id]
	if !ok {
		return false, broker.ErrGrantUnknown
	}
	if !g.RevokedAt.IsZero() {
		return false, nil
	}
	g.RevokedAt, g.RevokedBy = at, by
	return true, nil
}

// Approvals are not the proxy's.
var errNotInTestLedger = errors.New("not kept by the test ledger")

func (l *testLedger) PutApproval(context.Context, *broker.Approval) error { return errNotInTestLedger }
func (l *testLedger) GetApproval(context.Context, string) (*broker.Approval, error) {
	return nil, errNotInTestLedger
}
func (l *testLedger) ListApprovals(context.Context) ([]*broker.Approval, error) {
	return nil, errNotInTestLedger
}
func (l *testLedger) DecideApproval(context.Context, string, string, bool, time.Time) (*broker.Approval, error) {
	return nil, errNotInTestLedger
}

// downLedger fails every call with ErrStoreUnavailable while down is set.
type downLedger struct {
	broker.Ledger
	down atomic.Bool
}

func (d *downLedger) Charge(ctx context.Context, lines []broker.BudgetLine, add broker.Spend) error {
	if d.down.Load() {
		return broker.ErrStoreUnavailable
	}
	return d.Ledger.Charge(ctx, lines, add)
}

func (d *downLedger) GetAccessGrant(ctx context.Context, id string) (*broker.AccessGrant, error) {
	if d.down.Load() {
		return nil, broker.ErrStoreUnavailable
	}
	return d.Ledger.GetAccessGrant(ctx, id)
}

// newEnforceFixture is the standard fixture on the test ledger, with
// intent eu.api: in eu-west-1, but for /us/ in us-east-1.
func newEnforceFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	o := fixtureOpts{ledger: ledgerForTest(), reg: prometheus.NewRegistry()}
	f := newFixtureWith(t, mutate, o)
	in, _ := f.b.Intent("api.write")
	in.Region = "eu-west-1"
	in.Destinations = []broker.Destination{{Host: "api.example.com", Port: f.up.port, PathPrefix: "/us/", Region: "us-east-1"},
		{Host: "api.example.com", Port: f.up.port, PathPrefix: "/"}, {Host: "*.example.org", Port: f.up.port, PathPrefix: "/"}}
	intents := map[string]broker.Intent{"eu.api": in}
	for _, name := range []string{"api.write", "api.read"} {
		intents[name], _ = f.b.Intent(name)
	}
	f.b.SetIntents(intents)
	if f.proxy.ledger == nil {
		t.Fatal("the proxy has no ledger")
	}
	return f
}

// issueCtx mints a handle for intent in invocation inv (plugin-1, the
// fixture's destinations) with the decision context of ctx.
func (f *fixture) issueCtx(t *testing.T, intent, inv string, ctx broker.IssueRequest) string {
	t.Helper()
	ctx.PluginID, ctx.InvocationID, ctx.Intent, ctx.Deadline = "plugin-1", inv, intent, time.Now().Add(time.Minute)
	ctx.Destinations = []broker.Destination{{Host: "api.example.com", Port: f.up.port}, {Host: "*.example.org", Port: f.up.port}}
	iss, err := f.b.Issue(context.Background(), ctx)
	if err != nil {
		t.Fatal(err)
	}
	return iss.Handle
}

// violationKindsOf lists the kinds recorded under an invocation.
func violationKindsOf(t *testing.T, l broker.Ledger, inv string) []string {
	t.Helper()
	vs, err := l.Violations(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, v := range vs {
		kinds = append(kinds, v.Kind)
	}
	slices.Sort(kinds)
	return kinds
}

func spentOf(t *testing.T, l broker.Ledger, key string) broker.Spend {
	t.Helper()
	s, err := l.Spent(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
