package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hostcontrol "github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// airlock invoke presents the caller's credentials — a principal's
// token file, or a client certificate — and states --actor and the run
// context; the control API's own authentication names the caller.
func TestInvokeStatesCallerActorAndRun(t *testing.T) {
	type seen struct {
		caller string
		req    hostcontrol.InvocationRequest
	}
	got := make(chan seen, 1)
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := hostcontrol.CallerFrom(r.Context())
		var req hostcontrol.InvocationRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		got <- seen{p.ID, req}
		fmt.Fprintln(w, `{"event":"outcome","invocation_id":"i1","status":"STATUS_SUCCEEDED"}`)
	})
	dir := t.TempDir()
	aliceTok := peerauth.NewSecret()
	aliceFile := filepath.Join(dir, "alice.token")
	if err := os.WriteFile(aliceFile, []byte(aliceTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := testenv.NewCA(t)
	srv := httptest.NewUnstartedServer(hostcontrol.Authenticate(route, hostcontrol.AuthOptions{
		Tokens: []hostcontrol.TokenFile{{Principal: "alice", File: aliceFile}}}, nil))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "127.0.0.1")}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS13}
	srv.StartTLS()
	defer srv.Close()
	certFile, keyFile := testenv.WriteKeyPair(t, ca.Issue(t, "ci-runner", "spiffe://example.org/ci"))
	caFile := ca.PEMFile
	digest := "sha256:" + strings.Repeat("0f", 32)
	tls := []string{"--control", srv.URL, "--control-cert", certFile, "--control-key", keyFile, "--control-ca", caFile}

	out, stderr, code := cli(t, nil, "", append(append([]string{"invoke"}, tls...), "--control-token-file", aliceFile,
		"--actor", "user:carol@example.com", "--run-id", "run-7", "--change-id", "chg-1", "--plan-digest", digest, "stub", "tool")...)
	if code != 0 {
		t.Fatalf("invoke: %d\n%s%s", code, out, stderr)
	}
	s := <-got
	if s.caller != "alice" || s.req.Actor == nil || *s.req.Actor != (hostcontrol.ActorRef{Kind: "user", ID: "carol@example.com"}) ||
		s.req.RunID != "run-7" || s.req.ChangeID != "chg-1" || s.req.PlanDigest != digest {
		t.Fatalf("the control API saw %+v (actor %+v)", s, s.req.Actor)
	}
	// The certificate alone names the caller.
	out, stderr, code = cli(t, []string{"AIRLOCK_CONTROL_TOKEN_FILE="}, "", append(append([]string{"invoke"}, tls...), "stub", "tool")...)
	if code != 0 {
		t.Fatalf("invoke with a certificate: %d\n%s%s", code, out, stderr)
	}
	if s := <-got; s.caller != "spiffe://example.org/ci" || s.req.Actor != nil {
		t.Fatalf("the control API saw %+v", s)
	}
	_, stderr, code = cli(t, nil, "", append(append([]string{"invoke"}, tls...), "--actor", "carol", "stub", "tool")...)
	if code == 0 || !strings.Contains(stderr, "--actor: must be KIND:ID") {
		t.Fatalf("--actor without a kind: %d\n%s", code, stderr)
	}
	out, stderr, _ = cli(t, nil, "", "invoke", "-h")
	out += stderr
	for _, flag := range []string{"-actor", "-run-id", "-change-id", "-plan-digest", "-control-cert", "-control-token-file", "OIDC JWT"} {
		if !strings.Contains(out, flag) {
			t.Errorf("invoke -h does not name %s", flag)
		}
	}
}
