package control_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// A stated actor reaches the host only when the actor check allows it
// for this caller; without a check every stated actor is refused 403;
// a malformed one is 400. Without one the actor is the caller.
func TestStatedActor(t *testing.T) {
	a := newAPIHost(t)
	dir := t.TempDir()
	aliceTok, aliceFile := writeToken(t, dir, "alice.token")
	bobTok, bobFile := writeToken(t, dir, "bob.token")
	srv := httptest.NewServer(control.Authenticate(a.ctl, control.AuthOptions{
		Tokens: []control.TokenFile{{Principal: "support-agent", File: aliceFile}, {Principal: "bob", File: bobFile}}}, nil))
	defer srv.Close()
	call := func(tok, actor string) answer {
		return invoke(t, srv.Client(), srv.URL, tok, `{"plugin":"stub","method":"tool","input":{},"actor":`+actor+`}`)
	}
	if got := call(aliceTok, `{"kind":"user","id":"carol"}`); got.status != http.StatusForbidden || got.code != "actor_not_allowed" {
		t.Fatalf("no actor check: %d %s", got.status, got.body)
	}
	var asked []string
	a.ctl.SetActorCheck(func(p host.Principal, kind, id string) bool {
		asked = append(asked, p.ID+">"+kind+":"+id)
		return p.ID == "support-agent" && kind == control.ActorUser
	})
	if got := call(aliceTok, `{"kind":"user","id":"carol@example.com"}`); got.status != http.StatusOK {
		t.Fatalf("allowed actor: %d %s", got.status, got.body)
	}
	if got := a.rec.last(); got.Actor != (host.Actor{Kind: "user", Principal: "carol@example.com"}) || got.Caller.ID != "support-agent" {
		t.Fatalf("the host saw actor %+v caller %+v", got.Actor, got.Caller)
	}
	if got := call(bobTok, `{"kind":"user","id":"carol@example.com"}`); got.status != http.StatusForbidden || got.code != "actor_not_allowed" {
		t.Fatalf("a caller the check refuses: %d %s", got.status, got.body)
	}
	if strings.Join(asked, ",") != "support-agent>user:carol@example.com,bob>user:carol@example.com" {
		t.Fatalf("the check was asked %v", asked)
	}
	for name, actor := range map[string]string{
		"unknown kind":  `{"kind":"admin","id":"x"}`,
		"principal":     `{"kind":"principal","id":"x"}`,
		"empty id":      `{"kind":"user","id":""}`,
		"control chars": `{"kind":"user","id":"a\nb"}`,
		"too long":      `{"kind":"user","id":"` + strings.Repeat("x", control.MaxActorID+1) + `"}`,
	} {
		if got := call(aliceTok, actor); got.status != http.StatusBadRequest || got.code != "bad_actor" {
			t.Errorf("%s: %d %s", name, got.status, got.body)
		}
	}
}

// The run context is validated and reaches the host; a bad value is 400
// bad_run_context naming the field, never echoing the value.
func TestRunContext(t *testing.T) {
	log, logBuf := logTo()
	a := newAPIHostLog(t, log)
	ctlTok := peerauth.NewSecret()
	srv := httptest.NewServer(control.Authenticate(a.ctl, control.AuthOptions{ControlToken: peerauth.NewToken(ctlTok)}, log))
	defer srv.Close()
	digest := "sha256:" + strings.Repeat("ab", 32)
	body := `{"plugin":"stub","method":"tool","input":{},"run_id":"run-2026.12:42","change_id":"CHG_7","plan_digest":"` + digest + `"}`
	if got := invoke(t, srv.Client(), srv.URL, ctlTok, body); got.status != http.StatusOK {
		t.Fatalf("%d %s", got.status, got.body)
	}
	if got := a.rec.last().Run; got != (host.RunContext{RunID: "run-2026.12:42", ChangeID: "CHG_7", PlanDigest: digest}) {
		t.Fatalf("the host saw run %+v", got)
	}
	if !strings.Contains(logBuf.String(), `"run_id":"run-2026.12:42"`) {
		t.Fatalf("the audit line carries no run_id:\n%s", logBuf.String())
	}
	seen := a.rec.count()
	for _, tc := range []struct{ field, json string }{
		{"run_id", `"run_id":"has space"`},
		{"run_id", `"run_id":"` + strings.Repeat("r", 129) + `"`},
		{"change_id", `"change_id":"slash/no"`},
		{"plan_digest", `"plan_digest":"sha256:ABAB"`},
		{"plan_digest", `"plan_digest":"sha512:` + strings.Repeat("ab", 32) + `"`},
		{"plan_digest", `"plan_digest":"sha256:` + strings.Repeat("AB", 32) + `"`},
	} {
		got := invoke(t, srv.Client(), srv.URL, ctlTok, `{"plugin":"stub","method":"tool","input":{},`+tc.json+`}`)
		if got.status != http.StatusBadRequest || got.code != "bad_run_context" || !strings.Contains(got.body, tc.field) {
			t.Errorf("%s: %d %s", tc.json, got.status, got.body)
		}
		if strings.Contains(got.body, "has space") || strings.Contains(got.body, "slash/no") {
			t.Errorf("the refusal echoes the value: %s", got.body)
		}
	}
	if a.rec.count() != seen {
		t.Fatal("a bad run context reached the host")
	}
}

// A handler served without Authenticate names no caller: it runs no
// call.
func TestNoCallerNoCall(t *testing.T) {
	a := newAPIHost(t)
	srv := httptest.NewServer(a.ctl)
	defer srv.Close()
	if got := invoke(t, srv.Client(), srv.URL, "", stubCall); got.status != http.StatusUnauthorized || a.rec.count() != 0 {
		t.Fatalf("%d %s", got.status, got.body)
	}
}
