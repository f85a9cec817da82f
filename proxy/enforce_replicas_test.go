package proxy

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Two replicas (a broker and a proxy each) on one real Redis enforce one
// handle's limits together: a run's budget spent on both, an access
// grant revoked through one refused on the other, a violation on one
// recorded for the other to read and its on_violation end revoking the
// invocation on both. The ledger is the Redis store's own when it keeps
// one, else one ledger both proxies share.
func TestDecisionLimitsAcrossReplicas(t *testing.T) {
	r := testenv.Redis(t)
	ca := testenv.NewCA(t)
	var shared broker.Ledger
	if _, ok := any((*broker.RedisStore)(nil)).(broker.Ledger); !ok {
		shared = newTestLedger()
	}
	var replicas [2]*fixture
	var ledgers [2]broker.Ledger
	for i := range replicas {
		// No local grant cache: a revocation is seen by the other
		// replica at its next request, not when pub/sub delivers it.
		store, err := broker.NewRedisStore(broker.RedisConfig{Address: r.Addr, KeyPrefix: "replicas-test:", LocalCache: -1}, time.Minute, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		replicas[i] = newFixtureWith(t, nil, fixtureOpts{ca: ca, store: store, ledger: shared})
		ledgers[i] = replicas[i].proxy.ledger
		if ledgers[i] == nil {
			t.Fatal("a replica has no ledger")
		}
	}
	a, b := replicas[0], replicas[1]
	ctx := context.Background()
	get := func(f *fixture, h, path string) (int, string) {
		t.Helper()
		status, code, _ := do(t, f.client(h), http.MethodGet, a.url(path), nil, "")
		return status, code
	}

	run := broker.BudgetKeyRun("run-2r")
	h := a.issueCtx(t, "api.write", "inv-2r-budget", broker.IssueRequest{RunID: "run-2r",
		Budget: []broker.BudgetLine{{Key: run, Limits: broker.Limits{EgressRequests: 2}}}})
	for i, f := range []*fixture{a, b} {
		if status, code := get(f, h, "/x"); status != http.StatusOK {
			t.Fatalf("replica %d: %d %q", i, status, code)
		}
	}
	if status, code := get(b, h, "/x"); status != http.StatusTooManyRequests || code != CodeBudgetExhausted {
		t.Fatalf("third request, on the second replica: %d %q", status, code)
	}
	if got := spentOf(t, ledgers[1], run).EgressRequests; got != 2 {
		t.Fatalf("the run spent %d requests", got)
	}

	now := time.Now()
	if err := ledgers[0].PutAccessGrant(ctx, &broker.AccessGrant{ID: "grant-2r", Principal: "alice", IssuedBy: "ops",
		IssuedAt: now, NotAfter: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	hg := a.issueCtx(t, "api.write", "inv-2r-grant", broker.IssueRequest{AccessGrantID: "grant-2r"})
	if status, code := get(b, hg, "/x"); status != http.StatusOK {
		t.Fatalf("live grant on the second replica: %d %q", status, code)
	}
	if _, err := ledgers[0].RevokeAccessGrant(ctx, "grant-2r", "bob", time.Now()); err != nil {
		t.Fatal(err)
	}
	if status, code := get(b, hg, "/x"); status != http.StatusForbidden || code != CodeGrantRevoked {
		t.Fatalf("revoked on the first, on the second: %d %q", status, code)
	}

	he := a.issueCtx(t, "api.write", "inv-2r-end", broker.IssueRequest{OnViolation: broker.OnViolationEnd})
	if _, code, _ := do(t, a.client(he), http.MethodGet, "http://other.example.net:"+strconv.Itoa(a.up.port)+"/x", nil, ""); code != CodeDestination {
		t.Fatalf("violation: %q", code)
	}
	if got := violationKindsOf(t, ledgers[1], "inv-2r-end"); !slices.Equal(got, []string{"destination_not_declared"}) {
		t.Fatalf("violations seen by the second replica: %v", got)
	}
	if status, code := get(b, he, "/x"); status != http.StatusForbidden || code != CodeHandleInvalid {
		t.Fatalf("after on_violation end, on the second replica: %d %q", status, code)
	}
}
