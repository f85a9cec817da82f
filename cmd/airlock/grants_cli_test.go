package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	hostcontrol "github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/policy"
)

// ledgerControl is a control API with a ledger whose callers are named by
// the bearer token they present (as principal token files name them):
// root is the operator. It returns the API's URL, the store, and a token
// file for each principal.
func ledgerControl(t *testing.T) (string, *broker.MemoryStore, map[string]string) {
	t.Helper()
	store := broker.NewMemoryStore(100, time.Minute, time.Hour, nil)
	h := host.New(host.Options{Policy: policy.AllowAll()})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	ctl := hostcontrol.NewHandler(h)
	ctl.EnableLedger(store, func(p host.Principal) bool { return p.ID == "root" })
	files := map[string]string{}
	dir := t.TempDir()
	for _, who := range []string{"root", "alice", "bob"} {
		files[who] = filepath.Join(dir, who+".token")
		if err := os.WriteFile(files[who], []byte("token-of-"+who+"-padded-to-more-than-32-characters\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if who, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer token-of-"); ok {
			who, _, _ = strings.Cut(who, "-")
			r = r.WithContext(hostcontrol.WithCaller(r.Context(), host.Principal{ID: who, Method: "token"}))
		}
		ctl.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, store, files
}

// airlock grants issues, lists, shows and revokes over the control API,
// as the caller its token names; a non-operator is refused by name.
func TestGrantsCLI(t *testing.T) {
	url, store, tokens := ledgerControl(t)
	as := func(who string) []string {
		return []string{"AIRLOCK_CONTROL=" + url, "AIRLOCK_CONTROL_TOKEN_FILE=" + tokens[who], "AIRLOCK_CONFIG="}
	}
	issue := []string{"grants", "issue", "--principal", "alice", "--plugin", "tickets", "--method", "tickets.v1.Tickets/Create",
		"--ttl", "2h", "--calls", "20", "--residency", "eu"}
	if _, errOut, code := cli(t, as("alice"), "", issue...); code != 1 || !strings.Contains(errOut, "not_an_operator") {
		t.Fatalf("issue as alice: exit %d %s", code, errOut)
	}
	out, errOut, code := cli(t, as("root"), "", issue...)
	id := regexp.MustCompile(`issued (g_[0-9a-f]{32})`).FindStringSubmatch(out)
	if code != 0 || id == nil || !strings.Contains(out, "budget:         calls 20") {
		t.Fatalf("issue: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cli(t, as("bob"), "", "grants", "list")
	if code != 0 || !strings.Contains(out, "ID  ") || !strings.Contains(out, id[1]+"  live") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = cli(t, as("bob"), "", "grants", "show", "--json", id[1])
	var shown struct {
		Grant hostcontrol.GrantView `json:"grant"`
		Spent broker.Spend          `json:"spent"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || shown.Grant.Principal != "alice" || shown.Grant.IssuedBy != "root" {
		t.Fatalf("show --json: exit %d\n%s", code, out)
	}
	out, errOut, code = cli(t, as("root"), "", "grants", "revoke", id[1])
	if code != 0 || !strings.Contains(out, "state:          revoked") {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, errOut)
	}
	if g, _ := store.GetAccessGrant(context.Background(), id[1]); g.RevokedBy != "root" {
		t.Fatalf("stored: %+v", g)
	}
	if _, errOut, code := cli(t, as("root"), "", "grants", "issue", "--plugin", "x", "--ttl", "1h"); code != 1 ||
		!strings.Contains(errOut, "bad_request: principal or actor") {
		t.Fatalf("a bad grant: exit %d %s", code, errOut)
	}
	if _, _, code := cli(t, as("root"), "", "grants", "show"); code != 2 {
		t.Fatalf("show without an ID: exit %d", code)
	}
}

// airlock approvals lists, shows, approves (with --uses) and denies.
func TestApprovalsCLI(t *testing.T) {
	url, store, tokens := ledgerControl(t)
	as := func(who string) []string {
		return []string{"AIRLOCK_CONTROL=" + url, "AIRLOCK_CONTROL_TOKEN_FILE=" + tokens[who], "AIRLOCK_CONFIG="}
	}
	for _, id := range []string{"ap_1", "ap_2"} {
		if err := store.PutApproval(context.Background(), &broker.Approval{ID: id, RequestDigest: "sha256:r", Plugin: "tickets",
			Method: "Create", Requester: "alice", Rule: "r", Required: 1, State: broker.ApprovalPending, Uses: 5,
			CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := cli(t, as("bob"), "", "approvals", "list")
	if code != 0 || !strings.Contains(out, "ap_1") || !strings.Contains(out, "pending") || !strings.Contains(out, "0/1") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli(t, as("alice"), "", "approvals", "approve", "ap_1"); code != 1 || !strings.Contains(errOut, "self_approval") {
		t.Fatalf("self-approval: exit %d %s", code, errOut)
	}
	out, errOut, code = cli(t, as("bob"), "", "approvals", "approve", "--uses", "2", "ap_1")
	if code != 0 || !strings.Contains(out, "state:          granted") || !strings.Contains(out, "grant:          g_") {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cli(t, as("bob"), "", "approvals", "deny", "ap_2")
	if code != 0 || !strings.Contains(out, "denied by:      bob") {
		t.Fatalf("deny: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = cli(t, as("bob"), "", "approvals", "show", "--json", "ap_2")
	if code != 0 || !strings.Contains(out, `"state": "denied"`) {
		t.Fatalf("show --json: exit %d\n%s", code, out)
	}
	if _, _, code := cli(t, as("bob"), "", "approvals", "frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
}
