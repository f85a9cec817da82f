package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-dev/airlock/broker"
)

// budgetBody decodes a budget_exhausted answer.
func budgetBody(t *testing.T, body string) (code, budget, dimension string) {
	t.Helper()
	var b struct{ Error, Budget, Dimension string }
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return b.Error, b.Budget, b.Dimension
}

// A handle under a residency reaches only destinations of its regions:
// the intent binding's region, overridden by a destination's own. The
// refusal is audited and recorded as a violation; Explain names it.
func TestResidencyAtProxy(t *testing.T) {
	f := newEnforceFixture(t, nil)
	h := f.issueCtx(t, "eu.api", "inv-res", broker.IssueRequest{Residency: []string{"eu-west-1"}})
	c := f.client(h)
	if status, code, body := do(t, c, http.MethodGet, f.url("/eu/x"), nil, ""); status != http.StatusOK {
		t.Fatalf("in region: %d %s %s", status, code, body)
	}
	status, code, _ := do(t, c, http.MethodGet, f.url("/us/x"), nil, "")
	if status != http.StatusForbidden || code != CodeResidency {
		t.Fatalf("destination in us-east-1: %d %q", status, code)
	}
	if n := f.up.count(); n != 1 {
		t.Fatalf("the upstream saw %d requests", n)
	}
	if !strings.Contains(f.audit.String(), `"code":"residency_violation"`) {
		t.Fatalf("no audit line: %s", f.audit.String())
	}
	if got := violationKindsOf(t, f.proxy.ledger, "inv-res"); !slices.Equal(got, []string{"residency_violation"}) {
		t.Fatalf("violations %v", got)
	}
	// A handle without a residency reaches both.
	free := f.client(f.issueCtx(t, "eu.api", "inv-free", broker.IssueRequest{}))
	if status, _, _ := do(t, free, http.MethodGet, f.url("/us/x"), nil, ""); status != http.StatusOK {
		t.Fatalf("no residency: %d", status)
	}
	g, err := f.b.Resolve(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	ex := f.proxy.Explain(context.Background(), g, "GET", f.url("/us/x"))
	if ex.Code != CodeResidency {
		t.Fatalf("explain: %+v", ex)
	}
}

// Each request counts one egress request on every line before it is
// sent; a line that would go over refuses it 429, naming the budget and
// dimension, and nothing is counted on any line.
func TestEgressRequestBudget(t *testing.T) {
	f := newEnforceFixture(t, nil)
	inv, run := broker.BudgetKeyInvocation("inv-b"), broker.BudgetKeyRun("run-1")
	h := f.issueCtx(t, "api.write", "inv-b", broker.IssueRequest{RunID: "run-1", Budget: []broker.BudgetLine{
		{Key: inv, Limits: broker.Limits{EgressRequests: 5}}, {Key: run, Limits: broker.Limits{EgressRequests: 2}}}})
	c := f.client(h)
	for i := range 2 {
		if status, code, _ := do(t, c, http.MethodGet, f.url("/x"), nil, ""); status != http.StatusOK {
			t.Fatalf("request %d: %d %q", i, status, code)
		}
	}
	resp, err := c.Get(f.url("/x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("third request: %d, Retry-After %q: a spent budget does not come back in a second", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	status, code, body := do(t, c, http.MethodGet, f.url("/x"), nil, "")
	errCode, budget, dim := budgetBody(t, body)
	if status != http.StatusTooManyRequests || code != CodeBudgetExhausted || errCode != CodeBudgetExhausted || budget != run || dim != "egress_requests" {
		t.Fatalf("fourth request: %d %q %s", status, code, body)
	}
	if n := f.up.count(); n != 2 {
		t.Fatalf("the upstream saw %d requests", n)
	}
	if got := spentOf(t, f.proxy.ledger, inv).EgressRequests; got != 2 {
		t.Fatalf("the invocation's line counted %d requests: not all or nothing", got)
	}
	if got := violationKindsOf(t, f.proxy.ledger, "inv-b"); !slices.Equal(got, []string{"budget_exhausted", "budget_exhausted"}) {
		t.Fatalf("violations %v", got)
	}
	// Another handle on the same run is refused too: the run's budget
	// is shared.
	other := f.client(f.issueCtx(t, "api.write", "inv-b2", broker.IssueRequest{RunID: "run-1",
		Budget: []broker.BudgetLine{{Key: run, Limits: broker.Limits{EgressRequests: 2}}}}))
	if status, code, _ := do(t, other, http.MethodGet, f.url("/x"), nil, ""); status != http.StatusTooManyRequests || code != CodeBudgetExhausted {
		t.Fatalf("same run, other handle: %d %q", status, code)
	}
}

// The request and response body bytes relayed count after the exchange:
// the request that goes over is answered, the next is refused.
func TestEgressByteBudget(t *testing.T) {
	f := newEnforceFixture(t, nil)
	key := broker.BudgetKeyInvocation("inv-bytes")
	h := f.issueCtx(t, "api.write", "inv-bytes", broker.IssueRequest{Budget: []broker.BudgetLine{
		{Key: key, Limits: broker.Limits{EgressBytes: 100}}}})
	c := f.client(h)
	upload := strings.Repeat("u", 150)
	status, _, body := do(t, c, http.MethodPost, f.url("/echo"), nil, upload)
	if status != http.StatusOK {
		t.Fatalf("first: %d %s", status, body)
	}
	if got, want := spentOf(t, f.proxy.ledger, key), (broker.Spend{EgressRequests: 1, EgressBytes: int64(len(upload) + len(body))}); got != want {
		t.Fatalf("spent %+v, want %+v", got, want)
	}
	status, code, body := do(t, c, http.MethodGet, f.url("/x"), nil, "")
	if _, budget, dim := budgetBody(t, body); status != http.StatusTooManyRequests || code != CodeBudgetExhausted || budget != key || dim != "egress_bytes" {
		t.Fatalf("second: %d %q %s", status, code, body)
	}
}

// Inside an intercepted CONNECT tunnel each request is charged.
func TestEgressBudgetInTunnel(t *testing.T) {
	dir := t.TempDir()
	caFile := dir + "/intercept-ca.pem"
	f := newEnforceFixture(t, func(c *Config) {
		c.Intercept = InterceptConfig{CAFile: caFile, CAKeyFile: dir + "/intercept-ca.key"}
	})
	key := broker.BudgetKeyRun("run-t")
	h := f.issueCtx(t, "api.write", "inv-t", broker.IssueRequest{Budget: []broker.BudgetLine{
		{Key: key, Limits: broker.Limits{EgressRequests: 2}}}})
	c := f.httpsClient(t, h, caFile)
	for i := range 2 {
		if status, code, body := do(t, c, http.MethodGet, f.httpsURL("/x"), nil, ""); status != http.StatusOK {
			t.Fatalf("request %d: %d %q %s", i, status, code, body)
		}
	}
	status, code, body := do(t, c, http.MethodGet, f.httpsURL("/x"), nil, "")
	if _, budget, _ := budgetBody(t, body); status != http.StatusTooManyRequests || code != CodeBudgetExhausted || budget != key {
		t.Fatalf("third in the tunnel: %d %q %s", status, code, body)
	}
	if got := spentOf(t, f.proxy.ledger, key); got.EgressRequests != 2 || got.EgressBytes != 4 { // "ok", twice
		t.Fatalf("spent %+v", got)
	}
}

// With the ledger down a handle with budget lines is refused 503
// budget_unavailable; one without is served as before.
func TestBudgetUnavailable(t *testing.T) {
	f := newEnforceFixture(t, nil)
	dl := &downLedger{Ledger: f.proxy.ledger}
	f.proxy.ledger = dl // before any request
	dl.down.Store(true)
	h := f.issueCtx(t, "api.write", "inv-down", broker.IssueRequest{Budget: []broker.BudgetLine{
		{Key: broker.BudgetKeyInvocation("inv-down"), Limits: broker.Limits{EgressRequests: 9}}}})
	if status, code, _ := do(t, f.client(h), http.MethodGet, f.url("/x"), nil, ""); status != http.StatusServiceUnavailable || code != CodeBudgetUnavailable {
		t.Fatalf("budget handle, ledger down: %d %q", status, code)
	}
	if status, _, _ := do(t, f.client(f.issue(t, "api.write", "inv-plain")), http.MethodGet, f.url("/x"), nil, ""); status != http.StatusOK {
		t.Fatalf("plain handle, ledger down: %d", status)
	}
	if n := f.up.count(); n != 1 {
		t.Fatalf("the upstream saw %d requests", n)
	}
}

// A handle issued under an access grant works while the grant is live
// and is refused grant_revoked from the request after its revocation.
func TestAccessGrantRevokedMidway(t *testing.T) {
	f := newEnforceFixture(t, nil)
	ctx := context.Background()
	l := f.proxy.ledger
	now := time.Now()
	for _, g := range []*broker.AccessGrant{
		{ID: "grant-live", Principal: "alice", IssuedBy: "ops", IssuedAt: now, NotAfter: now.Add(time.Hour)},
		{ID: "grant-lapsed", Principal: "alice", IssuedBy: "ops", IssuedAt: now.Add(-time.Hour), NotAfter: now.Add(-time.Minute)},
	} {
		if err := l.PutAccessGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	c := f.client(f.issueCtx(t, "api.write", "inv-g", broker.IssueRequest{AccessGrantID: "grant-live"}))
	if status, code, _ := do(t, c, http.MethodGet, f.url("/x"), nil, ""); status != http.StatusOK {
		t.Fatalf("live grant: %d %q", status, code)
	}
	if ok, err := l.RevokeAccessGrant(ctx, "grant-live", "bob", time.Now()); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	if status, code, _ := do(t, c, http.MethodGet, f.url("/x"), nil, ""); status != http.StatusForbidden || code != CodeGrantRevoked {
		t.Fatalf("revoked grant: %d %q", status, code)
	}
	for _, id := range []string{"grant-lapsed", "grant-never-issued"} {
		c := f.client(f.issueCtx(t, "api.write", "inv-"+id, broker.IssueRequest{AccessGrantID: id}))
		if status, code, _ := do(t, c, http.MethodGet, f.url("/x"), nil, ""); status != http.StatusForbidden || code != CodeGrantRevoked {
			t.Fatalf("%s: %d %q", id, status, code)
		}
	}
	if n := f.up.count(); n != 1 {
		t.Fatalf("the upstream saw %d requests", n)
	}
}

// Refusals that are violations are recorded under the handle's
// invocation with their kind; other refusals are not.
func TestViolationsRecorded(t *testing.T) {
	f := newEnforceFixture(t, func(c *Config) { c.Limits.MaxRequestBody = 1024 })
	h := f.issueCtx(t, "api.write", "inv-v", broker.IssueRequest{})
	c := f.client(h)
	port := strconv.Itoa(f.up.port)
	if status, code, _ := do(t, c, http.MethodGet, "http://other.example.net:"+port+"/x", nil, ""); code != CodeDestination {
		t.Fatalf("undeclared: %d %q", status, code)
	}
	if status, code, _ := do(t, c, http.MethodGet, f.url("/x?leak="+h), nil, ""); code != CodeHandleInRequest {
		t.Fatalf("handle in request: %d %q", status, code)
	}
	if status, code, _ := do(t, c, http.MethodGet, "http://api.example.com:1/x", nil, ""); code != CodeDestination {
		t.Fatalf("undeclared port: %d %q", status, code)
	}
	// Not violations: a request too large.
	if status, code, _ := do(t, c, http.MethodPost, f.url("/x"), nil, strings.Repeat("x", 1025)); code != CodeBodyTooLarge {
		t.Fatalf("large body: %d %q", status, code)
	}
	want := []string{"destination_not_declared", "destination_not_declared", "handle_in_request"}
	if got := violationKindsOf(t, f.proxy.ledger, "inv-v"); !slices.Equal(got, want) {
		t.Fatalf("violations %v, want %v", got, want)
	}
	vs, _ := f.proxy.ledger.PluginViolations(context.Background(), "plugin-1", time.Time{})
	if len(vs) != 3 {
		t.Fatalf("plugin violations %+v", vs)
	}
	if n := testutil.ToFloat64(f.proxy.metrics.violations.WithLabelValues("destination_not_declared", "true")); n != 2 {
		t.Fatalf("airlock_proxy_violations_total{kind=destination_not_declared,recorded=true} = %v", n)
	}
}

// Another plugin's handle presented on a plugin's own listener is
// recorded under the handle's invocation and plugin, and under the
// plugin that presented it.
func TestViolationForeignHandle(t *testing.T) {
	f := newEnforceFixture(t, nil)
	h := f.issueCtx(t, "api.write", "inv-owner", broker.IssueRequest{})
	addr := f.serveSandbox(t, "plugin-2")
	c := proxyClient(t, addr, h, "", false)
	if status, code, _ := do(t, c, http.MethodGet, f.url("/x"), nil, ""); code != CodeHandleNotThisPlugins {
		t.Fatalf("foreign handle: %d %q", status, code)
	}
	if got := violationKindsOf(t, f.proxy.ledger, "inv-owner"); !slices.Equal(got, []string{"handle_other_plugin"}) {
		t.Fatalf("owner's violations %v", got)
	}
	vs, _ := f.proxy.ledger.PluginViolations(context.Background(), "plugin-2", time.Time{})
	if len(vs) != 1 || vs[0].Kind != "handle_other_plugin" || vs[0].InvocationID != "" {
		t.Fatalf("presenter's violations %+v", vs)
	}
}

// on_violation end revokes the handle's invocation at the violation: the
// next request, even a declared one, is refused as a revoked handle, and
// so is every other handle of the invocation.
func TestOnViolationEndRevokesInvocation(t *testing.T) {
	f := newEnforceFixture(t, nil)
	h := f.issueCtx(t, "api.write", "inv-end", broker.IssueRequest{OnViolation: broker.OnViolationEnd})
	sibling := f.issueCtx(t, "api.read", "inv-end", broker.IssueRequest{OnViolation: broker.OnViolationEnd})
	c := f.client(h)
	if status, _, _ := do(t, c, http.MethodGet, f.url("/x"), nil, ""); status != http.StatusOK {
		t.Fatalf("before: %d", status)
	}
	if _, code, _ := do(t, c, http.MethodGet, "http://other.example.net:"+strconv.Itoa(f.up.port)+"/x", nil, ""); code != CodeDestination {
		t.Fatalf("violation: %q", code)
	}
	for _, hh := range []string{h, sibling} {
		if status, code, _ := do(t, f.client(hh), http.MethodGet, f.url("/x"), nil, ""); status != http.StatusForbidden || code != CodeHandleInvalid {
			t.Fatalf("after: %d %q", status, code)
		}
	}
	if _, err := f.b.Resolve(context.Background(), h); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("resolve after: %v", err)
	}
	// refuse (the default) leaves the invocation running.
	r := f.issueCtx(t, "api.write", "inv-refuse", broker.IssueRequest{})
	do(t, f.client(r), http.MethodGet, "http://other.example.net:"+strconv.Itoa(f.up.port)+"/x", nil, "")
	if status, _, _ := do(t, f.client(r), http.MethodGet, f.url("/x"), nil, ""); status != http.StatusOK {
		t.Fatalf("refuse only: %d", status)
	}
}
