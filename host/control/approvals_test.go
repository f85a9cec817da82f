package control_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/control"
)

func (f *ledgerFixture) putApproval(t *testing.T, id string, required, uses int, eligible ...string) {
	t.Helper()
	a := &broker.Approval{ID: id, RequestDigest: "sha256:req", Plugin: "tickets", Method: "tickets.v1.Tickets/Create",
		Requester: "alice", Actor: "user:bob", RunID: "run-1", Rule: "second-person", Required: required, Eligible: eligible,
		State: broker.ApprovalPending, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Uses: uses}
	if err := f.store.PutApproval(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func approvalOf(t *testing.T, out map[string]json.RawMessage) broker.Approval {
	t.Helper()
	var a broker.Approval
	if err := json.Unmarshal(out["approval"], &a); err != nil {
		t.Fatalf("no approval in the answer: %v", err)
	}
	return a
}

// Approvers other than the requester decide; each counts once; the vote
// that grants an approval for several uses makes it an access grant bound
// to the request digest; every vote and state change is evidence.
func TestApprovalRoutes(t *testing.T) {
	f := newLedgerFixture(t)
	f.putApproval(t, "ap_1", 2, 5, "ops:*")
	steps := []struct {
		who, path, body string
		status          int
		code, state     string
	}{
		{"alice", "approve", "", http.StatusForbidden, "self_approval", ""},
		{"mallory", "approve", "", http.StatusForbidden, "not_eligible", ""},
		{"ops:carol", "approve", "", http.StatusOK, "", broker.ApprovalPending},
		{"ops:carol", "approve", "", http.StatusConflict, "already_approved", ""},
		{"ops:dave", "approve", `{"uses":9}`, http.StatusBadRequest, "bad_request", ""},
		{"ops:dave", "approve", `{"uses":3,"grant_ttl":"30m"}`, http.StatusOK, "", broker.ApprovalGranted},
		{"ops:erin", "deny", "", http.StatusConflict, "approval_decided", ""},
	}
	for i, st := range steps {
		code, out := f.call(t, st.who, "POST", "/v1/approvals/ap_1/"+st.path, st.body)
		if code != st.status || errCode(out) != st.code {
			t.Fatalf("step %d (%s %s): %d %s", i, st.who, st.path, code, out["error"])
		}
		if st.state != "" {
			if a := approvalOf(t, out); a.State != st.state {
				t.Fatalf("step %d: state %s, want %s", i, a.State, st.state)
			}
		}
	}
	code, out := f.call(t, "bob", "GET", "/v1/approvals/ap_1", "")
	a := approvalOf(t, out)
	if code != http.StatusOK || a.GrantID == "" || a.Uses != 3 {
		t.Fatalf("granted approval: %d %+v", code, a)
	}
	g, err := f.store.GetAccessGrant(context.Background(), a.GrantID)
	if err != nil {
		t.Fatal(err)
	}
	if g.RequestDigest != "sha256:req" || g.Uses != 3 || g.FromApproval != "ap_1" || g.Principal != "alice" ||
		g.Actor != "user:bob" || g.Plugins[0] != "tickets" || g.IssuedBy != "ops:dave" || g.NotAfter.Sub(g.IssuedAt) != 30*time.Minute {
		t.Fatalf("grant from the approval: %+v", g)
	}
	if n := len(f.records(t, "approval.decided")); n != 2 {
		t.Fatalf("%d approval.decided records, want 2 (one per counted vote)", n)
	}
	if rec := f.records(t, "approval.granted"); len(rec) != 1 || rec[0]["grant_id"] != a.GrantID {
		t.Fatalf("approval.granted: %v", rec)
	}
	if rec := f.records(t, "grant.issued"); len(rec) != 1 || rec[0]["from_approval"] != "ap_1" {
		t.Fatalf("grant.issued: %v", rec)
	}

	// One deny decides; a single-use approval makes no grant.
	f.putApproval(t, "ap_2", 2, 0)
	if code, out := f.call(t, "carol", "POST", "/v1/approvals/ap_2/deny", ""); code != http.StatusOK || approvalOf(t, out).State != broker.ApprovalDenied {
		t.Fatalf("deny: %d %s", code, out["error"])
	}
	if rec := f.records(t, "approval.denied"); len(rec) != 1 || rec[0]["denier"] != "carol" {
		t.Fatalf("approval.denied: %v", rec)
	}
	f.putApproval(t, "ap_3", 1, 0)
	if code, out := f.call(t, "carol", "POST", "/v1/approvals/ap_3/approve", ""); code != http.StatusOK || approvalOf(t, out).GrantID != "" {
		t.Fatalf("single use: %d %s", code, out["approval"])
	}

	code, out = f.call(t, "bob", "GET", "/v1/approvals", "")
	var list []broker.Approval
	_ = json.Unmarshal(out["approvals"], &list)
	if code != http.StatusOK || len(list) != 3 {
		t.Fatalf("list: %d %d", code, len(list))
	}
	if code, out := f.call(t, "bob", "POST", "/v1/approvals/ap_none/approve", ""); code != http.StatusNotFound || errCode(out) != "approval_unknown" {
		t.Fatalf("unknown: %d %s", code, out["error"])
	}
	if code, out := f.call(t, "bob", "POST", "/v1/approvals/ap_3/deny", `{"uses":2}`); code != http.StatusBadRequest {
		t.Fatalf("uses on a deny: %d %s", code, out["error"])
	}
}

// One approval becomes at most control.MaxApprovalUses calls: a vote asking for
// more is refused before it counts, and the approval stays pending.
func TestApprovalUsesBounded(t *testing.T) {
	f := newLedgerFixture(t)
	f.putApproval(t, "ap_2", 1, 0)
	code, out := f.call(t, "carol", "POST", "/v1/approvals/ap_2/approve", `{"uses":`+strconv.Itoa(control.MaxApprovalUses+1)+`}`)
	if code != http.StatusBadRequest || errCode(out) != "bad_request" {
		t.Fatalf("approve for %d uses: %d %v", control.MaxApprovalUses+1, code, out["error"])
	}
	_, out = f.call(t, "bob", "GET", "/v1/approvals/ap_2", "")
	if a := approvalOf(t, out); a.State != broker.ApprovalPending || len(a.Approvers) != 0 {
		t.Fatalf("after the refused vote: %+v", a)
	}
	code, out = f.call(t, "carol", "POST", "/v1/approvals/ap_2/approve", `{"uses":`+strconv.Itoa(control.MaxApprovalUses)+`}`)
	if a := approvalOf(t, out); code != http.StatusOK || a.State != broker.ApprovalGranted || a.Uses != control.MaxApprovalUses {
		t.Fatalf("approve for %d uses: %d %+v", control.MaxApprovalUses, code, a)
	}
}
