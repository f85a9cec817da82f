package control_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/policy"
)

// ledgerFixture is a control API with a ledger on a memory store, whose
// caller is the principal named in the X-Test-Principal header (the
// authentication middleware's part, done by the test).
type ledgerFixture struct {
	srv     *httptest.Server
	store   *broker.MemoryStore
	evPath  string
	mu      sync.Mutex
	revoked []string
}

func newLedgerFixture(t *testing.T) *ledgerFixture { return newLedgerFixtureWith(t, nil) }

// newLedgerFixtureWith lets wrap change the evidence log before use.
func newLedgerFixtureWith(t *testing.T, wrap func(*evidence.Log)) *ledgerFixture {
	t.Helper()
	f := &ledgerFixture{store: broker.NewMemoryStore(1000, time.Minute, time.Hour, nil),
		evPath: filepath.Join(t.TempDir(), "evidence.jsonl")}
	l, err := evidence.Open(f.evPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if wrap != nil {
		wrap(l)
	}
	h := host.New(host.Options{Evidence: l, Policy: policy.AllowAll()})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	ctl := control.NewHandler(h)
	ctl.EnableLedger(f.store, func(p host.Principal) bool { return p.ID == "root" })
	ctl.SetGrantRevoked(func(id string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.revoked = append(f.revoked, id)
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.Header.Get("X-Test-Principal"); p != "" {
			r = r.WithContext(control.WithCaller(r.Context(), host.Principal{ID: p, Method: "token"}))
		}
		ctl.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// call sends method path with body as who and decodes the JSON answer.
func (f *ledgerFixture) call(t *testing.T, who, method, path, body string) (int, map[string]json.RawMessage) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if who != "" {
		req.Header.Set("X-Test-Principal", who)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func errCode(out map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(out["error"], &s)
	return s
}

// records returns the evidence records of type typ.
func (f *ledgerFixture) records(t *testing.T, typ string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(f.evPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r evidence.Record
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Type != typ {
			continue
		}
		var data map[string]any
		_ = json.Unmarshal(r.Data, &data)
		out = append(out, data)
	}
	return out
}

var grantIDRE = regexp.MustCompile(`^g_[0-9a-f]{32}$`)

// Only operators issue and revoke grants; anyone authenticated lists and
// shows them; issue and revocation are evidence, and a revocation runs
// the host's hook.
func TestGrantRoutes(t *testing.T) {
	f := newLedgerFixture(t)
	body := `{"principal":"alice","actor":"user:bob","plugins":["tickets"],"methods":["tickets.v1.Tickets/*"],
		"risk_ceiling":"write","ttl":"2h","budget":{"calls":20,"cost_micros":5000000},"residency":["eu"],"run_id":"run-1"}`
	if code, out := f.call(t, "", "POST", "/v1/grants", body); code != http.StatusUnauthorized || errCode(out) != "unauthenticated" {
		t.Fatalf("no principal: %d %s", code, out["error"])
	}
	if code, out := f.call(t, "alice", "POST", "/v1/grants", body); code != http.StatusForbidden || errCode(out) != "not_an_operator" {
		t.Fatalf("not an operator: %d %s", code, out["error"])
	}
	code, out := f.call(t, "root", "POST", "/v1/grants", body)
	if code != http.StatusCreated {
		t.Fatalf("issue: %d %s %s", code, out["error"], out["detail"])
	}
	var g control.GrantView
	if err := json.Unmarshal(out["grant"], &g); err != nil {
		t.Fatal(err)
	}
	if !grantIDRE.MatchString(g.ID) || g.IssuedBy != "root" || g.State != control.GrantLive || g.Budget.Calls != 20 ||
		g.NotAfter.Sub(g.IssuedAt) != 2*time.Hour || g.Actor != "user:bob" || g.Residency[0] != "eu" {
		t.Fatalf("issued: %+v", g.AccessGrant)
	}
	if rec := f.records(t, "grant.issued"); len(rec) != 1 || rec[0]["grant_id"] != g.ID || rec[0]["issued_by"] != "root" {
		t.Fatalf("grant.issued: %v", rec)
	}

	if err := f.store.Charge(context.Background(), []broker.BudgetLine{g.BudgetLine()}, broker.Spend{Calls: 3}); err != nil {
		t.Fatal(err)
	}
	code, out = f.call(t, "alice", "GET", "/v1/grants/"+g.ID, "")
	var spent broker.Spend
	_ = json.Unmarshal(out["spent"], &spent)
	if code != http.StatusOK || spent.Calls != 3 {
		t.Fatalf("show: %d spent %+v", code, spent)
	}
	code, out = f.call(t, "alice", "GET", "/v1/grants", "")
	var list []control.GrantView
	_ = json.Unmarshal(out["grants"], &list)
	if code != http.StatusOK || len(list) != 1 || list[0].ID != g.ID {
		t.Fatalf("list: %d %+v", code, list)
	}

	if code, out := f.call(t, "alice", "POST", "/v1/grants/"+g.ID+"/revoke", ""); code != http.StatusForbidden || errCode(out) != "not_an_operator" {
		t.Fatalf("revoke by a non-operator: %d %s", code, out["error"])
	}
	code, out = f.call(t, "root", "POST", "/v1/grants/"+g.ID+"/revoke", "")
	var live bool
	_ = json.Unmarshal(out["was_live"], &live)
	_ = json.Unmarshal(out["grant"], &g)
	if code != http.StatusOK || !live || g.State != control.GrantRevoked || g.RevokedBy != "root" {
		t.Fatalf("revoke: %d %v %+v", code, live, g)
	}
	if code, out = f.call(t, "root", "POST", "/v1/grants/"+g.ID+"/revoke", ""); code != http.StatusOK || string(out["was_live"]) != "false" {
		t.Fatalf("revoke again: %d %s", code, out["was_live"])
	}
	f.mu.Lock()
	hooked := append([]string(nil), f.revoked...)
	f.mu.Unlock()
	if len(hooked) != 2 || hooked[0] != g.ID {
		t.Fatalf("revocation hook: %v", hooked)
	}
	if rec := f.records(t, "grant.revoked"); len(rec) != 1 || rec[0]["revoked_by"] != "root" {
		t.Fatalf("grant.revoked: %v", rec)
	}
	if code, out := f.call(t, "root", "POST", "/v1/grants/g_none/revoke", ""); code != http.StatusNotFound || errCode(out) != "grant_unknown" {
		t.Fatalf("unknown: %d %s", code, out["error"])
	}
	if code, out := f.call(t, "alice", "GET", "/v1/grants/g_none", ""); code != http.StatusNotFound || errCode(out) != "grant_unknown" {
		t.Fatalf("unknown: %d %s", code, out["error"])
	}
}

// A grant request is decoded strictly and checked; the refusal names the
// field.
func TestGrantRequestValidation(t *testing.T) {
	f := newLedgerFixture(t)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct{ name, body, field string }{
		{"unknown field", `{"principal":"a","plugins":["p"],"ttl":"1h","admin":true}`, ""},
		{"no principal or actor", `{"plugins":["p"],"ttl":"1h"}`, "principal or actor"},
		{"covers nothing named", `{"principal":"a","ttl":"1h"}`, "plugins or risk_ceiling"},
		{"ttl too long", `{"principal":"a","plugins":["p"],"ttl":"721h"}`, "ttl"},
		{"no end", `{"principal":"a","plugins":["p"]}`, "ttl or not_after"},
		{"both ends", `{"principal":"a","plugins":["p"],"ttl":"1h","not_after":"` + future + `"}`, "ttl and not_after"},
		{"past end", `{"principal":"a","plugins":["p"],"not_after":"2001-01-01T00:00:00Z"}`, "not_after"},
		{"bad risk", `{"principal":"a","risk_ceiling":"max","ttl":"1h"}`, "risk_ceiling"},
		{"negative budget", `{"principal":"a","plugins":["p"],"ttl":"1h","budget":{"calls":-1}}`, "budget"},
		{"bad actor", `{"actor":"bob","plugins":["p"],"ttl":"1h"}`, "actor"},
		{"space in a name", `{"principal":"a","plugins":["p q"],"ttl":"1h"}`, "plugins[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := f.call(t, "root", "POST", "/v1/grants", tc.body)
			var detail string
			_ = json.Unmarshal(out["detail"], &detail)
			if code != http.StatusBadRequest || errCode(out) != "bad_request" || !strings.Contains(detail, tc.field) {
				t.Fatalf("%d %s %q", code, out["error"], detail)
			}
		})
	}
	code, _ := f.call(t, "root", "POST", "/v1/grants", `{"principal":"a","plugins":["p"],"not_after":"`+future+`"}`)
	if code != http.StatusCreated {
		t.Fatalf("not_after: %d", code)
	}
}

// A grant whose grant.issued record cannot be written does not stand: it
// is revoked again and the answer is 503 evidence_unavailable.
func TestGrantIssueNeedsEvidence(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	disk := &fullDisk{full: full, typ: "grant.issued"}
	f := newLedgerFixtureWith(t, func(l *evidence.Log) {
		l.WrapFile(func(file *os.File) evidence.Writer { disk.file = file; return disk })
	})
	code, out := f.call(t, "root", "POST", "/v1/grants", `{"principal":"alice","plugins":["tickets"],"ttl":"1h"}`)
	if code != http.StatusServiceUnavailable || errCode(out) != "evidence_unavailable" {
		t.Fatalf("%d %s", code, out["error"])
	}
	gs, _ := f.store.ListAccessGrants(context.Background())
	if len(gs) != 1 || gs[0].RevokedAt.IsZero() {
		t.Fatalf("the grant without evidence is live: %+v", gs)
	}
}

// Without EnableLedger the routes say so.
func TestLedgerRoutesDisabled(t *testing.T) {
	h := host.New(host.Options{Policy: policy.AllowAll()})
	defer h.Shutdown(context.Background())
	srv := httptest.NewServer(control.NewHandler(h))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/grants")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusNotFound || e["error"] != "ledger_disabled" {
		t.Fatalf("%d %v", resp.StatusCode, e)
	}
}

// The revocation hook may be set while the API serves (the host sets it
// once its invoke path is up): requests in flight keep the hook they read.
func TestSetGrantRevokedWhileServing(t *testing.T) {
	f := newLedgerFixture(t)
	h := host.New(host.Options{Policy: policy.AllowAll()})
	defer h.Shutdown(context.Background())
	ctl := control.NewHandler(h)
	ctl.EnableLedger(f.store, func(p host.Principal) bool { return true })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctl.ServeHTTP(w, r.WithContext(control.WithCaller(r.Context(), host.Principal{ID: "root"})))
	}))
	defer srv.Close()
	if err := f.store.PutAccessGrant(context.Background(), &broker.AccessGrant{ID: "g_1", Principal: "a",
		IssuedAt: time.Now(), NotAfter: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			resp, err := http.Post(srv.URL+"/v1/grants/g_1/revoke", "application/json", nil)
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	var mu sync.Mutex
	calls := 0
	for setting := true; setting; {
		ctl.SetGrantRevoked(func(string) { mu.Lock(); calls++; mu.Unlock() })
		select {
		case <-done:
			setting = false
		default:
		}
	}
	resp, err := http.Post(srv.URL+"/v1/grants/g_1/revoke", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if calls == 0 {
		t.Fatal("the hook set last was not called")
	}
}
